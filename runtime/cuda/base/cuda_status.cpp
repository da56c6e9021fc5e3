#include "cuda/base/cuda_status.h"

#include <string>

namespace castor::cuda {

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(e));
}
Status cudnnStatus(cudnnStatus_t e, const char *what) {
  if (e == CUDNN_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudnnGetErrorString(e));
}

} // namespace castor::cuda
