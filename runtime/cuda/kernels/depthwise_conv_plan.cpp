// The depthwise kernels' launch plans (depthwise_conv.h): which geometries they take, the patch
// and block shapes, the weight gradient's chunks and workspace. Host code only, so that the rules
// are tested without a GPU (test/cuda/depthwise_plan_tests.cpp); depthwise_conv.cu launches what
// these functions decide and nothing else.
#include "cuda/kernels/depthwise_conv.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <tuple>

namespace castor::cuda::depthwise {
namespace {

constexpr int kTargetThreads = 128;
// Kept under the default dynamic shared memory of a block: no attribute to set before a launch
// (which a captured step could not do).
constexpr size_t kMaxShared = 48 * 1024;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t alignUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

size_t elementSize(int dtype) { return dtype == kF32 ? 4 : 2; }

// 7 where the patch grid divides the output exactly (every layer of a 224x224 network: 112, 56,
// 28, 14, 7), else 8.
int tileFor(int64_t rows, int64_t cols) { return rows % 7 == 0 && cols % 7 == 0 ? 7 : 8; }

// What the pass's thread patches cover: rows x cols positions, read from an input of inRows x
// inCols through a window of stride `stride`.
struct Extent {
  int64_t rows, cols;
  int stride;
};

Extent extentOf(const Geometry &g, Pass pass) {
  switch (pass) {
  case Pass::Forward:
  case Pass::BackwardFilter: // patches over dy, windows over x
    return {g.P, g.Q, g.stride};
  case Pass::BackwardData:
    if (g.stride == 1)
      return {g.H, g.W, 1};
    return {(g.H + 1) / 2, (g.W + 1) / 2, 1}; // dx's parity phases
  }
  return {g.P, g.Q, g.stride};
}

// Shared memory of a block of `channels` channels: its input window (the weights go straight to
// registers), for the weight gradient also dy's patch, later the partial sums of its threads.
size_t sharedBytes(const Geometry &g, Pass pass, const LaunchPlan &lp, int channels, size_t esize) {
  const size_t taps = size_t(g.K) * size_t(g.K);
  if (pass == Pass::BackwardData && g.stride == 2) {
    const size_t side = size_t(lp.tile + (g.K + 1) / 2);
    return side * side * size_t(channels) * esize;
  }
  const int stride = pass == Pass::BackwardData ? 1 : g.stride;
  const size_t blockRows = size_t(lp.subH * lp.tile), blockCols = size_t(lp.subW * lp.tile);
  const size_t window = ((blockRows - 1) * size_t(stride) + size_t(g.K)) * ((blockCols - 1) * size_t(stride) + size_t(g.K)) *
                        size_t(channels) * esize;
  if (pass == Pass::BackwardFilter) {
    const size_t tiles = alignUp(window, 16) + alignUp(blockRows * blockCols * size_t(channels) * esize, 16);
    const size_t partials = size_t(lp.subH * lp.subW) * size_t(channels) * taps * sizeof(float);
    return std::max(tiles, partials);
  }
  return window;
}

// Channels per block: multiples of 8 up to `most`, the block's threads whole warps where the
// channels allow, the largest that leaves at most 5% of the lanes idle (C = 144 takes 24, not
// 32), else the one leaving the fewest idle.
std::vector<int> channelChoices(int64_t C, int subs, int most) {
  std::vector<int> all;
  for (int cb = most; cb >= 8; cb -= 8)
    all.push_back(cb);
  auto utilisation = [C](int cb) { return double(C) / double(ceilDiv(C, cb) * cb); };
  auto wholeWarps = [subs](int cb) { return cb * subs % 32 == 0; };
  std::vector<int> order;
  for (bool needWarps : {true, false})
    for (int cb : all)
      if (wholeWarps(cb) == needWarps && utilisation(cb) >= 0.95 && std::find(order.begin(), order.end(), cb) == order.end())
        order.push_back(cb);
  std::vector<int> rest = all;
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return utilisation(a) > utilisation(b); });
  for (int cb : rest)
    if (std::find(order.begin(), order.end(), cb) == order.end())
      order.push_back(cb);
  return order;
}

} // namespace

std::string unsupported(const Geometry &g) {
  if (g.K != 3 && g.K != 5 && g.K != 7)
    return "kernel size " + std::to_string(g.K) + " (3, 5 or 7 only)";
  if (g.stride != 1 && g.stride != 2)
    return "stride " + std::to_string(g.stride) + " (1 or 2 only)";
  if (g.N < 1 || g.C < 1 || g.H < 1 || g.W < 1 || g.padH < 0 || g.padW < 0)
    return "empty or negative dims";
  if (g.P != (g.H + 2 * g.padH - g.K) / g.stride + 1 || g.Q != (g.W + 2 * g.padW - g.K) / g.stride + 1 || g.P < 1 ||
      g.Q < 1)
    return "output dims that disagree with the input's";
  // Indices within one image are 32-bit.
  if (g.H * g.W * g.C >= INT_MAX || g.P * g.Q * g.C >= INT_MAX || g.C * g.K * g.K >= INT_MAX || g.padH > 1 << 20 ||
      g.padW > 1 << 20)
    return "an image of 2^31 elements or more";
  return "";
}

std::string rowsUnsupported(const Geometry &g, Pass pass, int dtype) {
  if (std::string why = unsupported(g); !why.empty())
    return why;
  // 7x7 is FMA-bound: two channels' 98 weights and 7 rows of sums spill (255 registers), at half
  // the tiles' speed on ConvNeXt-T's layers (H100, 2026-12-07).
  if (g.K == 7)
    return "kernel size 7 (the tiles' kernels)";
  if (pass == Pass::BackwardFilter)
    return "the weight gradient (the tiles' kernels)";
  if (pass == Pass::BackwardData && g.stride == 2 && (g.padH - g.padW) % 2 != 0)
    return "the stride-2 data gradient with paddings of different parity";
  if (g.C % int64_t(4 / elementSize(dtype)) != 0)
    return "C = " + std::to_string(g.C) + ", not whole 4-byte vectors";
  return "";
}

RowsPlan rowsPlan(const Geometry &g, Pass pass, int dtype) {
  RowsPlan rp;
  rp.vector = int(4 / elementSize(dtype));
  const int64_t outH = pass == Pass::Forward ? g.P : g.H, outW = pass == Pass::Forward ? g.Q : g.W;
  // Channel vectors per block: at most 64, the blocks equal (C = 144 in f16: two of 36).
  const int64_t vectors = ceilDiv(g.C, rp.vector);
  rp.channelBlocks = ceilDiv(vectors, 64);
  rp.lanes = int(ceilDiv(vectors, rp.channelBlocks));
  // Column groups: as few idle columns as possible, then at least 64 threads, then closest to 128.
  const int64_t slots = ceilDiv(outW, rp.cols);
  const int most = int(std::max<int64_t>(1, std::min<int64_t>(slots, 256 / rp.lanes)));
  auto score = [&](int d) {
    const int64_t idle = ceilDiv(slots, d) * d - slots;
    const int threads = rp.lanes * d;
    return std::make_tuple(idle, threads < 64 && d < most ? 1 : 0, std::abs(threads - 128));
  };
  rp.colGroups = 1;
  for (int d = 2; d <= most; ++d)
    if (score(d) < score(rp.colGroups))
      rp.colGroups = d;
  rp.threads = rp.lanes * rp.colGroups;
  rp.colTiles = ceilDiv(slots, rp.colGroups);
  rp.rowTiles = ceilDiv(outH, rp.rows);
  rp.blocks = g.N * rp.rowTiles * rp.colTiles * rp.channelBlocks;
  return rp;
}

LaunchPlan launchPlan(const Geometry &g, Pass pass, int dtype, int smCount) {
  LaunchPlan lp;
  const size_t esize = elementSize(dtype);
  const Extent e = extentOf(g, pass);
  lp.tile = tileFor(e.rows, e.cols);
  lp.vectorized = g.C % int64_t(16 / esize) == 0;
  if (pass == Pass::BackwardData && g.stride == 2) {
    lp.subH = lp.subW = 2; // the four phases of one patch position
  } else if (e.stride == 1) {
    lp.subH = int(std::min<int64_t>(2, ceilDiv(e.rows, lp.tile)));
    lp.subW = int(std::min<int64_t>(2, ceilDiv(e.cols, lp.tile)));
  } else {
    lp.subH = lp.subW = 1; // a stride-2 window is wide already
  }
  const int subs = lp.subH * lp.subW;
  const std::vector<int> choices = channelChoices(g.C, subs, std::max(8, kTargetThreads / subs));
  lp.channels = choices.back();
  for (int cb : choices)
    if (sharedBytes(g, pass, lp, cb, esize) <= kMaxShared) {
      lp.channels = cb;
      break;
    }
  lp.threads = lp.channels * subs;
  lp.sharedBytes = sharedBytes(g, pass, lp, lp.channels, esize);
  lp.channelBlocks = ceilDiv(g.C, lp.channels);
  const int64_t positionsH = pass == Pass::BackwardData && g.stride == 2 ? int64_t(lp.tile) : int64_t(lp.subH) * lp.tile;
  const int64_t positionsW = pass == Pass::BackwardData && g.stride == 2 ? int64_t(lp.tile) : int64_t(lp.subW) * lp.tile;
  lp.tilesH = ceilDiv(e.rows, positionsH);
  lp.tilesW = ceilDiv(e.cols, positionsW);
  const int64_t tiles = g.N * lp.tilesH * lp.tilesW;
  if (pass != Pass::BackwardFilter) {
    lp.blocks = tiles * lp.channelBlocks;
    return lp;
  }
  // Two waves of about three blocks a multiprocessor; no chunk under four tiles (its partial sums
  // would be a quarter of what it reads) unless the GPU would otherwise not get two blocks a
  // multiprocessor.
  const int64_t sms = std::max(1, smCount);
  int64_t chunks = std::min(tiles, ceilDiv(sms * 3 * 2, lp.channelBlocks));
  chunks = std::min(chunks, std::max(ceilDiv(sms * 2, lp.channelBlocks), ceilDiv(tiles, 4)));
  lp.chunks = std::max<int64_t>(1, std::min(chunks, tiles));
  lp.blocks = lp.chunks * lp.channelBlocks;
  lp.workspaceBytes = size_t(lp.chunks) * size_t(g.C) * size_t(g.K) * size_t(g.K) * sizeof(float);
  return lp;
}

} // namespace castor::cuda::depthwise
