// Memory bandwidth of Castor's depthwise convolution kernels (runtime/cuda/kernels/depthwise_conv.h)
// and of cuDNN's fastest engine for the same layer (the convolution tuner's choice with the own
// kernels left out, CASTOR_CONV_DEPTHWISE=0), on the depthwise layers of ConvNeXt-T and
// EfficientNet-B0: one JSON line per (layer, pass, implementation) with its time, the GB/s of
// the bytes the pass must move (x or dy and the weights read, y, dx or dw written, once each)
// and that as a fraction of the GPU's peak memory bandwidth (from its memory clock and bus
// width, or --peak-gbps); beside them a device-to-device copy of the same bytes, the ceiling a
// layer of that size leaves once launch, ramp-up and tail are paid. L2 is flushed before every timed run (a 256 MiB memset), so a layer
// smaller than L2 is not timed out of it. A benchmark, not a test: it asserts nothing about
// speed (the depthwise kernels' correctness: castor_depthwise_conv_tests).
//
//   castor-dwconv-bench [--batch 128] [--dtype f16|bf16|f32] [--iters 20] [--peak-gbps G]
//                       [--model convnext|efficientnet|all] [--no-cudnn]
#include "bandwidth_common.h"
#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/depthwise_conv.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace castor;
using namespace castor::bench;
using namespace castor::cuda;

namespace {

struct Layer {
  const char *model;
  int64_t C, H;
  int K, stride;
};

const Layer kLayers[] = {
    // ConvNeXt-T: one 7x7 depthwise convolution per block, stride 1, padding 3.
    {"convnext_tiny", 96, 56, 7, 1},
    {"convnext_tiny", 192, 28, 7, 1},
    {"convnext_tiny", 384, 14, 7, 1},
    {"convnext_tiny", 768, 7, 7, 1},
    // EfficientNet-B0: the depthwise convolution of each distinct MBConv shape, padding K/2.
    {"efficientnet_b0", 32, 112, 3, 1},
    {"efficientnet_b0", 96, 112, 3, 2},
    {"efficientnet_b0", 144, 56, 3, 1},
    {"efficientnet_b0", 144, 56, 5, 2},
    {"efficientnet_b0", 240, 28, 5, 1},
    {"efficientnet_b0", 240, 28, 3, 2},
    {"efficientnet_b0", 480, 14, 3, 1},
    {"efficientnet_b0", 480, 14, 5, 1},
    {"efficientnet_b0", 672, 14, 5, 1},
    {"efficientnet_b0", 672, 14, 5, 2},
    {"efficientnet_b0", 1152, 7, 5, 1},
    {"efficientnet_b0", 1152, 7, 3, 1},
};

// The layer as a plan kernel of one pass over tensors x, w, y (dy/dx/dw by the pass) in one
// arena, for the convolution builder.
struct PlanLayer {
  plan::Kernel k;
  std::vector<plan::Tensor> tensors = std::vector<plan::Tensor>(3);
  TensorList in, out;
};

PlanLayer planLayer(const depthwise::Geometry &g, depthwise::Pass pass, int dt, uint8_t *arenaBase, uint8_t *x,
                    uint8_t *w, uint8_t *y) {
  PlanLayer l;
  const Shape dims[3] = {{g.N, g.C, g.H, g.W}, {g.C, 1, g.K, g.K}, {g.N, g.C, g.P, g.Q}};
  uint8_t *where[3] = {x, w, y};
  for (uint32_t i = 0; i < 3; ++i) {
    plan::Tensor &t = l.tensors[i];
    t.set_id(i + 1);
    t.set_dtype(plan::DType(dt));
    for (int64_t d : dims[i])
      t.add_shape(d);
    t.set_kind(plan::Tensor::ACTIVATION);
    t.set_offset(uint64_t(where[i] - arenaBase));
    t.set_bytes(uint64_t(countOf(t)) * elementSize(dt));
  }
  const plan::Tensor *tx = &l.tensors[0], *tw = &l.tensors[1], *ty = &l.tensors[2];
  if (pass == depthwise::Pass::Forward) {
    l.k.set_op("conv2d");
    l.in = {tx, tw}, l.out = {ty};
  } else if (pass == depthwise::Pass::BackwardData) {
    l.k.set_op("conv2d_backward_data");
    l.in = {ty, tw}, l.out = {tx};
  } else {
    l.k.set_op("conv2d_backward_filter");
    l.in = {tx, ty}, l.out = {tw};
  }
  (*l.k.mutable_attrs())["strides"] = plan::intsAttr({g.stride, g.stride});
  (*l.k.mutable_attrs())["pads"] = plan::intsAttr({g.padH, g.padW, g.padH, g.padW});
  (*l.k.mutable_attrs())["dilations"] = plan::intsAttr({1, 1});
  (*l.k.mutable_attrs())["groups"] = plan::intAttr(g.C);
  l.k.set_name("depthwise");
  return l;
}

} // namespace

int main(int argc, char **argv) {
  program = "castor-dwconv-bench";
  int batch = 128, iters = 20, dt = kF16;
  double peakGbps = 0;
  std::string model = "all";
  bool cudnn = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool ok = true;
    if (a == "--model" && i + 1 < argc)
      model = argv[++i];
    else if (a == "--no-cudnn")
      cudnn = false;
    else
      ok = sharedOption(argc, argv, i, batch, iters, dt, &peakGbps);
    if (!ok || dt == 0 || batch <= 0 || iters <= 0 ||
        (model != "all" && model != "convnext" && model != "efficientnet")) {
      std::fprintf(stderr, "usage: castor-dwconv-bench [--batch N] [--dtype f16|bf16|f32] [--iters N] "
                           "[--peak-gbps G] [--model convnext|efficientnet|all] [--no-cudnn]\n");
      return 2;
    }
  }
  // cuDNN's engines alone in the tuner's race, timed afresh (no cache entry read or written).
  setenv("CASTOR_CONV_DEPTHWISE", "0", 1);
  setenv("CASTOR_TUNING_CACHE", "off", 1);

  const Device device = queryDevice();
  const cudaDeviceProp &prop = device.prop;
  if (peakGbps <= 0)
    peakGbps = device.peakGbps;
  configureDevice(prop.multiProcessorCount);
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"memory_clock_khz\": %d, \"bus_bits\": %d, \"peak_gbps\": %.0f, "
              "\"cudnn\": %zu, \"batch\": %d, \"dtype\": \"%s\", \"iters\": %d, \"l2_flushed\": true}\n",
              prop.name, prop.multiProcessorCount, device.memClockKhz, device.busBits, peakGbps, cudnnGetVersion(), batch,
              dtypeName(dt), iters);

  DeviceContext ctx;
  ctx.deviceName = prop.name;
  ctx.smCount = prop.multiProcessorCount;
  ctx.channelsLastEnabled = true;
  ctx.workspaceLimit = size_t(1) << 30;
  check(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "stream");
  if (cudnnCreate(&ctx.cudnn) != CUDNN_STATUS_SUCCESS || cudnnSetStream(ctx.cudnn, ctx.stream) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "castor-dwconv-bench: cudnnCreate failed\n");
    return 1;
  }
  L2Flush flush;
  flush.allocate();

  const size_t esize = elementSize(dt);
  const char *passNames[] = {"forward", "data_gradient", "weight_gradient"};
  for (const Layer &L : kLayers) {
    if (model != "all" && std::string(L.model).rfind(model, 0) != 0)
      continue;
    depthwise::Geometry g;
    g.N = batch, g.C = L.C, g.H = g.W = L.H, g.K = L.K, g.stride = L.stride, g.padH = g.padW = L.K / 2;
    g.P = g.Q = (L.H + 2 * g.padH - L.K) / L.stride + 1;
    const size_t nx = size_t(g.N * g.H * g.W * g.C), ny = size_t(g.N * g.P * g.Q * g.C), nw = size_t(g.C * g.K * g.K);
    auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t arenaBytes = round256(nx * esize) + round256(ny * esize) + round256(nw * esize);
    uint8_t *arena = nullptr;
    check(cudaMalloc(reinterpret_cast<void **>(&arena), arenaBytes), "cudaMalloc");
    // 0x3c bytes: 1.0 in f16, about 0.0115 in bf16 and f32: normal values, no overflow in 49 terms.
    check(cudaMemset(arena, 0x3c, arenaBytes), "cudaMemset");
    uint8_t *x = arena, *y = arena + round256(nx * esize), *w = y + round256(ny * esize);
    uint8_t *copyDst = nullptr;
    check(cudaMalloc(reinterpret_cast<void **>(&copyDst), arenaBytes), "cudaMalloc");
    ctx.arena = arena;
    char layer[96];
    std::snprintf(layer, sizeof layer, "%s %lldch %lldx%lld k%d s%d", L.model, (long long)g.C, (long long)g.H,
                  (long long)g.W, g.K, g.stride);
    for (int pi = 0; pi < 3; ++pi) {
      const auto pass = depthwise::Pass(pi);
      // Bytes the pass must move: its two inputs read and its output written, once each.
      const double bytes = double(esize) * double(nx + ny + nw);
      auto line = [&](const char *impl, const std::string &engine, float ms) {
        const double gbps = bytes / (double(ms) * 1e6);
        std::printf("{\"layer\": \"%s\", \"pass\": \"%s\", \"impl\": \"%s\", \"engine\": \"%s\", \"ms\": %.4f, "
                    "\"bytes\": %.0f, \"GBps\": %.0f, \"peak_fraction\": %.3f}\n",
                    layer, passNames[pi], impl, engine.c_str(), double(ms), bytes, gbps, gbps / peakGbps);
        std::fflush(stdout);
      };
      // A device-to-device copy moving the same bytes (half read, half written), timed the same
      // way: what launch, ramp-up and tail leave of the peak on a layer of this size.
      if (pi == 0) {
        const size_t half = size_t(bytes / 2) / 256 * 256;
        const float copy = timeFlushed<float>(
            [&]() -> cudaError_t { return cudaMemcpyAsync(copyDst, arena, half, cudaMemcpyDeviceToDevice, ctx.stream); },
            iters, ctx.stream, flush);
        line("copy", "cudaMemcpyAsync", copy);
      }
      // Castor's kernel.
      const size_t wsBytes = depthwise::workspaceBytes(g, pass, dt);
      void *ws = nullptr;
      if (wsBytes)
        check(cudaMalloc(&ws, wsBytes), "cudaMalloc");
      const depthwise::LaunchPlan lp = depthwise::launchPlan(g, pass, dt, prop.multiProcessorCount);
      const float own = timeFlushed<float>(
          [&]() -> cudaError_t {
            const Ref rx{x, dt}, rw{w, dt}, ry{y, dt};
            if (pass == depthwise::Pass::Forward)
              return depthwise::forward(rx, rw, Ref{}, ry, g, ctx.stream);
            if (pass == depthwise::Pass::BackwardData)
              return depthwise::backwardData(ry, rw, Ref{}, rx, g, ctx.stream);
            return depthwise::backwardFilter(rx, ry, rw, g, ws, wsBytes, ctx.stream);
          },
          iters, ctx.stream, flush);
      char config[96];
      std::snprintf(config, sizeof config, "tile %d, %dx%d patches, %d channels, %lld chunks", lp.tile, lp.subH,
                    lp.subW, lp.channels, (long long)lp.chunks);
      line("castor", config, own);
      // The row kernels, where they take the layer.
      if (depthwise::rowsUnsupported(g, pass, dt).empty()) {
        const float rows = timeFlushed<float>(
            [&]() -> cudaError_t {
              const Ref rx{x, dt}, rw{w, dt}, ry{y, dt};
              if (pass == depthwise::Pass::Forward)
                return depthwise::forward(rx, rw, Ref{}, ry, g, ctx.stream, depthwise::Kernel::Rows);
              return depthwise::backwardData(ry, rw, Ref{}, rx, g, ctx.stream, depthwise::Kernel::Rows);
            },
            iters, ctx.stream, flush);
        const depthwise::RowsPlan rp = depthwise::rowsPlan(g, pass, dt);
        char rowsConfig[96];
        std::snprintf(rowsConfig, sizeof rowsConfig, "%dx%d outputs, %d lanes x %d groups, %lld channel blocks",
                      rp.rows, rp.cols, rp.lanes, rp.colGroups, (long long)rp.channelBlocks);
        line("castor-rows", rowsConfig, rows);
      }
      if (ws)
        cudaFree(ws);
      if (!cudnn)
        continue;
      // cuDNN's fastest engine, as the tuner picks it.
      PlanLayer pl = planLayer(g, pass, dt, arena, x, w, y);
      ctx.workspace = nullptr;
      ctx.workspaceBytes = 0;
      ctx.buildingKernel = 0;
      ctx.tunedChoices.clear();
      Expected<RunFn> fn = buildConvolution(ctx, pl.k, pl.in, pl.out);
      if (!fn) {
        std::fprintf(stderr, "castor-dwconv-bench: %s %s: cuDNN: %s\n", layer, passNames[pi], fn.message().c_str());
        continue;
      }
      if (ctx.workspaceBytes)
        check(cudaMalloc(&ctx.workspace, ctx.workspaceBytes), "cudaMalloc");
      const float best = timeFlushed<float>(
          [&]() -> cudaError_t {
            Status s = (*fn)();
            return s ? cudaSuccess : cudaErrorUnknown;
          },
          iters, ctx.stream, flush);
      line("cudnn", ctx.tunedChoices.count(0) ? ctx.tunedChoices[0] : "legacy API", best);
      fn = Status::error("released");
      if (ctx.workspace)
        cudaFree(ctx.workspace);
      ctx.workspace = nullptr;
    }
    cudaFree(arena);
    cudaFree(copyDst);
    ctx.arena = nullptr;
  }
  cudaFree(flush.buffer);
  cudnnDestroy(ctx.cudnn);
  cudaStreamDestroy(ctx.stream);
  return 0;
}
