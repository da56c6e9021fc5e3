// gemm and matmul through cuBLASLt (kernel_table.cpp maps the ops to this builder).
#pragma once

#include "cuda/base/device_context.h"

namespace castor::cuda {

Expected<RunFn> buildCublasLtMatmul(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                    const TensorList &out);

} // namespace castor::cuda
