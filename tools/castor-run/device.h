// The backend named by castor-run's --device: "cpu", or "cuda" when castor-run was built with
// the CUDA backend (-DCASTOR_ENABLE_CUDA=ON).
#pragma once

#include "castor/backend.h"
#ifdef CASTOR_HAVE_CUDA
#include "castor/cuda_backend.h"
#endif

#include <memory>
#include <string>

namespace castor::run {

inline Expected<std::unique_ptr<Backend>> createBackend(const std::string &device, const BackendOptions &options) {
  if (device == "cpu")
    return createCpuBackend(options);
  if (device == "cuda") {
#ifdef CASTOR_HAVE_CUDA
    return createCudaBackend(options);
#else
    return Status::error("the CUDA backend is not built (configure with -DCASTOR_ENABLE_CUDA=ON)");
#endif
  }
  return Status::error("unknown device '" + device + "' (cpu or cuda)");
}

} // namespace castor::run
