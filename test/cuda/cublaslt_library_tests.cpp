// cuBLASLt opened at backend load (cuda/cublaslt/cublaslt_library.h), without a GPU: the library
// opens, every entry point is found, its status names reach an error message, and a binary with
// the CUDA backend does not load it before (its start does not pay for the library's relocations).
//
//   castor_cublaslt_library_tests   (exit status 0 when everything passes)
#include "../common/expectations.h"
#include "cuda/cublaslt/cublaslt_library.h"

#include <link.h>

#include <cstdio>
#include <cstring>
#include <string>

using namespace castor;
using castor::test::expect;

namespace {

// Whether a shared object named like `prefix` is loaded into this process.
bool loaded(const char *prefix) {
  struct Search {
    const char *prefix;
    bool found = false;
  } s{prefix};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<Search *>(data);
        const char *slash = std::strrchr(info->dlpi_name, '/');
        const char *base = slash ? slash + 1 : info->dlpi_name;
        if (std::strncmp(base, s->prefix, std::strlen(s->prefix)) == 0)
          s->found = true;
        return 0;
      },
      &s);
  return s.found;
}

} // namespace

int main() {
  expect(!loaded("libcublasLt.so"), "libcublasLt is not loaded before a backend opens it");
  expect(!loaded("libcublas.so"), "libcublas (unused) is not linked");
  const Status opened = cuda::openCublasLt();
  expect(bool(opened), "cuBLASLt opens: " + opened.message());
  if (opened) {
    expect(loaded("libcublasLt.so"), "libcublasLt is loaded once opened");
    const auto &lt = cuda::cublasLtApi();
    expect(std::string(lt.GetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS",
           "cublasLtGetStatusName answers");
    const Status failed = cuda::cublasStatus(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtCreate(&handle)");
    expect(!failed && failed.message().find("cublasLtCreate(&handle): CUBLAS_STATUS_NOT_INITIALIZED") == 0,
           "a failed call names itself and the status: " + failed.message());
    expect(bool(cuda::cublasStatus(CUBLAS_STATUS_SUCCESS, "x")), "success is no error");
    expect(lt.Create != nullptr && lt.Matmul != nullptr && lt.MatmulAlgoGetHeuristic != nullptr &&
               lt.MatrixLayoutSetAttribute != nullptr && lt.MatmulPreferenceDestroy != nullptr,
           "the entry points are found");
  }
  return test::verdict();
}
