// What the cuDNN batch-norm builders share (batch_norm.cpp, batch_norm_ex.cpp,
// batch_norm_graph.cpp, and batch_norm_relu.cpp for the fused op): one batch-norm kernel
// described once, whichever pass it computes, and the two ways cuDNN runs it (the legacy Ex API
// and the graph API), each as tuner candidates (tuning/tuner.h).
#pragma once

#include "cuda/tuning/tuner.h"

#include <string>
#include <vector>

namespace castor::cuda::bn {

enum class Pass { Training, Backward, Inference };

// One batch norm cuDNN can run: data (x, y, dy, dx) in f16/bf16/f32 with f32 per-channel
// tensors, or everything f64; rank 2 to 4, seen as [N,C,H,W] ([N,C] as [N,C,1,1], [N,C,L] as
// [N,C,L,1]; only rank 4 is ever stored channels-last).
struct Problem {
  Pass pass = Pass::Training;
  // The kernel's operands, as the plan orders them:
  //   Training:  x, scale, bias [, running mean, running var] -> y, mean, inv std [, running
  //              mean, running var]
  //   Backward:  dy, x, scale, mean, inv std -> dx, dscale, dbias
  //   Inference: x, scale, bias, mean, var -> y
  TensorList in, out;
  plan::DType dtype = plan::F32;      // of the data
  plan::DType paramDtype = plan::F32; // of every per-channel tensor (f32, or f64 with f64 data)
  Shape dims;                         // [N,C,H,W]
  bool nhwc = false;                  // data stored channels-last
  // Training with 5 inputs and 5 outputs: the running statistics updated by the kernel itself
  // (the compiler's plans update them in batch_norm_running_update instead).
  bool runningUpdate = false;
  double epsilon = 1e-5, momentum = 0.1;
  std::string label; // the kernel's name (or op) for messages
};

// The kernel as a Problem; the error "unsupported dtypes" when cuDNN does not take its dtypes or
// rank (the caller runs the own kernels), another error for malformed kernels.
Expected<Problem> parse(const DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                        const TensorList &out);

// The cuDNN descriptors of one batch norm of the Ex API: the data's (x, y, dy, dx, z and dz share
// one shape, dtype and layout), the per-channel tensors', and the activation of a fused one
// (null otherwise); destroyed with it.
struct ExDescriptors {
  cudnnTensorDescriptor_t x = nullptr, params = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
  ExDescriptors() = default;
  ExDescriptors(const ExDescriptors &) = delete;
  ExDescriptors &operator=(const ExDescriptors &) = delete;
  ~ExDescriptors();
};

// The plan-independent signature of the layer for the tuning cache: pass, dtypes, layout and
// dims ("batch_norm.<pass>|..."; convolution keys start with "conv2d.").
std::string signature(const Problem &p);

// The way that runs a batch norm's forward from the sums of the convolution before it, in the
// fused batch-norm-ReLU (cudnn/batch_norm_relu.cpp) and the plain batch norm (batch_norm.cpp).
constexpr const char *kConvStatsWay = "conv-stats";
// CASTOR_FUSED_BN=fused|own|conv-stats|composed, the way forced wherever it runs (empty: the
// tuner's choice); conv-stats also forces the plain batch norm's.
std::string forcedWay();

// cuDNN's batch-norm Ex API (cudnn/batch_norm_ex.cpp), the tuner candidate named "ex".
constexpr const char *kExName = "ex";
Expected<tuning::Executable> buildEx(DeviceContext &ctx, const Problem &p);
// The reserve space the Ex training forward fills for its backward (0 for inference).
Expected<size_t> exReserveBytes(DeviceContext &ctx, const Problem &p);

// cuDNN's graph API (cudnn/batch_norm_graph.cpp): one candidate per engine configuration of the
// layer's graph, named "graph:<engine tag>". f16/bf16/f32 data only, without running update;
// an error when the graph cannot be built or no engine is offered.
Expected<std::vector<tuning::Candidate>> graphCandidates(DeviceContext &ctx, const Problem &p);

} // namespace castor::cuda::bn
