// The kernel builders that run through cuDNN (kernel_table.cpp maps ops to them).
#pragma once

#include "cuda/base/device_context.h"
#include "cuda/tuning/compile_ahead.h"

namespace castor::cuda {

// conv2d, conv2d_backward_data, conv2d_backward_filter: graph-API engines (or the legacy API),
// tuned per layer signature (convolution.cpp).
Expected<RunFn> buildConvolution(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                 const TensorList &out);
// The runtime-compiled engines buildConvolution would compile for the kernel (an accumulating
// data gradient's on an empty tuning cache), as jobs to run ahead (tuning/compile_ahead.h).
std::vector<tuning::CompileJob> compileAheadConvolution(const DeviceContext &ctx, const plan::Kernel &k,
                                                       const TensorList &in, const TensorList &out);
// batch_norm_training, batch_norm_training_backward, batch_norm_inference: the Ex API and the
// graph API tuned against each other, the own kernels where cuDNN takes no engine
// (batch_norm.cpp).
Expected<RunFn> buildBatchNorm(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                               const TensorList &out);
// batch_norm_relu_training, batch_norm_relu_training_backward: cuDNN's fused batch norm + (add +)
// ReLU where it takes the layer, else the batch norm above and the own element-wise kernels
// (batch_norm_relu.cpp).
Expected<RunFn> buildBatchNormRelu(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                   const TensorList &out);

// attention, attention_backward: cuDNN's fused scaled-dot-product attention (SDPA), f16 and bf16
// only, tuned per layer signature (attention.cpp).
Expected<RunFn> buildAttention(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                               const TensorList &out);

} // namespace castor::cuda
