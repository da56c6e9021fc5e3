// The CUDA backend's error checks: a failed CUDA or cuDNN call as a Status naming the call (cuBLASLt's:
// cublaslt/cublaslt_library.h).
#pragma once

#include "castor/status.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace castor::cuda {

Status cudaStatus(cudaError_t e, const char *what);
Status cudnnStatus(cudnnStatus_t e, const char *what);

#define CASTOR_CUDA(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cudaStatus((call), #call))
#define CASTOR_CUDNN(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cudnnStatus((call), #call))

} // namespace castor::cuda
