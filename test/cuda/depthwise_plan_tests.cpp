// The host side of Castor's depthwise convolution kernels, without a GPU: which convolutions
// they take (conv::depthwiseGeometry, depthwise::unsupported) and the launch plans
// (depthwise::launchPlan): blocks of whole warps within the kernels' thread limit and shared
// memory, patches that cover every output, the weight gradient's chunks and workspace, on the
// depthwise layers of ConvNeXt-T and EfficientNet-B0 and on the GPU test's odd shapes.
//
//   castor_depthwise_plan_tests        (exit status 0 when everything passes)
//   castor_depthwise_plan_tests --print N C H W K stride pad   (the layer's launch plans as JSON)
#include "../common/expectations.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/depthwise_conv.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace castor;
using namespace castor::cuda;

namespace {

using test::expect;

depthwise::Geometry geometry(int64_t N, int64_t C, int64_t H, int64_t W, int K, int stride, int pad) {
  depthwise::Geometry g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.stride = stride, g.padH = g.padW = pad;
  g.P = (H + 2 * pad - K) / stride + 1;
  g.Q = (W + 2 * pad - K) / stride + 1;
  return g;
}

std::string describe(const depthwise::Geometry &g) {
  return "N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " + std::to_string(g.H) + "x" +
         std::to_string(g.W) + " k" + std::to_string(g.K) + " s" + std::to_string(g.stride) + " pad " +
         std::to_string(g.padH);
}

void checkPlans(const depthwise::Geometry &g) {
  const char *passNames[] = {"forward", "data gradient", "weight gradient"};
  for (int dt : {kF16, kBF16, kF32})
    for (int pi = 0; pi < 3; ++pi) {
      const auto pass = depthwise::Pass(pi);
      const depthwise::LaunchPlan lp = depthwise::launchPlan(g, pass, dt, 132);
      const std::string what = describe(g) + " " + passNames[pi] + (dt == kF32 ? " f32" : " f16");
      const int subs = lp.subH * lp.subW;
      expect(lp.threads == lp.channels * subs && lp.threads <= 128 && lp.channels % 8 == 0,
             what + ": " + std::to_string(lp.threads) + " threads for " + std::to_string(lp.channels) + " channels");
      // Whole warps where the channels allow it (f32's windows may need fewer channels than a warp).
      expect(lp.threads % 32 == 0 || g.C % 32 != 0 || dt == kF32,
             what + ": " + std::to_string(lp.threads) + " threads, not whole warps");
      expect(lp.sharedBytes > 0 && lp.sharedBytes <= 48 * 1024, what + ": " + std::to_string(lp.sharedBytes) +
                                                                     " bytes of shared memory");
      expect(lp.vectorized == (g.C % (dt == kF32 ? 4 : 8) == 0), what + ": vectorized iff C allows 16-byte loads");
      expect(lp.tile == 7 || lp.tile == 8, what + ": tile");
      // The patches cover the output (dx's phases for the stride-2 data gradient).
      int64_t rows = g.P, cols = g.Q, perTileH = int64_t(lp.subH) * lp.tile, perTileW = int64_t(lp.subW) * lp.tile;
      if (pass == depthwise::Pass::BackwardData) {
        rows = g.stride == 1 ? g.H : (g.H + 1) / 2;
        cols = g.stride == 1 ? g.W : (g.W + 1) / 2;
        if (g.stride == 2)
          perTileH = perTileW = lp.tile;
      }
      expect(lp.tilesH * perTileH >= rows && (lp.tilesH - 1) * perTileH < rows && lp.tilesW * perTileW >= cols &&
                 (lp.tilesW - 1) * perTileW < cols,
             what + ": tiles cover the output once");
      expect(lp.channelBlocks * lp.channels >= g.C && (lp.channelBlocks - 1) * lp.channels < g.C,
             what + ": channel blocks");
      const int64_t tiles = g.N * lp.tilesH * lp.tilesW;
      if (pass == depthwise::Pass::BackwardFilter) {
        expect(lp.chunks >= 1 && lp.chunks <= tiles, what + ": " + std::to_string(lp.chunks) + " chunks of " +
                                                          std::to_string(tiles) + " tiles");
        expect(lp.blocks == lp.chunks * lp.channelBlocks, what + ": blocks");
        expect(lp.workspaceBytes == size_t(lp.chunks * g.C * g.K * g.K) * sizeof(float), what + ": workspace");
        // Enough blocks for two a multiprocessor, or every tile its own chunk.
        expect(lp.blocks >= 2 * 132 || lp.chunks == tiles, what + ": " + std::to_string(lp.blocks) + " blocks");
      } else {
        expect(lp.blocks == tiles * lp.channelBlocks && lp.workspaceBytes == 0, what + ": blocks");
      }
      expect(lp.blocks < (int64_t(1) << 31), what + ": grid");
    }
}

// The row kernels' plans: whole 4-byte vectors of channels, blocks that cover every channel and
// output column once with at most 256 threads, strips that cover every output row.
void checkRowsPlans(const depthwise::Geometry &g) {
  for (int dt : {kF16, kBF16, kF32})
    for (const auto pass : {depthwise::Pass::Forward, depthwise::Pass::BackwardData}) {
      const std::string what = describe(g) + (pass == depthwise::Pass::Forward ? " forward" : " data gradient") +
                               (dt == kF32 ? " f32" : " f16") + " [rows]";
      const std::string why = depthwise::rowsUnsupported(g, pass, dt);
      const bool expected = g.K != 7 && g.C % (dt == kF32 ? 1 : 2) == 0 &&
                            (pass == depthwise::Pass::Forward || g.stride == 1 || g.padH % 2 == g.padW % 2);
      expect(why.empty() == expected, what + ": taken iff K is 3 or 5 and C whole vectors (" + why + ")");
      if (!why.empty())
        continue;
      const depthwise::RowsPlan rp = depthwise::rowsPlan(g, pass, dt);
      const int64_t outH = pass == depthwise::Pass::Forward ? g.P : g.H, outW = pass == depthwise::Pass::Forward ? g.Q : g.W;
      const int64_t vectors = g.C / rp.vector;
      expect(rp.vector == (dt == kF32 ? 1 : 2), what + ": 4-byte vectors");
      expect(rp.lanes >= 1 && rp.lanes <= 64 && rp.channelBlocks * rp.lanes >= vectors &&
                 (rp.channelBlocks - 1) * rp.lanes < vectors,
             what + ": " + std::to_string(rp.channelBlocks) + " channel blocks of " + std::to_string(rp.lanes));
      expect(rp.threads == rp.lanes * rp.colGroups && rp.threads <= 256, what + ": " + std::to_string(rp.threads) +
                                                                             " threads");
      const int64_t perTile = int64_t(rp.colGroups) * rp.cols;
      expect(rp.colTiles * perTile >= outW && (rp.colTiles - 1) * perTile < outW, what + ": column tiles");
      expect(rp.rowTiles * rp.rows >= outH && (rp.rowTiles - 1) * rp.rows < outH, what + ": row strips");
      expect(rp.blocks == g.N * rp.rowTiles * rp.colTiles * rp.channelBlocks && rp.blocks < (int64_t(1) << 31),
             what + ": blocks");
    }
}

// A conv::Problem of a depthwise layer, as parse makes it from a channels-last plan.
struct ProblemTensors {
  plan::Tensor x, w, y;
  conv::Problem p;
  ProblemTensors(int64_t N, int64_t C, int64_t H, int K, int stride, int pad, int dilation, int64_t groups,
                 plan::DType dtype) {
    const int64_t P = (H + 2 * pad - dilation * (K - 1) - 1) / stride + 1;
    for (auto [t, dims] : {std::pair{&x, Shape{N, C, H, H}}, std::pair{&w, Shape{C, C / groups, K, K}},
                           std::pair{&y, Shape{N, C, P, P}}}) {
      for (int64_t d : dims)
        t->add_shape(d);
      t->set_dtype(dtype);
    }
    p.pass = conv::Pass::Forward;
    p.x = &x, p.w = &w, p.y = &y;
    p.dtype = dtype;
    p.xs = shapeOf(x), p.ws = shapeOf(w), p.ys = shapeOf(y);
    p.padH = p.padW = pad;
    p.strideH = p.strideW = stride;
    p.dilationH = p.dilationW = dilation;
    p.groups = groups;
    p.xNhwc = p.wNhwc = p.yNhwc = true;
  }
};

void checkEligibility() {
  auto taken = [](const conv::Problem &p) { return bool(conv::depthwiseGeometry(p)); };
  ProblemTensors ok(2, 96, 56, 7, 1, 3, 1, 96, plan::F16);
  expect(taken(ok.p), "ConvNeXt's 7x7 depthwise layer is taken");
  for (plan::DType dt : {plan::BF16, plan::F32}) {
    ProblemTensors t(2, 96, 56, 7, 1, 3, 1, 96, dt);
    expect(taken(t.p), "bf16 and f32 are taken");
  }
  ProblemTensors f64(2, 96, 56, 7, 1, 3, 1, 96, plan::F64);
  expect(!taken(f64.p), "f64 is left to cuDNN");
  ProblemTensors grouped(2, 96, 56, 3, 1, 1, 1, 48, plan::F16);
  expect(!taken(grouped.p), "two channels a group is left to cuDNN");
  ProblemTensors dilated(2, 32, 28, 3, 1, 2, 2, 32, plan::F16);
  expect(!taken(dilated.p), "a dilation is left to cuDNN");
  for (int K : {1, 9}) {
    ProblemTensors t(2, 32, 28, K, 1, K / 2, 1, 32, plan::F16);
    expect(!taken(t.p), "kernel size " + std::to_string(K) + " is left to cuDNN");
  }
  ProblemTensors stride3(2, 32, 28, 3, 3, 1, 1, 32, plan::F16);
  expect(!taken(stride3.p), "stride 3 is left to cuDNN");
  ProblemTensors nchw(2, 32, 28, 3, 1, 1, 1, 32, plan::F16);
  nchw.p.xNhwc = nchw.p.yNhwc = false;
  expect(!taken(nchw.p), "NCHW storage is left to cuDNN");
  ProblemTensors rect(2, 32, 28, 3, 1, 1, 1, 32, plan::F16);
  rect.p.strideW = 2;
  expect(!taken(rect.p), "unequal strides are left to cuDNN");
  // The tuning key says whether the kernels race (so that an older entry is not taken for it).
  expect(conv::signature(ok.p).find("|own=dwconv") != std::string::npos, "the race's key names the own kernels");
  expect(conv::signature(grouped.p).find("|own=") == std::string::npos, "other layers' keys are unchanged");

  expect(depthwise::unsupported(geometry(1, 8, 5, 5, 3, 1, 1)).empty(), "a small layer is supported");
  depthwise::Geometry wrongP = geometry(1, 8, 5, 5, 3, 1, 1);
  wrongP.P += 1;
  expect(!depthwise::unsupported(wrongP).empty(), "output dims that disagree are refused");
  expect(!depthwise::unsupported(geometry(1, 8, 5, 5, 4, 1, 1)).empty(), "kernel size 4 is refused");
}

// --print N C H W K stride pad: the launch plans of that layer, one JSON line per pass and dtype.
int printPlans(char **argv) {
  const depthwise::Geometry g = geometry(std::atoll(argv[0]), std::atoll(argv[1]), std::atoll(argv[2]),
                                         std::atoll(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]));
  if (!depthwise::unsupported(g).empty()) {
    std::printf("unsupported: %s\n", depthwise::unsupported(g).c_str());
    return 1;
  }
  for (int dt : {kF16, kBF16, kF32})
    for (int pi = 0; pi < 3; ++pi) {
      const depthwise::LaunchPlan lp = depthwise::launchPlan(g, depthwise::Pass(pi), dt, 132);
      std::printf("{\"dtype\": %d, \"pass\": %d, \"P\": %lld, \"Q\": %lld, \"tile\": %d, \"subH\": %d, \"subW\": %d, "
                  "\"channels\": %d, \"vectorized\": %d, \"tilesH\": %lld, \"tilesW\": %lld, \"channelBlocks\": %lld, "
                  "\"chunks\": %lld, \"blocks\": %lld, \"threads\": %d, \"sharedBytes\": %zu, \"workspaceBytes\": %zu}\n",
                  dt, pi, (long long)g.P, (long long)g.Q, lp.tile, lp.subH, lp.subW, lp.channels, int(lp.vectorized),
                  (long long)lp.tilesH, (long long)lp.tilesW, (long long)lp.channelBlocks, (long long)lp.chunks,
                  (long long)lp.blocks, lp.threads, lp.sharedBytes, lp.workspaceBytes);
    }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 9 && std::string(argv[1]) == "--print")
    return printPlans(argv + 2);
  checkEligibility();
  // ConvNeXt-T's depthwise layers (batch 128), EfficientNet-B0's, the GPU test's shapes.
  const std::vector<depthwise::Geometry> layers = {
      geometry(128, 96, 56, 56, 7, 1, 3),    geometry(128, 192, 28, 28, 7, 1, 3), geometry(128, 384, 14, 14, 7, 1, 3),
      geometry(128, 768, 7, 7, 7, 1, 3),     geometry(128, 32, 112, 112, 3, 1, 1), geometry(128, 96, 112, 112, 3, 2, 1),
      geometry(128, 144, 56, 56, 3, 1, 1),   geometry(128, 144, 56, 56, 5, 2, 2),  geometry(128, 240, 28, 28, 5, 1, 2),
      geometry(128, 240, 28, 28, 3, 2, 1),   geometry(128, 480, 14, 14, 3, 1, 1),  geometry(128, 480, 14, 14, 5, 1, 2),
      geometry(128, 672, 14, 14, 5, 1, 2),   geometry(128, 672, 14, 14, 5, 2, 2),  geometry(128, 1152, 7, 7, 5, 1, 2),
      geometry(128, 1152, 7, 7, 3, 1, 1),    geometry(1, 13, 11, 13, 7, 2, 3),     geometry(5, 96, 15, 15, 5, 1, 2),
      geometry(1, 384, 14, 14, 3, 2, 1),     geometry(5, 40, 9, 10, 7, 1, 0),      geometry(2, 24, 7, 7, 7, 2, 4),
  };
  for (const depthwise::Geometry &g : layers) {
    expect(depthwise::unsupported(g).empty(), describe(g) + ": supported (" + depthwise::unsupported(g) + ")");
    checkPlans(g);
    checkRowsPlans(g);
  }
  // EfficientNet-B0's first depthwise layer: 16 vectors a row, 7 groups of 4 of its 112 columns.
  const depthwise::RowsPlan first = depthwise::rowsPlan(geometry(128, 32, 112, 112, 3, 1, 1), depthwise::Pass::Forward, kF16);
  expect(first.lanes == 16 && first.colGroups == 7 && first.colTiles == 4, "C = 32 at 112 columns: 16 lanes x 7 groups");
  expect(depthwise::rowsPlan(geometry(128, 144, 56, 56, 3, 1, 1), depthwise::Pass::Forward, kF16).lanes == 36,
         "C = 144 in f16: two channel blocks of 36 vectors");
  depthwise::Geometry uneven = geometry(2, 32, 14, 14, 3, 2, 1);
  uneven.padW = 2;
  uneven.Q = (uneven.W + 2 * uneven.padW - 3) / 2 + 1;
  expect(!depthwise::rowsUnsupported(uneven, depthwise::Pass::BackwardData, kF16).empty() &&
             depthwise::rowsUnsupported(uneven, depthwise::Pass::Forward, kF16).empty(),
         "paddings of different parity: the stride-2 data gradient is left to the tiles");
  // Channels per block: the largest that keeps the lanes busy.
  expect(depthwise::launchPlan(geometry(128, 144, 56, 56, 3, 1, 1), depthwise::Pass::Forward, kF16, 132).channels == 24,
         "C = 144 takes blocks of 24 channels");
  expect(depthwise::launchPlan(geometry(128, 768, 7, 7, 7, 1, 3), depthwise::Pass::Forward, kF16, 132).tile == 7,
         "7x7 outputs take patches of 7");
  expect(!depthwise::launchPlan(geometry(1, 13, 11, 13, 7, 2, 3), depthwise::Pass::Forward, kF16, 132).vectorized,
         "C = 13 loads element by element");
  return test::verdict();
}
