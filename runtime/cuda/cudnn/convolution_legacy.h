// The legacy API's descriptors of one convolution, shared by its heuristic's path
// (convolution_legacy.cpp) and its algorithms as tuner candidates
// (convolution_legacy_candidates.cpp), so that both describe a problem alike.
#pragma once

#include "cuda/cudnn/convolution.h"

#include <memory>

namespace castor::cuda::conv {

// cuDNN descriptors of one convolution (forward geometry: x [N,C,H,W], w [K,C/g,R,S], y); they
// live as long as the runs that use them.
struct LegacyDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  LegacyDescriptors() = default;
  LegacyDescriptors(const LegacyDescriptors &) = delete;
  LegacyDescriptors &operator=(const LegacyDescriptors &) = delete;
  ~LegacyDescriptors();
};

// The descriptors of p: NCHW or NHWC following the operands' layout (one for all three), compute
// type FLOAT (DOUBLE for f64) as the graph path's, the groups, and the math type of p's dtype:
// FMA for f32 and f64 (no TF32), tensor ops for f16/bf16. Checks cuDNN's output shape.
Expected<std::shared_ptr<LegacyDescriptors>> legacyDescriptors(const Problem &p);

// The math type legacyDescriptors sets for `dtype`.
cudnnMathType_t legacyMathType(plan::DType dtype);

} // namespace castor::cuda::conv
