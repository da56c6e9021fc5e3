// cuBLASLt, opened when a CUDA backend loads rather than linked into every binary: the library's
// load-time relocations touch about 90 MB, 80 ms of every start of castor-run (GPU or not, and
// whatever the command), while only a backend that runs gemm or matmul needs it. Its entry points
// keep cublasLt.h's own types (decltype), so a changed signature fails to compile here.
#pragma once

#include "castor/status.h"

#include <cublasLt.h>

namespace castor::cuda {

struct CublasLtLibrary {
  decltype(&::cublasLtCreate) Create;
  decltype(&::cublasLtDestroy) Destroy;
  decltype(&::cublasLtMatmul) Matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
  decltype(&::cublasLtGetStatusName) GetStatusName;
  decltype(&::cublasLtGetStatusString) GetStatusString;
};

// Opens the library the first time (libcublasLt.so.<the headers' major version>, found as the
// dynamic loader finds any library); an error names it and the loader's reason.
Status openCublasLt();

// The opened library's entry points; openCublasLt must have succeeded (aborts naming the library
// otherwise: a caller skipped the backend's load).
const CublasLtLibrary &cublasLtApi();

// A failed cuBLASLt call as a Status naming the call.
Status cublasStatus(cublasStatus_t e, const char *what);
#define CASTOR_CUBLAS(call) CASTOR_RETURN_IF_ERROR(::castor::cuda::cublasStatus((call), #call))

} // namespace castor::cuda
