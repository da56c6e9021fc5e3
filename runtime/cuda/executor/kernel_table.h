// The CUDA kernel builder of each op of the registry (plan/ops.def): a cuDNN call, a cuBLASLt
// call or one of Castor's own kernels. An op without an entry is one the CUDA backend refuses
// when a plan is loaded; the runtime tests list them.
#pragma once

#include "cuda/executor/device_context.h"

namespace castor::cuda {

const plan::OpTable<Builder> &cudaKernels();

} // namespace castor::cuda
