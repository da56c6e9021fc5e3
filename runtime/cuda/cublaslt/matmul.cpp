// gemm and matmul through cuBLASLt (cublasLtMatmul). Everything that does not change between
// steps is settled when the kernel is built: the matmul descriptor, the matrix layouts and the
// algorithm (cublasLtMatmulAlgoGetHeuristic's first answer for the operands' actual pointer
// alignment, within a workspace of at most 32 MiB); a RunFn only enqueues cublasLtMatmul on the
// step's stream with the shared workspace (DeviceContext::requestWorkspace), so it allocates
// nothing, never synchronises and can be captured in a CUDA graph.
//
// Row-major Y [M,N] = alpha op(A) op(B) is computed as the column-major Y^T = op(B)^T op(A)^T:
// cuBLASLt's A is our B and its B our A, its D has N rows and M columns. Accumulation and scale
// type: fp32 (CUBLAS_COMPUTE_32F, which never uses TF32) for f16/bf16/f32 operands, fp64 for f64.
//
// gemm's C: a bias of shape [N] or [1,N] in Y's dtype with beta 1 is added by the
// CUBLASLT_EPILOGUE_BIAS epilogue (bias length = rows of D = N; its dtype must be D's); a C of
// Y's shape and dtype is cuBLASLt's C (beta scales it); any other C is first broadcast into Y
// scaled by beta (broadcastScaled) and accumulated onto with beta 1.
// matmul's batch: one strided-batch call when neither operand broadcasts, one tall gemm when only
// B is shared ([.., M, K] x [K, N]), otherwise (or when cuBLASLt has no algorithm for those) one
// call per batch entry.
//
// Deterministic as it stands (BackendOptions::deterministic asks nothing more here): the algorithm
// is the heuristic's answer for the shapes, alignments and workspace cap, never timed, and
// cuBLASLt gives the same bits for one algorithm and workspace on one GPU and stream (its split-K
// reductions keep a fixed order).
#include "cuda/cublaslt/matmul.h"
#include "cuda/cublaslt/cublaslt_library.h"
#include "cuda/kernels/broadcast.h"
#include "cuda/kernels/elementwise.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace castor::cuda {
namespace {

using plan::Kernel;
using plan::Tensor;

constexpr size_t kMaxLtWorkspace = size_t(32) << 20;

cudaDataType_t cudaType(plan::DType t) {
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

// The largest power of two (at most 256) that divides the address: what cuBLASLt may assume of
// a buffer's alignment.
uint32_t alignmentOf(const void *p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a == 0)
    return 256;
  return uint32_t(std::min<uintptr_t>(256, a & (~a + 1)));
}
uint32_t alignmentOfBytes(uint64_t bytes) {
  if (bytes == 0)
    return 256;
  return uint32_t(std::min<uint64_t>(256, bytes & (~bytes + 1)));
}

// One cublasLtMatmul, all of it fixed at build time.
struct LtMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr; // cuBLASLt's A, B and C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspaceBytes = 0;
  bool f64 = false;
  float alpha32 = 1, beta32 = 0;
  double alpha64 = 1, beta64 = 0;

  LtMatmul() = default;
  LtMatmul(const LtMatmul &) = delete;
  LtMatmul &operator=(const LtMatmul &) = delete;
  ~LtMatmul() {
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l)
        cublasLtApi().MatrixLayoutDestroy(l);
    if (desc)
      cublasLtApi().MatmulDescDestroy(desc);
  }
  const void *alpha() const { return f64 ? static_cast<const void *>(&alpha64) : &alpha32; }
  const void *beta() const { return f64 ? static_cast<const void *>(&beta64) : &beta32; }
};
using LtMatmulPtr = std::shared_ptr<const LtMatmul>;

// What one cublasLtMatmul computes, in the row-major terms of the plan: Y [M,N] = alpha op(A)
// op(B) + beta C (C: Y's layout), `batch` times at element strides strideA/B/Y (0: one matrix),
// plus `bias` (length N, Y's dtype) when given. align*: the byte alignment every matrix pointer
// passed at run time has.
struct MatmulSpec {
  const char *op = "gemm";
  plan::DType dt = plan::F32;
  bool transA = false, transB = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideY = 0;
  double alpha = 1, beta = 0;
  const void *bias = nullptr;
  uint32_t alignA = 256, alignB = 256, alignC = 256, alignY = 256;
};

Status ltStatus(cublasStatus_t e, const char *op, const char *call) {
  return cublasStatus(e, (std::string(op) + ": " + call).c_str());
}

std::string describe(const MatmulSpec &s) {
  std::string d = "M=" + std::to_string(s.M) + ", N=" + std::to_string(s.N) + ", K=" + std::to_string(s.K) + ", " +
                  plan::dtypeName(s.dt);
  if (s.batch > 1)
    d += ", batch " + std::to_string(s.batch);
  if (s.transA || s.transB)
    d +=
        std::string(", ") + (s.transA ? "transA" : "") + (s.transA && s.transB ? " " : "") + (s.transB ? "transB" : "");
  if (s.bias)
    d += ", bias epilogue";
  return d;
}

Status makeLayout(cublasLtMatrixLayout_t *l, const MatmulSpec &s, uint64_t rows, uint64_t cols, int64_t stride) {
  CASTOR_RETURN_IF_ERROR(ltStatus(cublasLtApi().MatrixLayoutCreate(l, cudaType(s.dt), rows, cols, int64_t(rows)), s.op,
                                  "cublasLtMatrixLayoutCreate"));
  if (s.batch > 1) {
    const int32_t count = int32_t(s.batch);
    CASTOR_RETURN_IF_ERROR(
        ltStatus(cublasLtApi().MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), s.op,
                 "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
    CASTOR_RETURN_IF_ERROR(ltStatus(
        cublasLtApi().MatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride), s.op,
        "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
  }
  return Status::ok();
}

struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p)
      cublasLtApi().MatmulPreferenceDestroy(p);
  }
};

// The descriptors, layouts and algorithm of `s`; refused when cuBLASLt has no algorithm for it.
Expected<LtMatmulPtr> makeMatmul(DeviceContext &ctx, const MatmulSpec &s) {
  if (s.M > INT32_MAX || s.N > INT32_MAX || s.K > INT32_MAX || s.batch > INT32_MAX)
    return Status::error(std::string(s.op) + ": dimensions beyond 2^31 (" + describe(s) + ")");
  auto m = std::make_shared<LtMatmul>();
  m->f64 = s.dt == plan::F64;
  m->alpha32 = float(s.alpha), m->beta32 = float(s.beta);
  m->alpha64 = s.alpha, m->beta64 = s.beta;
  const cublasComputeType_t compute = m->f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F; // never TF32
  const cudaDataType_t scale = m->f64 ? CUDA_R_64F : CUDA_R_32F;
  CASTOR_RETURN_IF_ERROR(
      ltStatus(cublasLtApi().MatmulDescCreate(&m->desc, compute, scale), s.op, "cublasLtMatmulDescCreate"));
  // cuBLASLt's A is our B and its B our A (column-major Y^T = op(B)^T op(A)^T).
  const int32_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N, opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  CASTOR_RETURN_IF_ERROR(
      ltStatus(cublasLtApi().MatmulDescSetAttribute(m->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), s.op,
               "cublasLtMatmulDescSetAttribute(TRANSA)"));
  CASTOR_RETURN_IF_ERROR(
      ltStatus(cublasLtApi().MatmulDescSetAttribute(m->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), s.op,
               "cublasLtMatmulDescSetAttribute(TRANSB)"));
  if (s.bias) {
    // The bias vector has D's dtype: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE keeps its default (-1,
    // "D's type"), which only IMMA and fp8 matmuls depart from. Its pointer is fixed (the arena
    // does not move) and the heuristic reads its alignment.
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CASTOR_RETURN_IF_ERROR(
        ltStatus(cublasLtApi().MatmulDescSetAttribute(m->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
                 s.op, "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
    CASTOR_RETURN_IF_ERROR(
        ltStatus(cublasLtApi().MatmulDescSetAttribute(m->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof s.bias),
                 s.op, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
  }
  // Stored (pre-op) column-major shapes: our B is [K,N] row-major = [N,K] column-major (or
  // [K,N] with transB), our A is [K,M] column-major (or [M,K] with transA), Y^T is [N,M].
  CASTOR_RETURN_IF_ERROR(
      makeLayout(&m->a, s, uint64_t(s.transB ? s.K : s.N), uint64_t(s.transB ? s.N : s.K), s.strideB));
  CASTOR_RETURN_IF_ERROR(
      makeLayout(&m->b, s, uint64_t(s.transA ? s.M : s.K), uint64_t(s.transA ? s.K : s.M), s.strideA));
  CASTOR_RETURN_IF_ERROR(makeLayout(&m->d, s, uint64_t(s.N), uint64_t(s.M), s.strideY));

  Preference pref;
  CASTOR_RETURN_IF_ERROR(ltStatus(cublasLtApi().MatmulPreferenceCreate(&pref.p), s.op, "cublasLtMatmulPreferenceCreate"));
  const uint64_t maxWorkspace = std::min(kMaxLtWorkspace, ctx.workspaceLimit);
  CASTOR_RETURN_IF_ERROR(ltStatus(cublasLtApi().MatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                       &maxWorkspace, sizeof maxWorkspace),
                                  s.op, "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
  // Swapped as the operands are; C and D share Y's layout.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, s.alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, s.alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, s.alignC},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, s.alignY}};
  for (const auto &[attr, bytes] : alignments)
    CASTOR_RETURN_IF_ERROR(ltStatus(cublasLtApi().MatmulPreferenceSetAttribute(pref.p, attr, &bytes, sizeof bytes), s.op,
                                    "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t e =
      cublasLtApi().MatmulAlgoGetHeuristic(ctx.cublasLt, m->desc, m->a, m->b, m->d, m->d, pref.p, 1, &result, &found);
  if (e == CUBLAS_STATUS_NOT_SUPPORTED ||
      (e == CUBLAS_STATUS_SUCCESS && (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)))
    return Status::error(std::string(s.op) + ": cublasLtMatmulAlgoGetHeuristic found no algorithm for " + describe(s));
  CASTOR_RETURN_IF_ERROR(ltStatus(e, s.op, "cublasLtMatmulAlgoGetHeuristic"));
  m->algo = result.algo;
  m->workspaceBytes = result.workspaceSize;
  ctx.requestWorkspace(result.workspaceSize);
  return LtMatmulPtr(std::move(m));
}

// Enqueues `m` on the step's stream. ctx.workspace is allocated after every kernel is built:
// read it when running.
Status runMatmul(const DeviceContext &c, const LtMatmul &m, const char *op, const void *A, const void *B, const void *C,
                 void *Y) {
  return ltStatus(cublasLtApi().Matmul(c.cublasLt, m.desc, m.alpha(), B, m.a, A, m.b, m.beta(), C, m.d, Y, m.d, &m.algo,
                                 c.workspace, m.workspaceBytes, c.stream),
                  op, "cublasLtMatmul");
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
  if (as.size() != 2 || ys.size() != 2)
    return Status::error("gemm takes rank-2 A and Y");
  const int64_t M = ys[0], N = ys[1], K = p->transA ? as[0] : as[1];
  const plan::GemmParams g = *p;
  if (C && g.beta == 0)
    C = nullptr; // beta 0: C is not read
  Broadcast bc;
  if (C) {
    auto b = makeBroadcast(shapeOf(*C), shapeOf(*C), ys);
    if (!b)
      return b.status();
    bc = *b;
    if (bc.rank == 0 && shapeOf(*C) != ys)
      return Status::error("gemm: C does not broadcast to Y");
  }
  const int64_t count = M * N;
  if (count == 0)
    return RunFn([]() { return Status::ok(); });
  if (K == 0) // Y = beta C (or 0): no product to take
    return RunFn([c, g, C, y, bc, count]() -> Status {
      if (C)
        return cudaStatus(broadcastScaled(c->ref(C), c->ref(y), bc, count, g.beta, c->stream), "gemm C");
      return cudaStatus(fill(c->ref(y), count, 0.0, c->stream), "gemm: zero Y");
    });

  MatmulSpec s;
  s.op = "gemm";
  s.dt = y->dtype();
  s.transA = g.transA, s.transB = g.transB;
  s.M = M, s.N = N, s.K = K;
  s.alpha = g.alpha;
  s.alignA = alignmentOf(c->ptr(A)), s.alignB = alignmentOf(c->ptr(B));
  s.alignC = s.alignY = alignmentOf(c->ptr(y));

  const Shape cs = C ? shapeOf(*C) : Shape{};
  const bool sameDtype = C && C->dtype() == y->dtype();
  // A bias along the rows: the epilogue adds it (unless cuBLASLt has no such algorithm).
  if (sameDtype && g.beta == 1 && s.dt != plan::F64 && !overlap(C, y) && cs.size() >= 1 && cs.size() <= 2 &&
      cs.back() == N && countOf(*C) == N) {
    MatmulSpec biased = s;
    biased.bias = c->ptr(C);
    if (auto m = makeMatmul(ctx, biased)) {
      const LtMatmulPtr lt = *m;
      return RunFn(
          [c, lt, A, B, y]() { return runMatmul(*c, *lt, "gemm", c->ptr(A), c->ptr(B), c->ptr(y), c->ptr(y)); });
    }
  }
  // C of Y's shape and dtype: cuBLASLt's C (in place when it is Y's slot).
  if (sameDtype && cs == ys && (C->offset() == y->offset() || !overlap(C, y))) {
    s.beta = g.beta;
    s.alignC = alignmentOf(c->ptr(C));
    auto m = makeMatmul(ctx, s);
    if (!m)
      return m.status();
    const LtMatmulPtr lt = *m;
    return RunFn(
        [c, lt, A, B, C, y]() { return runMatmul(*c, *lt, "gemm", c->ptr(A), c->ptr(B), c->ptr(C), c->ptr(y)); });
  }
  // Any other C: broadcast beta C into Y, then accumulate onto it.
  s.beta = C ? 1.0 : 0.0;
  auto m = makeMatmul(ctx, s);
  if (!m)
    return m.status();
  const LtMatmulPtr lt = *m;
  return RunFn([c, g, lt, A, B, C, y, bc, count]() -> Status {
    if (C)
      CASTOR_RETURN_IF_ERROR(cudaStatus(broadcastScaled(c->ref(C), c->ref(y), bc, count, g.beta, c->stream), "gemm C"));
    return runMatmul(*c, *lt, "gemm", c->ptr(A), c->ptr(B), c->ptr(y), c->ptr(y));
  });
}

Expected<RunFn> buildMatmul(DeviceContext &ctx, const TensorList &in, const Tensor *y) {
  DeviceContext *c = &ctx;
  const Tensor *A = in[0], *B = in[1];
  if (A->dtype() != B->dtype() || A->dtype() != y->dtype() || !isFloat(A->dtype()))
    return Status::error("matmul operands must share one float dtype");
  const Shape as = shapeOf(*A), bs = shapeOf(*B);
  if (as.empty() || bs.empty())
    return Status::error("matmul takes operands of rank 1 or more");
  const Shape pa = as.size() == 1 ? Shape{1, as[0]} : as;
  const Shape pb = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
  const Shape batchA(pa.begin(), pa.end() - 2), batchB(pb.begin(), pb.end() - 2);
  auto batch = shape::broadcast(batchA, batchB);
  if (!batch)
    return Status::error(batch.error);
  const std::vector<int64_t> ia = broadcastIndex(batchA, batch.shape), ib = broadcastIndex(batchB, batch.shape);
  const int64_t n = int64_t(ia.size());
  if (n == 0 || M == 0 || N == 0)
    return RunFn([]() { return Status::ok(); });
  if (K == 0)
    return RunFn(
        [c, y, n, M, N]() { return cudaStatus(fill(c->ref(y), n * M * N, 0.0, c->stream), "matmul: zero Y"); });

  bool ownA = true, ownB = true, sharedB = true; // ia[t] == t, ib[t] == t, ib[t] == 0
  for (int64_t t = 0; t < n; ++t) {
    ownA = ownA && ia[size_t(t)] == t;
    ownB = ownB && ib[size_t(t)] == t;
    sharedB = sharedB && ib[size_t(t)] == 0;
  }
  const uint64_t elem = plan::dtypeSize(y->dtype());
  MatmulSpec s;
  s.op = "matmul";
  s.dt = y->dtype();
  s.M = M, s.N = N, s.K = K;
  s.alignA = alignmentOf(c->ptr(A)), s.alignB = alignmentOf(c->ptr(B));
  s.alignC = s.alignY = alignmentOf(c->ptr(y));
  if (n > 1 && ownA && ownB) { // one strided-batch call
    s.batch = n, s.strideA = M * K, s.strideB = K * N, s.strideY = M * N;
    s.alignA = std::min(s.alignA, alignmentOfBytes(uint64_t(M * K) * elem));
    s.alignB = std::min(s.alignB, alignmentOfBytes(uint64_t(K * N) * elem));
    s.alignC = s.alignY = std::min(s.alignY, alignmentOfBytes(uint64_t(M * N) * elem));
  } else if (n > 1 && ownA && sharedB && n * M <= INT32_MAX) { // [n*M, K] x [K, N]: one tall gemm
    s.M = n * M;
  }
  if (s.batch > 1 || s.M != M || n == 1) {
    auto m = makeMatmul(ctx, s);
    if (m || n == 1) {
      if (!m)
        return m.status();
      const LtMatmulPtr lt = *m;
      return RunFn(
          [c, lt, A, B, y]() { return runMatmul(*c, *lt, "matmul", c->ptr(A), c->ptr(B), c->ptr(y), c->ptr(y)); });
    }
    // No algorithm for the batch in one call: one call per entry, as below.
    s.batch = 1, s.strideA = s.strideB = s.strideY = 0, s.M = M;
  }
  // Broadcast batch entries: one call each, every pointer as aligned as the least aligned.
  s.alignA = s.alignB = s.alignY = 256;
  for (int64_t t = 0; t < n; ++t) {
    s.alignA = std::min(s.alignA, alignmentOf(c->ptr(A) + uint64_t(ia[size_t(t)] * M * K) * elem));
    s.alignB = std::min(s.alignB, alignmentOf(c->ptr(B) + uint64_t(ib[size_t(t)] * K * N) * elem));
    s.alignY = std::min(s.alignY, alignmentOf(c->ptr(y) + uint64_t(t * M * N) * elem));
  }
  s.alignC = s.alignY;
  auto m = makeMatmul(ctx, s);
  if (!m)
    return m.status();
  const LtMatmulPtr lt = *m;
  return RunFn([c, lt, A, B, y, ia, ib, M, N, K, elem]() -> Status {
    for (size_t t = 0; t < ia.size(); ++t) {
      uint8_t *py = c->ptr(y) + uint64_t(int64_t(t) * M * N) * elem;
      CASTOR_RETURN_IF_ERROR(runMatmul(*c, *lt, "matmul", c->ptr(A) + uint64_t(ia[t] * M * K) * elem,
                                       c->ptr(B) + uint64_t(ib[t] * K * N) * elem, py, py));
    }
    return Status::ok();
  });
}

} // namespace

Expected<RunFn> buildCublasLtMatmul(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  if (in.size() < 2 || out.empty())
    return Status::error(k.op() + " needs 2 inputs and 1 output");
  for (const Tensor *t : in)
    if (ctx.channelsLast(t))
      return Status::error(k.op() + " on a rank-4 operand is not supported by the cuda backend");
  if (opOf(k) == OpId::Gemm)
    return buildGemm(ctx, k, in, out[0]);
  if (opOf(k) == OpId::Matmul) {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    return buildMatmul(ctx, in, out[0]);
  }
  return Status::error("no matmul kernel '" + k.op() + "'");
}

} // namespace castor::cuda
