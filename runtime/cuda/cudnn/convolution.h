// What the convolution builders share (convolution.cpp, cudnn/convolution_graph.cpp, cudnn/convolution_legacy.cpp): one
// convolution described once, in forward terms, whichever pass the kernel computes.
#pragma once

#include "cuda/executor/device_context.h"
#include "cuda/tuning/tuner.h"

#include <functional>
#include <string>
#include <vector>

namespace castor::cuda::conv {

enum class Pass { Forward, BackwardData, BackwardFilter };

// One convolution in forward terms: x [N,C,H,W] (*) w [K,C/g,R,S] -> y [N,K,P,Q]. For the data
// gradient x is dx (written) and y is dy (read); for the filter gradient w is dw (written).
struct Problem {
  Pass pass = Pass::Forward;
  const plan::Tensor *x = nullptr, *w = nullptr, *y = nullptr;
  const plan::Tensor *bias = nullptr; // forward only, optional: [K]
  const plan::Tensor *accumulate = nullptr; // data gradient only, optional: added to dx (x's shape)
  plan::DType dtype = plan::F32;
  Shape xs, ws, ys;                     // logical dims
  int64_t padH = 0, padW = 0;           // symmetric
  int64_t strideH = 1, strideW = 1;
  int64_t dilationH = 1, dilationW = 1;
  int64_t groups = 1;
  bool xNhwc = false, wNhwc = false, yNhwc = false; // channels-last storage, per operand
  bool accumulateNhwc = false;
  std::string label;                    // the kernel's name (or op) for messages
};

// Reads the kernel's attributes and operands and checks what every path needs (one float
// dtype, rank 4, symmetric pads, shapes that agree with the attributes).
Expected<Problem> parse(const DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                        const TensorList &out);

// The plan-independent signature of the convolution: pass, dtype, layouts, every dimension,
// pads, strides, dilations, groups. Two layers with the same signature behave the same on one
// GPU, whatever plan they belong to.
std::string signature(const Problem &p);

// Element strides of a logical [N,C,H,W] tensor as it is stored (NCHW or channels-last).
std::vector<int64_t> strides(const Shape &dims, bool channelsLast);

// The cuDNN graph API (cudnn-frontend, cudnn/convolution_graph.cpp) with per-layer timing and the
// persistent tuning cache; fails (the caller falls back) when no engine runs the problem. Runs
// the convolution alone (p.accumulate is not read).
Expected<RunFn> buildFrontend(DeviceContext &ctx, const Problem &p);
Expected<tuning::Choice> chooseFrontend(DeviceContext &ctx, const Problem &p);
// The chosen candidate as the kernel's RunFn: its workspace requested, the shared workspace read
// when it runs (allocated after every kernel is built).
RunFn runChoice(DeviceContext &ctx, tuning::Choice choice);
// The engines of the data gradient with p.accumulate added in the convolution's epilogue
// (dgrad -> pointwise add in one cuDNN graph), as tuner candidates; empty where cuDNN has none.
std::vector<tuning::Candidate> accumulatingCandidates(DeviceContext &ctx, const Problem &p);
// Where a candidate's operands lie when it runs (x, w and y in forward terms, as Problem's).
struct OperandPointers {
  void *x = nullptr, *w = nullptr, *y = nullptr;
};
using OperandsFn = std::function<OperandPointers()>;
// The graph API's engines for `p` as tuner candidates named `prefix` + the engine's tag, each run
// reading and writing its operands where `operands` says at that moment (none where cuDNN has no
// engine); p's tensors are not read.
std::vector<tuning::Candidate> engineCandidatesAt(DeviceContext &ctx, const Problem &p, const std::string &prefix,
                                                  OperandsFn operands);
// `candidates` (p's own engines, in the heuristics' order) with, where p's input channels are not a
// multiple of 8, the engines of p on operands padded with zero channels (cudnn/convolution_padded.cpp),
// interleaved so that the first of each are within the tuner's candidate limit.
std::vector<tuning::Candidate> withPaddedCandidates(DeviceContext &ctx, const Problem &p,
                                                    std::vector<tuning::Candidate> candidates);
// Those padded candidates alone (none where p takes no padding): channels-last f16/bf16 forward or
// filter gradient, no groups, input channels not a multiple of 8.
std::vector<tuning::Candidate> paddedCandidates(DeviceContext &ctx, const Problem &p);

// cuDNN's legacy convolution API, its heuristic's algorithm (cudnn/convolution_legacy.cpp); the only path
// for f64 and the fallback of the graph API.
Expected<RunFn> buildLegacy(DeviceContext &ctx, const Problem &p);

// `run`, then the bias [K] added over y (forward with bias only; else `run` itself).
Expected<RunFn> withBias(DeviceContext &ctx, const Problem &p, RunFn run);

} // namespace castor::cuda::conv
