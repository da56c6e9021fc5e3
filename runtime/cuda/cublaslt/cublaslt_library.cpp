#include "cuda/cublaslt/cublaslt_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <string>

namespace castor::cuda {
namespace {

const std::string &libraryName() {
  static const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  return name;
}

struct Opened {
  CublasLtLibrary api{};
  std::string error; // empty once every entry point is found
};

const Opened &opened() {
  static const Opened o = [] {
    Opened r;
    void *handle = dlopen(libraryName().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      r.error = "cannot open " + libraryName() + " (cuBLASLt, for gemm and matmul): " + (why ? why : "unknown");
      return r;
    }
    auto find = [&](auto &entry, const char *symbol) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(handle, symbol));
      if (!entry && r.error.empty())
        r.error = libraryName() + " has no " + symbol + ": a cuBLASLt older than the headers Castor was built with";
    };
    find(r.api.Create, "cublasLtCreate");
    find(r.api.Destroy, "cublasLtDestroy");
    find(r.api.Matmul, "cublasLtMatmul");
    find(r.api.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    find(r.api.MatmulDescCreate, "cublasLtMatmulDescCreate");
    find(r.api.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
    find(r.api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    find(r.api.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    find(r.api.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    find(r.api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    find(r.api.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    find(r.api.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    find(r.api.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    find(r.api.GetStatusName, "cublasLtGetStatusName");
    find(r.api.GetStatusString, "cublasLtGetStatusString");
    return r;
  }();
  return o;
}

} // namespace

Status openCublasLt() {
  const Opened &o = opened();
  return o.error.empty() ? Status::ok() : Status::error(o.error);
}

const CublasLtLibrary &cublasLtApi() {
  const Opened &o = opened();
  if (!o.error.empty()) {
    std::fprintf(stderr, "castor: %s\n", o.error.c_str());
    std::abort();
  }
  return o.api;
}

Status cublasStatus(cublasStatus_t e, const char *what) {
  if (e == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cublasLtApi().GetStatusName(e) + " (" +
                       cublasLtApi().GetStatusString(e) + ")");
}

} // namespace castor::cuda
