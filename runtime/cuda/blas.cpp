// gemm and matmul through cuBLAS (cublasGemmEx): fp32 accumulation, no TF32 for fp32 operands
// (the handle's math mode is CUBLAS_DEFAULT_MATH).
#include "cuda/device_context.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <climits>

namespace castor::cuda {
namespace {

using plan::Kernel;
using plan::Tensor;

cudaDataType_t cublasType(plan::DType t) {
  switch (t) {
  case plan::F16:
    return CUDA_R_16F;
  case plan::BF16:
    return CUDA_R_16BF;
  case plan::F64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

// Row-major Y [M,N] = alpha op(A) op(B) + beta Y, as the column-major Y^T = op(B)^T op(A)^T.
Status gemmCall(cublasHandle_t handle, bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                const void *B, double beta, void *Y, plan::DType dt) {
  const cudaDataType_t type = cublasType(dt);
  const bool f64 = dt == plan::F64;
  const float af = float(alpha), bf = float(beta);
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  return cublasStatus(cublasGemmEx(handle, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   int(N), int(M), int(K), f64 ? static_cast<const void *>(&alpha) : &af, B, type,
                                   int(transB ? K : N), A, type, int(transA ? M : K),
                                   f64 ? static_cast<const void *>(&beta) : &bf, Y, type, int(N), compute,
                                   CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

Expected<RunFn> buildGemm(DeviceContext &ctx, const Kernel &k, const TensorList &in, const Tensor *y) {
  DeviceContext *c = &ctx;
  auto p = plan::parseGemm(k);
  if (!p)
    return p.status();
  const Tensor *A = in[0], *B = in[1], *C = in.size() > 2 ? in[2] : nullptr;
  if (A->dtype() != B->dtype() || A->dtype() != y->dtype() || !isFloat(A->dtype()))
    return Status::error("gemm operands A, B and Y must share one float dtype");
  const Shape as = shapeOf(*A), ys = shapeOf(*y);
  const int64_t M = ys[0], N = ys[1], K = p->transA ? as[0] : as[1];
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
    return Status::error("gemm dimensions beyond 2^31");
  const plan::GemmParams g = *p;
  Broadcast bc;
  if (C) {
    auto b = makeBroadcast(shapeOf(*C), shapeOf(*C), ys);
    if (!b)
      return b.status();
    bc = *b;
    if (bc.rank == 0 && shapeOf(*C) != ys)
      return Status::error("gemm: C does not broadcast to Y");
  }
  return RunFn([c, g, A, B, C, y, M, N, K, bc]() -> Status {
    double beta = 0;
    if (C && g.beta != 0) {
      CASTOR_RETURN_IF_ERROR(
          cudaStatus(broadcastScaled(c->ref(C), c->ref(y), bc, countOf(*y), g.beta, c->stream), "gemm C"));
      beta = 1;
    }
    return gemmCall(c->cublas, g.transA, g.transB, M, N, K, g.alpha, c->ptr(A), c->ptr(B), beta, c->ptr(y), y->dtype());
  });
}

Expected<RunFn> buildMatmul(DeviceContext &ctx, const TensorList &in, const Tensor *y) {
  DeviceContext *c = &ctx;
  const Tensor *A = in[0], *B = in[1];
  if (A->dtype() != B->dtype() || A->dtype() != y->dtype() || !isFloat(A->dtype()))
    return Status::error("matmul operands must share one float dtype");
  const Shape as = shapeOf(*A), bs = shapeOf(*B);
  const Shape pa = as.size() == 1 ? Shape{1, as[0]} : as;
  const Shape pb = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
  const Shape batchA(pa.begin(), pa.end() - 2), batchB(pb.begin(), pb.end() - 2);
  auto batch = shape::broadcast(batchA, batchB);
  if (!batch)
    return Status::error(batch.error);
  const auto ia = broadcastIndex(batchA, batch.shape), ib = broadcastIndex(batchB, batch.shape);
  const uint64_t elem = plan::dtypeSize(y->dtype());
  return RunFn([c, A, B, y, M, N, K, ia, ib, elem]() -> Status {
    for (size_t t = 0; t < ia.size(); ++t)
      CASTOR_RETURN_IF_ERROR(gemmCall(c->cublas, false, false, M, N, K, 1.0, c->ptr(A) + uint64_t(ia[t] * M * K) * elem,
                                      c->ptr(B) + uint64_t(ib[t] * K * N) * elem, 0.0,
                                      c->ptr(y) + uint64_t(t * M * N) * elem, y->dtype()));
    return Status::ok();
  });
}

} // namespace

Expected<RunFn> buildBlas(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  if (in.size() < 2 || out.empty())
    return Status::error(k.op() + " needs 2 inputs and 1 output");
  for (const Tensor *t : in)
    if (ctx.channelsLast(t))
      return Status::error(k.op() + " on a rank-4 operand is not supported by the cuda backend");
  if (k.op() == "gemm")
    return buildGemm(ctx, k, in, out[0]);
  if (k.op() == "matmul") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    return buildMatmul(ctx, in, out[0]);
  }
  return Status::error("no matmul kernel '" + k.op() + "'");
}

} // namespace castor::cuda
