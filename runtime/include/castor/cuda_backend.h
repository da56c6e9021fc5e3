// The CUDA backend (built with -DCASTOR_ENABLE_CUDA=ON; CASTOR_HAVE_CUDA is then defined for
// every target that links castor_cuda).
#pragma once

#include "castor/backend.h"

#include <memory>
#include <vector>

namespace castor {

// One arena in device memory (refused at load when the GPU lacks the memory), cuDNN for the
// convolutions, cuBLASLt for gemm and matmul, own kernels for everything else, every kernel in
// plan order on one stream. load() fails with a clear message when no GPU is usable.
std::unique_ptr<Backend> createCudaBackend(const BackendOptions &options = {});
// The ops the CUDA backend has a kernel for (needs no GPU; a runtime test lists what it lacks).
std::vector<plan::OpId> cudaBackendOps();

} // namespace castor
