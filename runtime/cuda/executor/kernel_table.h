// The CUDA kernel builder of each op of the registry (plan/ops.def): a cuDNN call, a cuBLASLt
// call or one of Castor's own kernels. An op without an entry is one the CUDA backend refuses
// when a plan is loaded; the runtime tests list them.
#pragma once

#include "cuda/base/device_context.h"
#include "cuda/tuning/compile_ahead.h"

namespace castor::cuda {

const plan::OpTable<Builder> &cudaKernels();

// What a kernel's build would compile at run time (cuDNN's runtime-compiled engines), for the
// backend to compile ahead, in parallel, before it builds the kernels one by one.
using CompileAheadFn = std::vector<tuning::CompileJob> (*)(const DeviceContext &ctx, const plan::Kernel &k,
                                                           const TensorList &in, const TensorList &out);
const plan::OpTable<CompileAheadFn> &cudaCompileAhead();

} // namespace castor::cuda
