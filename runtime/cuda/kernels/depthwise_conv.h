// Castor's own depthwise convolutions (depthwise_conv.cu): groups = input channels = output
// channels, x/y (and dy/dx) stored channels-last [N,H,W,C], the weight [C,1,K,K] (the same bytes
// in either layout: [C,K,K]), square kernels of 3, 5 or 7 taps, stride 1 or 2, dilation 1, any
// padding. f16/bf16/f32 operands of one dtype, products summed in fp32 and rounded once into the
// output's dtype (f32: plain FMA, never TF32).
//
// How they run (memory-bound layers want each byte read once, the 7x7 ones are FMA-bound):
// - forward and data gradient: a block takes `channels` channels of a tile of output rows x
//   columns of one image; its input tile (with the halo) comes into shared memory in 16-byte
//   vectors (cp.async) where C allows, and each thread computes a `tile` x `tile` patch of
//   one channel, the weights and a sliding row of inputs in registers (tile^2 * K^2 FMAs per
//   (tile + K - 1)^2 shared loads). The stride-1 data gradient is the forward with the kernel
//   flipped; the stride-2 one computes each of dx's four parity phases as a stride-1
//   correlation with the taps of that phase.
// - weight gradient: the same tiles, each thread summing its patch's products for all K*K taps in
//   registers; a block walks a chunk of tiles, then writes its per-channel partial sums (fp32)
//   to the workspace; one reduction kernel sums the chunks in a fixed order (fp64) and rounds
//   into dw. No atomics: deterministic.
// - forward and data gradient of 3x3 and 5x5 layers, row kernels (depthwise_rows.cu): no shared
//   memory and no barrier; each thread owns a 4-byte vector of channels (two f16/bf16, one f32)
//   at `cols` adjacent output columns and sweeps a strip of `rows` output rows, reading every
//   input row of the strip once into registers (4-byte loads, a warp's 128 contiguous bytes) and
//   adding it into the K output rows it reaches; the rows' neighbours across columns come from
//   L1 (the stride-2 data gradient: dy's rows, each into the dx rows its taps reach). The tuner
//   races them against the tile kernels and cuDNN (two candidates of the convolution builder).
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace castor::cuda::depthwise {

enum class Pass { Forward, BackwardData, BackwardFilter };

// Which kernels run a forward or data gradient: the tiles in shared memory, or the row sweeps.
enum class Kernel { Tiles, Rows };

// One depthwise convolution: x [N,H,W,C] (*) w [C,K,K] -> y [N,P,Q,C], P and Q from H, W,
// the padding and the stride.
struct Geometry {
  int64_t N = 0, C = 0, H = 0, W = 0, P = 0, Q = 0;
  int K = 0, stride = 1, padH = 0, padW = 0;
};

// Why the kernels cannot run `g` ("" when they can): kernel size, stride, dims that disagree or
// overflow 32-bit indices within one image.
std::string unsupported(const Geometry &g);

// How a pass is launched (decided on the host, the same for every launch of the layer).
struct LaunchPlan {
  int tile = 8;         // each thread's patch: tile x tile outputs (dx phase positions, dy positions)
  int subH = 1, subW = 1; // patches per block, down and across (the stride-2 data gradient: its 4 phases)
  int channels = 32;    // channels per block; threads = channels * subH * subW
  bool vectorized = false; // 16-byte loads (C a multiple of 16 / element size)
  int64_t tilesH = 1, tilesW = 1, channelBlocks = 1;
  int64_t chunks = 1;   // weight gradient: blocks along the tiles, each writing partial sums
  int64_t blocks = 1;
  int threads = 32;
  size_t sharedBytes = 0;
  size_t workspaceBytes = 0; // weight gradient: chunks * C * K * K floats
};

// The launch plan of `pass` on `g` for operands of `dtype` (kF16, kBF16, kF32) on a GPU with
// `smCount` multiprocessors.
LaunchPlan launchPlan(const Geometry &g, Pass pass, int dtype, int smCount);

// Why the row kernels cannot run `pass` on `g` for `dtype` ("" when they can): kernel size 7
// (FMA-bound: the tiles' case), the weight gradient, a stride-2 data gradient whose two paddings
// differ in parity, or C not a whole number of 4-byte vectors.
std::string rowsUnsupported(const Geometry &g, Pass pass, int dtype);

// How the row kernels are launched: a block holds `lanes` channel vectors (fastest) x
// `colGroups` groups of `cols` output columns, over a strip of `rows` output rows.
struct RowsPlan {
  int cols = 4, rows = 8;
  int vector = 2; // channels per thread: 4 bytes
  int lanes = 32, colGroups = 4, threads = 128;
  int64_t channelBlocks = 1, colTiles = 1, rowTiles = 1, blocks = 1;
};
RowsPlan rowsPlan(const Geometry &g, Pass pass, int dtype);

// The workspace `pass` needs on this GPU (the grids' multiprocessor count: configureDevice): the
// weight gradient's partial sums, 0 for the other passes.
size_t workspaceBytes(const Geometry &g, Pass pass, int dtype);

// y = x (*) w (+ bias[C] when bias.p, of any float dtype). Kernel::Rows where rowsUnsupported
// allows it and the operands are 4-byte aligned, else the tiles.
cudaError_t forward(Ref x, Ref w, Ref bias, Ref y, const Geometry &g, cudaStream_t s, Kernel k = Kernel::Tiles);

// dx = dy (*)^T w (+ acc, dx's shape and layout, added before the one rounding, when acc.p; acc
// may be dx's own slot).
cudaError_t backwardData(Ref dy, Ref w, Ref acc, Ref dx, const Geometry &g, cudaStream_t s,
                         Kernel k = Kernel::Tiles);

// dw = the sum over n, p, q of dy[n,p,q,c] x[n, p*stride - pad + r, q*stride - pad + s, c]; the
// workspace holds at least workspaceBytes(g, BackwardFilter, ...) bytes.
cudaError_t backwardFilter(Ref x, Ref dy, Ref dw, const Geometry &g, void *workspace, size_t workspaceSize,
                           cudaStream_t s);

} // namespace castor::cuda::depthwise
