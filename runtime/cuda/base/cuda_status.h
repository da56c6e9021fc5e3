// The CUDA backend's error checks: a failed CUDA, cuDNN or cuBLAS call as a Status naming the call.
#pragma once

#include "castor/status.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace castor::cuda {

Status cudaStatus(cudaError_t e, const char *what);
Status cudnnStatus(cudnnStatus_t e, const char *what);
Status cublasStatus(cublasStatus_t e, const char *what);

#define CASTOR_CUDA(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cudaStatus((call), #call))
#define CASTOR_CUDNN(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cudnnStatus((call), #call))
#define CASTOR_CUBLAS(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cublasStatus((call), #call))

} // namespace castor::cuda
