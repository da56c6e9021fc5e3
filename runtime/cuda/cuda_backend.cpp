// The CUDA backend: one device arena, every kernel of the plan in order on one stream.
//
// Convolutions go through cuDNN's convolution API (cudnn.h: NCHW descriptors, the algorithm
// picked by cuDNN's heuristic, cudnnGet*Algorithm_v7, TF32 off for fp32); gemm and matmul
// through cuBLAS (cublasGemmEx, fp32 accumulation, TF32 off); everything else through the own
// kernels of kernels.cu. Scalars that change during training never leave the device, so a step
// is one stream of launches with one synchronisation at its end.
//
// Not yet: the cudnn-frontend graph API with fused conv-BN-ReLU, NHWC, timing-based algorithm
// choice with a persistent cache, CUDA-graph capture of the whole step.

#include "castor/cuda_backend.h"

#include "castor/shape_rules.h"
#include "cuda/kernels.h"
#include "plan/op_attrs.h"
#include "plan/plan_validator.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace castor {
namespace {

using plan::Kernel;
using plan::Tensor;
using Shape = std::vector<int64_t>;
using RunFn = std::function<Status()>;

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
Status cublasStatus(cublasStatus_t e, const char *what) {
  if (e == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": cuBLAS status " + std::to_string(int(e)));
}

#define CASTOR_CUDA(call) CASTOR_RETURN_IF_ERROR(cudaStatus((call), #call))
#define CASTOR_CUDNN(call) CASTOR_RETURN_IF_ERROR(cudnnStatus((call), #call))
#define CASTOR_CUBLAS(call) CASTOR_RETURN_IF_ERROR(cublasStatus((call), #call))

Shape shapeOf(const Tensor &t) { return Shape(t.shape().begin(), t.shape().end()); }
int64_t countOf(const Tensor &t) { return *plan::elementCount(t); }
int64_t span(const Shape &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    n *= s[i];
  return n;
}

// Element strides of `in` (right-aligned against `out`, 0 where it broadcasts).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t d = in.size() - 1 - i, o = out.size() - 1 - i;
    strides[o] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

Expected<cuda::Broadcast> makeBroadcast(const Shape &a, const Shape &b, const Shape &out) {
  cuda::Broadcast bc;
  if (a == out && b == out)
    return bc; // rank 0: same shapes, flat indices
  if (out.size() > size_t(cuda::kMaxRank))
    return Status::error("broadcasting over more than " + std::to_string(cuda::kMaxRank) + " dimensions");
  bc.rank = int(out.size());
  auto sa = broadcastStrides(a, out), sb = broadcastStrides(b, out);
  for (size_t d = 0; d < out.size(); ++d)
    bc.out[d] = out[d], bc.sa[d] = sa[d], bc.sb[d] = sb[d];
  return bc;
}

// Flat indices of the batch entries of `in` broadcast against `out` (matmul's batch dims).
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  const auto strides = broadcastStrides(in, out);
  const int64_t n = span(out, 0, out.size());
  std::vector<int64_t> map(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, at = 0;
    for (size_t d = out.size(); d-- > 0;) {
      at += (rest % out[d]) * strides[d];
      rest /= out[d];
    }
    map[size_t(i)] = at;
  }
  return map;
}

cudnnDataType_t cudnnType(plan::DType t) {
  switch (t) {
  case plan::F16:
    return CUDNN_DATA_HALF;
  case plan::BF16:
    return CUDNN_DATA_BFLOAT16;
  case plan::F64:
    return CUDNN_DATA_DOUBLE;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

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

bool isFloat(plan::DType t) { return t == plan::F32 || t == plan::F16 || t == plan::BF16 || t == plan::F64; }

// cuDNN descriptors of one convolution (forward geometry: x [N,C,H,W], w [K,C/g,R,S], y).
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~ConvDescriptors() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
  }
};

enum class ConvPass { Forward, BackwardData, BackwardFilter };

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const BackendOptions &options)
      : poison_(options.poison || poisonRequestedByEnvironment()),
        syncEach_(std::getenv("CASTOR_CUDA_SYNC") && std::strcmp(std::getenv("CASTOR_CUDA_SYNC"), "0") != 0) {}

  ~CudaBackend() override {
    kernels_.clear();
    convs_.clear();
    if (cudnn_)
      cudnnDestroy(cudnn_);
    if (cublas_)
      cublasDestroy(cublas_);
    if (arena_)
      cudaFree(arena_);
    if (workspace_)
      cudaFree(workspace_);
    if (scratch_)
      cudaFree(scratch_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }

  Status load(const plan::Plan &p) override {
    if (arena_)
      return Status::error("the cuda backend loads one plan per backend object");
    plan_ = p;
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
      return Status::error(std::string("no usable CUDA device: ") +
                           (e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
    cudaDeviceProp prop{};
    CASTOR_CUDA(cudaGetDeviceProperties(&prop, 0));
    deviceName_ = prop.name;
    for (const Tensor &t : plan_.tensors()) {
      if (std::string error = plan::slotError(t, plan_.arena_bytes()); !error.empty())
        return Status::error(error);
      tensors_[t.id()] = &t;
    }
    size_t freeBytes = 0, totalBytes = 0;
    CASTOR_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
    const uint64_t reserve = uint64_t(256) << 20; // handles, library workspaces
    if (plan_.arena_bytes() + reserve > freeBytes)
      return Status::error("the plan needs an arena of " + gib(plan_.arena_bytes()) + " but " + deviceName_ +
                           " has " + gib(freeBytes) + " free of " + gib(totalBytes) +
                           " (compile with a smaller --batch, or recompute more)");
    CASTOR_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CASTOR_CUDA(cudaMalloc(reinterpret_cast<void **>(&arena_), std::max<uint64_t>(plan_.arena_bytes(), 256)));
    CASTOR_CUDA(cudaMemsetAsync(arena_, 0, plan_.arena_bytes(), stream_));
    CASTOR_CUDA(cudaMalloc(reinterpret_cast<void **>(&scratch_), 64 * sizeof(double)));
    CASTOR_CUDNN(cudnnCreate(&cudnn_));
    CASTOR_CUDNN(cudnnSetStream(cudnn_, stream_));
    CASTOR_CUBLAS(cublasCreate(&cublas_));
    CASTOR_CUBLAS(cublasSetStream(cublas_, stream_));
    CASTOR_CUBLAS(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH)); // no TF32 for fp32
    CASTOR_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
    workspaceLimit_ = std::min<size_t>(size_t(1) << 30, freeBytes / 2);

    for (int i = 0; i < plan_.kernels_size(); ++i) {
      const Kernel &k = plan_.kernels(i);
      const std::string where = plan::describeKernel(plan_, i);
      std::vector<const Tensor *> in, out;
      for (uint32_t id : k.inputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        in.push_back(it->second);
      }
      for (uint32_t id : k.outputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        out.push_back(it->second);
      }
      auto fn = build(k, in, out);
      if (!fn)
        return fn.status().withContext(where + " on cuda");
      kernels_.push_back(std::move(*fn));
    }
    if (workspaceBytes_ > 0)
      CASTOR_CUDA(cudaMalloc(&workspace_, workspaceBytes_));
    if (poison_) {
      poisonAfter_.resize(size_t(plan_.kernels_size()));
      auto ranges = plan::computeLiveRanges(plan_);
      for (const Tensor &t : plan_.tensors()) {
        if (t.kind() != Tensor::ACTIVATION && t.kind() != Tensor::INPUT)
          continue;
        int64_t end = ranges[t.id()].end;
        if (end >= 0 && end < plan_.kernels_size())
          poisonAfter_[size_t(end)].push_back(&t);
      }
    }
    CASTOR_CUDA(cudaStreamSynchronize(stream_));
    return Status::ok();
  }

  Status upload(uint32_t id, const void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    CASTOR_CUDA(cudaMemcpyAsync(arena_ + (*t)->offset(), data, bytes, cudaMemcpyHostToDevice, stream_));
    CASTOR_CUDA(cudaStreamSynchronize(stream_));
    return Status::ok();
  }

  Status download(uint32_t id, void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    CASTOR_CUDA(cudaMemcpyAsync(data, arena_ + (*t)->offset(), bytes, cudaMemcpyDeviceToHost, stream_));
    CASTOR_CUDA(cudaStreamSynchronize(stream_));
    return Status::ok();
  }

  Status run() override {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      Status s = kernels_[i]();
      if (s && syncEach_)
        s = cudaStatus(cudaStreamSynchronize(stream_), "after the kernel");
      if (!s)
        return s.withContext(plan::describeKernel(plan_, int(i)) + " on cuda");
      if (poison_)
        for (const Tensor *t : poisonAfter_[i])
          CASTOR_CUDA(cudaMemsetAsync(arena_ + t->offset(), 0xFF, t->bytes(), stream_));
    }
    return cudaStatus(cudaStreamSynchronize(stream_), "running the plan on cuda");
  }

private:
  static std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
    return buf;
  }

  Expected<const Tensor *> find(uint32_t id, size_t bytes) {
    auto it = tensors_.find(id);
    if (it == tensors_.end())
      return Status::error("no tensor with id " + std::to_string(id));
    if (it->second->bytes() != bytes)
      return Status::error("tensor " + std::to_string(id) + " '" + it->second->name() + "' holds " +
                           std::to_string(it->second->bytes()) + " bytes, got " + std::to_string(bytes));
    return it->second;
  }

  uint8_t *ptr(const Tensor *t) const { return arena_ + t->offset(); }
  cuda::Ref ref(const Tensor *t) const { return cuda::Ref{ptr(t), int(t->dtype())}; }
  int64_t *ints(const Tensor *t) const { return reinterpret_cast<int64_t *>(ptr(t)); }

  RunFn launch(std::function<cudaError_t()> f) {
    return [f]() { return cudaStatus(f(), "kernel launch"); };
  }

  Expected<RunFn> build(const Kernel &k, const std::vector<const Tensor *> &in, const std::vector<const Tensor *> &out);
  Expected<RunFn> buildConv(const Kernel &k, ConvPass pass, const Tensor *x, const Tensor *w, const Tensor *y,
                            const Tensor *bias);
  Expected<RunFn> buildGemm(const Kernel &k, const std::vector<const Tensor *> &in, const Tensor *y);
  Expected<RunFn> buildMatmul(const std::vector<const Tensor *> &in, const Tensor *y);
  Status gemmCall(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                  const void *B, double beta, void *Y, plan::DType dt);
  RunFn copyOrConvert(const Tensor *x, const Tensor *y);

  bool poison_, syncEach_;
  plan::Plan plan_;
  std::string deviceName_;
  std::unordered_map<uint32_t, const Tensor *> tensors_;
  std::vector<RunFn> kernels_;
  std::vector<std::shared_ptr<ConvDescriptors>> convs_;
  std::vector<std::vector<const Tensor *>> poisonAfter_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  uint8_t *arena_ = nullptr;
  void *workspace_ = nullptr;
  size_t workspaceBytes_ = 0, workspaceLimit_ = 0;
  double *scratch_ = nullptr;
};

RunFn CudaBackend::copyOrConvert(const Tensor *x, const Tensor *y) {
  if (x->dtype() == y->dtype())
    return [this, x, y]() {
      if (x->offset() == y->offset())
        return Status::ok();
      return cudaStatus(cudaMemcpyAsync(ptr(y), ptr(x), x->bytes(), cudaMemcpyDeviceToDevice, stream_), "copy");
    };
  return launch([this, x, y]() { return cuda::convert(ref(x), ref(y), countOf(*y), stream_); });
}

// --- Convolutions through cuDNN -------------------------------------------------------------

Expected<RunFn> CudaBackend::buildConv(const Kernel &k, ConvPass pass, const Tensor *x, const Tensor *w,
                                       const Tensor *y, const Tensor *bias) {
  auto p = plan::parseConv2d(k);
  if (!p)
    return p.status();
  const auto &a = p->shape;
  if (x->dtype() != w->dtype() || x->dtype() != y->dtype() || !isFloat(x->dtype()))
    return Status::error("convolution operands must share one float dtype (got " + plan::dtypeName(x->dtype()) +
                         ", " + plan::dtypeName(w->dtype()) + ", " + plan::dtypeName(y->dtype()) + ")");
  if (a.pads[0] != a.pads[2] || a.pads[1] != a.pads[3])
    return Status::error("asymmetric convolution padding is not supported by the cuda backend yet");
  const Shape xs = shapeOf(*x), ws = shapeOf(*w), ys = shapeOf(*y);
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4)
    return Status::error("the cuda backend runs 2-D convolutions on NCHW tensors only");
  auto d = std::make_shared<ConvDescriptors>();
  const plan::DType dt = x->dtype();
  const cudnnDataType_t type = cudnnType(dt);
  const cudnnDataType_t compute = dt == plan::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->x));
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->y));
  CASTOR_CUDNN(cudnnCreateFilterDescriptor(&d->w));
  CASTOR_CUDNN(cudnnCreateConvolutionDescriptor(&d->conv));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, type, int(xs[0]), int(xs[1]), int(xs[2]),
                                          int(xs[3])));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, int(ys[0]), int(ys[1]), int(ys[2]),
                                          int(ys[3])));
  CASTOR_CUDNN(cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NCHW, int(ws[0]), int(ws[1]), int(ws[2]),
                                          int(ws[3])));
  CASTOR_CUDNN(cudnnSetConvolution2dDescriptor(d->conv, int(a.pads[0]), int(a.pads[1]), int(a.strides[0]),
                                               int(a.strides[1]), int(a.dilations[0]), int(a.dilations[1]),
                                               CUDNN_CROSS_CORRELATION, compute));
  CASTOR_CUDNN(cudnnSetConvolutionGroupCount(d->conv, int(a.groups)));
  // fp32: FMA kernels only (no TF32), so that fp32 agrees with the reference within 1e-4.
  const bool fp32 = dt == plan::F32 || dt == plan::F64;
  CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  CASTOR_CUDNN(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &on, &oc, &oh, &ow));
  if (on != ys[0] || oc != ys[1] || oh != ys[2] || ow != ys[3])
    return Status::error("cuDNN's output shape [" + std::to_string(on) + ", " + std::to_string(oc) + ", " +
                         std::to_string(oh) + ", " + std::to_string(ow) + "] differs from the plan's");

  // The heuristic's first algorithm that runs within the workspace limit (and, for fp32, uses
  // FMA math).
  auto acceptable = [&](cudnnStatus_t status, size_t memory, cudnnMathType_t math) {
    return status == CUDNN_STATUS_SUCCESS && memory <= workspaceLimit_ && (!fp32 || math == CUDNN_FMA_MATH ||
                                                                           math == CUDNN_DEFAULT_MATH);
  };
  constexpr int kMaxAlgos = 16;
  int returned = 0;
  size_t wsBytes = 0;
  cudnnMathType_t math = fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  // The heuristic's first engine that fits the workspace (and, in fp32, uses no tensor-core
  // down-conversion), else `fallback`.
  auto choose = [&](const auto *perf, auto fallback) {
    for (int i = 0; i < returned; ++i)
      if (acceptable(perf[i].status, perf[i].memory, perf[i].mathType)) {
        math = fp32 ? CUDNN_FMA_MATH : perf[i].mathType;
        return perf[i].algo;
      }
    return fallback;
  };
  const void *one = nullptr, *zero = nullptr;
  static const float onef = 1.0f, zerof = 0.0f;
  static const double oned = 1.0, zerod = 0.0;
  one = dt == plan::F64 ? static_cast<const void *>(&oned) : static_cast<const void *>(&onef);
  zero = dt == plan::F64 ? static_cast<const void *>(&zerod) : static_cast<const void *>(&zerof);
  RunFn run;
  if (pass == ConvPass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, d->x, d->w, d->conv, d->y, kMaxAlgos, &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, d->x, d->w, d->conv, d->y, algo, &wsBytes));
    run = [this, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionForward(cudnn_, one, d->x, ptr(x), d->w, ptr(w), d->conv, algo, workspace_,
                                                 wsBytes, zero, d->y, ptr(y)),
                         "cudnnConvolutionForward");
    };
  } else if (pass == ConvPass::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, d->w, d->y, d->conv, d->x, kMaxAlgos, &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, d->w, d->y, d->conv, d->x, algo, &wsBytes));
    // Here x is dx (written) and y is dy (read).
    run = [this, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionBackwardData(cudnn_, one, d->w, ptr(w), d->y, ptr(y), d->conv, algo,
                                                      workspace_, wsBytes, zero, d->x, ptr(x)),
                         "cudnnConvolutionBackwardData");
    };
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, d->x, d->y, d->conv, d->w, kMaxAlgos, &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, d->x, d->y, d->conv, d->w, algo, &wsBytes));
    // Here w is dw (written).
    run = [this, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionBackwardFilter(cudnn_, one, d->x, ptr(x), d->y, ptr(y), d->conv, algo,
                                                        workspace_, wsBytes, zero, d->w, ptr(w)),
                         "cudnnConvolutionBackwardFilter");
    };
  }
  workspaceBytes_ = std::max(workspaceBytes_, wsBytes);
  convs_.push_back(d);
  if (!bias)
    return run;
  // The bias [K], broadcast over [N, K, P, Q], added after the convolution.
  auto bc = makeBroadcast(ys, Shape{1, ys[1], 1, 1}, ys);
  if (!bc)
    return bc.status();
  const cuda::Broadcast b = *bc;
  return RunFn([this, run, b, y, bias]() -> Status {
    CASTOR_RETURN_IF_ERROR(run());
    return cudaStatus(cuda::binary(cuda::BinaryOp::Add, ref(y), ref(bias), ref(y), b, countOf(*y), stream_),
                      "conv2d bias");
  });
}

// --- gemm and matmul through cuBLAS ---------------------------------------------------------

// Row-major Y [M,N] = alpha op(A) op(B) + beta Y, as the column-major Y^T = op(B)^T op(A)^T.
Status CudaBackend::gemmCall(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                             const void *B, double beta, void *Y, plan::DType dt) {
  const cudaDataType_t type = cublasType(dt);
  const bool f64 = dt == plan::F64;
  const float af = float(alpha), bf = float(beta);
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  return cublasStatus(cublasGemmEx(cublas_, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   int(N), int(M), int(K), f64 ? static_cast<const void *>(&alpha) : &af, B, type,
                                   int(transB ? K : N), A, type, int(transA ? M : K),
                                   f64 ? static_cast<const void *>(&beta) : &bf, Y, type, int(N), compute,
                                   CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

Expected<RunFn> CudaBackend::buildGemm(const Kernel &k, const std::vector<const Tensor *> &in, const Tensor *y) {
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
  cuda::Broadcast bc;
  if (C) {
    auto b = makeBroadcast(shapeOf(*C), shapeOf(*C), ys);
    if (!b)
      return b.status();
    bc = *b;
    if (bc.rank == 0 && shapeOf(*C) != ys)
      return Status::error("gemm: C does not broadcast to Y");
  }
  return RunFn([this, g, A, B, C, y, M, N, K, bc]() -> Status {
    double beta = 0;
    if (C && g.beta != 0) {
      CASTOR_RETURN_IF_ERROR(
          cudaStatus(cuda::broadcastScaled(ref(C), ref(y), bc, countOf(*y), g.beta, stream_), "gemm C"));
      beta = 1;
    }
    return gemmCall(g.transA, g.transB, M, N, K, g.alpha, ptr(A), ptr(B), beta, ptr(y), y->dtype());
  });
}

Expected<RunFn> CudaBackend::buildMatmul(const std::vector<const Tensor *> &in, const Tensor *y) {
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
  return RunFn([this, A, B, y, M, N, K, ia, ib, elem]() -> Status {
    for (size_t t = 0; t < ia.size(); ++t)
      CASTOR_RETURN_IF_ERROR(gemmCall(false, false, M, N, K, 1.0, ptr(A) + uint64_t(ia[t] * M * K) * elem,
                                      ptr(B) + uint64_t(ib[t] * K * N) * elem, 0.0,
                                      ptr(y) + uint64_t(t * M * N) * elem, y->dtype()));
    return Status::ok();
  });
}

// --- Everything else --------------------------------------------------------------------------

cuda::PoolGeometry poolGeometry(const plan::Pool2dParams &p, const Shape &xs, const Shape &ys) {
  const auto &a = p.shape;
  cuda::PoolGeometry g{};
  g.NC = xs[0] * xs[1], g.H = xs[2], g.W = xs[3], g.P = ys[2], g.Q = ys[3];
  g.kh = a.kernel[0], g.kw = a.kernel[1], g.sh = a.strides[0], g.sw = a.strides[1];
  g.padTop = a.pads[0], g.padLeft = a.pads[1], g.padBottom = a.pads[2], g.padRight = a.pads[3];
  g.dh = a.dilations[0], g.dw = a.dilations[1];
  g.includePad = p.countIncludePad;
  return g;
}

cuda::LossReduction lossReduction(shape::Reduction r) {
  return r == shape::Reduction::Mean ? cuda::LossReduction::Mean
         : r == shape::Reduction::Sum ? cuda::LossReduction::Sum
                                      : cuda::LossReduction::None;
}

Expected<RunFn> CudaBackend::build(const Kernel &k, const std::vector<const Tensor *> &in,
                                   const std::vector<const Tensor *> &out) {
  const std::string &op = k.op();
  const cudaStream_t s = stream_;
  constexpr double inf = std::numeric_limits<double>::infinity();
  auto need = [&](size_t nin, size_t nout) -> Status {
    if (in.size() < nin || out.size() < nout)
      return Status::error(op + " needs at least " + std::to_string(nin) + " inputs and " + std::to_string(nout) +
                           " outputs");
    return Status::ok();
  };

  if (op == "conv2d") {
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    return buildConv(k, ConvPass::Forward, in[0], in[1], out[0], in.size() > 2 ? in[2] : nullptr);
  }
  if (op == "conv2d_backward_data") {
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    return buildConv(k, ConvPass::BackwardData, out[0], in[1], in[0], nullptr);
  }
  if (op == "conv2d_backward_filter") {
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    return buildConv(k, ConvPass::BackwardFilter, in[0], out[0], in[1], nullptr);
  }
  if (op == "conv2d_backward_bias") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Shape ds = shapeOf(*in[0]);
    const int64_t N = ds[0], K = ds[1], inner = span(ds, 2, ds.size());
    cuda::Reduction r;
    r.keptRank = 1, r.kept[0] = K, r.keptStride[0] = inner;
    r.redRank = 2, r.red[0] = N, r.redStride[0] = K * inner, r.red[1] = inner, r.redStride[1] = 1;
    r.outCount = K, r.redCount = N * inner;
    const Tensor *dy = in[0], *db = out[0];
    return launch([=]() { return cuda::reduceSum(ref(dy), ref(db), r, 1.0, s); });
  }
  if (op == "reduce_sum_to") {
    auto p = plan::parseReduceSumTo(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Shape xs = shapeOf(*in[0]), ys = shapeOf(*out[0]);
    if (xs.size() > size_t(cuda::kMaxRank) || ys.size() > xs.size())
      return Status::error("reduce_sum_to: unsupported ranks");
    cuda::Reduction r;
    int64_t stride = 1;
    std::vector<std::pair<int64_t, int64_t>> kept, red; // (size, x stride), innermost first
    for (size_t i = 0; i < xs.size(); ++i) {
      const size_t d = xs.size() - 1 - i;
      const int64_t yd = i < ys.size() ? ys[ys.size() - 1 - i] : 1;
      if (yd == xs[d])
        kept.push_back({xs[d], stride});
      else
        red.push_back({xs[d], stride});
      stride *= xs[d];
    }
    std::reverse(kept.begin(), kept.end());
    std::reverse(red.begin(), red.end());
    r.keptRank = int(kept.size()), r.redRank = int(red.size());
    for (size_t i = 0; i < kept.size(); ++i)
      r.kept[i] = kept[i].first, r.keptStride[i] = kept[i].second, r.outCount *= kept[i].first;
    for (size_t i = 0; i < red.size(); ++i)
      r.red[i] = red[i].first, r.redStride[i] = red[i].second, r.redCount *= red[i].first;
    const Tensor *x = in[0], *y = out[0];
    const double scale = p->scale;
    return launch([=]() { return cuda::reduceSum(ref(x), ref(y), r, scale, s); });
  }
  if (op == "gemm") {
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    return buildGemm(k, in, out[0]);
  }
  if (op == "matmul") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    return buildMatmul(in, out[0]);
  }
  if (op == "relu" || op == "sigmoid" || op == "clip") {
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    double lo = -inf, hi = inf;
    cuda::UnaryOp u = op == "relu" ? cuda::UnaryOp::Relu : op == "sigmoid" ? cuda::UnaryOp::Sigmoid : cuda::UnaryOp::Clip;
    if (op == "clip") {
      auto p = plan::parseClip(k);
      if (!p)
        return p.status();
      lo = p->min ? *p->min : -inf, hi = p->max ? *p->max : inf;
    } else {
      CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    }
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() { return cuda::unary(u, ref(x), ref(y), countOf(*y), lo, hi, s); });
  }
  if (op == "relu_backward" || op == "sigmoid_backward" || op == "clip_backward") {
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    double lo = -inf, hi = inf;
    cuda::BackwardOp b = op == "relu_backward"      ? cuda::BackwardOp::Relu
                         : op == "sigmoid_backward" ? cuda::BackwardOp::Sigmoid
                                                    : cuda::BackwardOp::Clip;
    if (op == "clip_backward") {
      auto p = plan::parseClip(k);
      if (!p)
        return p.status();
      lo = p->min ? *p->min : -inf, hi = p->max ? *p->max : inf;
    } else {
      CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    }
    const Tensor *dy = in[0], *sv = in[1], *dx = out[0];
    return launch([=]() { return cuda::backward(b, ref(dy), ref(sv), ref(dx), countOf(*dx), lo, hi, s); });
  }
  if (op == "add" || op == "mul") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    auto bc = makeBroadcast(shapeOf(*in[0]), shapeOf(*in[1]), shapeOf(*out[0]));
    if (!bc)
      return bc.status();
    const cuda::Broadcast b = *bc;
    const cuda::BinaryOp bo = op == "add" ? cuda::BinaryOp::Add : cuda::BinaryOp::Mul;
    const Tensor *x = in[0], *y = in[1], *z = out[0];
    return launch([=]() { return cuda::binary(bo, ref(x), ref(y), ref(z), b, countOf(*z), s); });
  }
  if (op == "identity" || op == "cast" || op == "reshape" || op == "flatten") {
    if (op == "flatten") {
      auto axis = plan::parseAxis(k, 1);
      if (!axis)
        return axis.status();
    } else {
      CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    }
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    return copyOrConvert(in[0], out[0]);
  }
  if (op == "fill") {
    auto p = plan::parseFill(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(0, 1));
    const Tensor *y = out[0];
    const double v = p->value;
    return launch([=]() { return cuda::fill(ref(y), countOf(*y), v, s); });
  }
  if (op == "dropout" || op == "dropout_backward") {
    auto p = plan::parseDropout(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *x = in[0], *y = out[0], *it = in.size() > 1 ? in[1] : nullptr;
    const plan::DropoutParams d = *p;
    return launch([=]() {
      return cuda::dropout(ref(x), ref(y), countOf(*y), it ? ints(it) : nullptr, d.ratio, d.seed, d.salt, s);
    });
  }
  if (op == "batch_norm_training") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(3, 3));
    const Shape xs = shapeOf(*in[0]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in, o = out;
    const double eps = p->epsilon, momentum = p->momentum;
    const bool update = out.size() == 5 && in.size() == 5;
    return RunFn([=]() -> Status {
      cuda::Ref rm, rv;
      if (update) {
        // The statistics are updated in place in the outputs (copies first when the ids differ).
        for (int j : {3, 4})
          if (i[size_t(j)]->offset() != o[size_t(j)]->offset())
            CASTOR_CUDA(cudaMemcpyAsync(ptr(o[size_t(j)]), ptr(i[size_t(j)]), i[size_t(j)]->bytes(),
                                        cudaMemcpyDeviceToDevice, s));
        rm = ref(o[3]), rv = ref(o[4]);
        rm.dt = o[3]->dtype(), rv.dt = o[4]->dtype();
      }
      return cudaStatus(cuda::batchNormTraining(ref(i[0]), ref(i[1]), ref(i[2]), ref(o[0]), ref(o[1]), ref(o[2]), rm,
                                                rv, N, C, inner, eps, momentum, s),
                        "batch_norm_training");
    });
  }
  if (op == "batch_norm_inference") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(5, 1));
    const Shape xs = shapeOf(*in[0]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in;
    const Tensor *y = out[0];
    const double eps = p->epsilon;
    return launch([=]() {
      return cuda::batchNormInference(ref(i[0]), ref(i[1]), ref(i[2]), ref(i[3]), ref(i[4]), ref(y), N, C, inner, eps,
                                      s);
    });
  }
  if (op == "batch_norm_training_backward") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(5, 3));
    const Shape xs = shapeOf(*in[1]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in, o = out;
    return launch([=]() {
      return cuda::batchNormBackward(ref(i[0]), ref(i[1]), ref(i[2]), ref(i[3]), ref(i[4]), ref(o[0]), ref(o[1]),
                                     ref(o[2]), N, C, inner, s);
    });
  }
  if (op == "batch_norm_running_update") {
    auto p = plan::parseBatchNormRunningUpdate(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(4, 2));
    const auto i = in;
    const plan::BatchNormRunningUpdateParams a = *p;
    return launch([=]() {
      return cuda::batchNormRunningUpdate(ref(i[0]), ref(i[1]), ref(i[2]), ref(i[3]), countOf(*i[0]), a.momentum,
                                          a.epsilon, a.count, s);
    });
  }
  if (op == "max_pool2d" || op == "avg_pool2d") {
    auto p = plan::parsePool2d(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const cuda::PoolGeometry g = poolGeometry(*p, shapeOf(*in[0]), shapeOf(*out[0]));
    const bool isMax = op == "max_pool2d";
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() { return cuda::pool2d(isMax, ref(x), ref(y), g, s); });
  }
  if (op == "max_pool2d_backward" || op == "avg_pool2d_backward") {
    auto p = plan::parsePool2d(k);
    if (!p)
      return p.status();
    const bool isMax = op == "max_pool2d_backward";
    CASTOR_RETURN_IF_ERROR(need(isMax ? 2 : 1, 1));
    const cuda::PoolGeometry g = poolGeometry(*p, shapeOf(*out[0]), shapeOf(*in[0]));
    const Tensor *dy = in[0], *x = isMax ? in[1] : nullptr, *dx = out[0];
    return launch([=]() { return cuda::pool2dBackward(isMax, ref(dy), x ? ref(x) : cuda::Ref{}, ref(dx), g, s); });
  }
  if (op == "global_avg_pool" || op == "global_avg_pool_backward") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const bool fwd = op == "global_avg_pool";
    const Shape xs = shapeOf(fwd ? *in[0] : *out[0]);
    const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() {
      return fwd ? cuda::globalAvgPool(ref(x), ref(y), NC, inner, s)
                 : cuda::globalAvgPoolBackward(ref(x), ref(y), NC, inner, s);
    });
  }
  if (op == "softmax" || op == "softmax_backward") {
    auto axis = plan::parseAxis(k, -1);
    if (!axis)
      return axis.status();
    const bool fwd = op == "softmax";
    CASTOR_RETURN_IF_ERROR(need(fwd ? 1 : 2, 1));
    const Shape xs = shapeOf(*out[0]);
    auto ax = shape::normalizeAxis(*axis, int64_t(xs.size()));
    if (!ax)
      return Status::error("axis out of range");
    const int64_t outer = span(xs, 0, size_t(*ax)), n = xs[size_t(*ax)], inner = span(xs, size_t(*ax) + 1, xs.size());
    const auto i = in;
    const Tensor *y = out[0];
    return launch([=]() {
      return fwd ? cuda::softmax(ref(i[0]), ref(y), outer, n, inner, s)
                 : cuda::softmaxBackward(ref(i[0]), ref(i[1]), ref(y), outer, n, inner, s);
    });
  }
  if (op == "softmax_cross_entropy") {
    auto p = plan::parseSoftmaxCrossEntropy(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    const Tensor *x = in[0], *labels = in[1], *loss = out[0], *probs = out.size() > 1 ? out[1] : nullptr;
    const int64_t N = x->shape(0), C = x->shape(1);
    const double eps = p->labelSmoothing;
    const cuda::LossReduction red = lossReduction(p->reduction);
    return launch([=]() {
      return cuda::softmaxCrossEntropy(ref(x), ints(labels), ref(loss), probs ? ref(probs) : cuda::Ref{}, N, C, eps,
                                       red, s);
    });
  }
  if (op == "softmax_cross_entropy_backward") {
    auto p = plan::parseSoftmaxCrossEntropy(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(3, 1));
    const Tensor *dl = in[0], *x = in[1], *labels = in[2], *dx = out[0];
    const int64_t N = x->shape(0), C = x->shape(1);
    const double eps = p->labelSmoothing;
    const cuda::LossReduction red = lossReduction(p->reduction);
    return launch(
        [=]() { return cuda::softmaxCrossEntropyBackward(ref(dl), ref(x), ints(labels), ref(dx), N, C, eps, red, s); });
  }
  if (op == "count_correct") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    const Tensor *x = in[0], *labels = in[1], *y = out[0];
    const int64_t N = x->shape(0), C = x->shape(1);
    return launch([=]() { return cuda::countCorrect(ref(x), ints(labels), ints(y), N, C, s); });
  }
  if (op == "concat" || op == "split") {
    auto axis = plan::parseAxis(k, 0);
    if (!axis)
      return axis.status();
    const bool isConcat = op == "concat";
    const Tensor *whole = isConcat ? out.at(0) : in.at(0);
    const std::vector<const Tensor *> parts = isConcat ? in : out;
    const Shape ws = shapeOf(*whole);
    auto ax = shape::normalizeAxis(*axis, int64_t(ws.size()));
    if (!ax)
      return Status::error("axis out of range");
    for (const Tensor *t : parts)
      if (t->dtype() != whole->dtype())
        return Status::error(op + " operands must share one dtype");
    const int64_t outer = span(ws, 0, size_t(*ax));
    const uint64_t innerBytes = uint64_t(span(ws, size_t(*ax) + 1, ws.size())) * plan::dtypeSize(whole->dtype());
    const uint64_t rowBytes = uint64_t(ws[size_t(*ax)]) * innerBytes;
    return RunFn([=]() -> Status {
      uint64_t at = 0;
      for (const Tensor *t : parts) {
        const uint64_t chunk = uint64_t(t->shape(int(*ax))) * innerBytes;
        if (chunk > 0 && outer > 0) {
          if (isConcat)
            CASTOR_CUDA(cudaMemcpy2DAsync(ptr(whole) + at, rowBytes, ptr(t), chunk, chunk, size_t(outer),
                                          cudaMemcpyDeviceToDevice, s));
          else
            CASTOR_CUDA(cudaMemcpy2DAsync(ptr(t), chunk, ptr(whole) + at, rowBytes, chunk, size_t(outer),
                                          cudaMemcpyDeviceToDevice, s));
        }
        at += chunk;
      }
      return Status::ok();
    });
  }
  if (op == "sgd_update") {
    auto p = plan::parseSgd(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(4, 2));
    const bool hasFlag = in.size() == 6 || (in.size() == 5 && in[4]->dtype() != plan::I64);
    const Tensor *step = in.size() >= 5 && in[4]->dtype() == plan::I64 ? in[4] : nullptr;
    if (p->momentum != 0 && !step)
      return Status::error("sgd with momentum needs the step counter as its 5th input");
    const Tensor *found = hasFlag ? in.back() : nullptr;
    const auto i = in;
    const plan::SgdParams a = *p;
    return launch([=]() {
      return cuda::sgdUpdate(ref(i[0]), ref(i[1]), ref(i[2]), ref(i[3]), step ? ints(step) : nullptr,
                             found ? ref(found) : cuda::Ref{}, countOf(*i[0]), a.momentum, a.nesterov, a.weightDecay,
                             a.dampening, s);
    });
  }
  if (op == "adamw_update") {
    auto p = plan::parseAdamW(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(6, 3));
    const Tensor *found = in.size() == 7 ? in[6] : nullptr;
    const auto i = in;
    const plan::AdamWParams a = *p;
    return launch([=]() {
      return cuda::adamwUpdate(ref(i[0]), ref(i[1]), ref(i[2]), ref(i[3]), ref(i[4]), ints(i[5]),
                               found ? ref(found) : cuda::Ref{}, countOf(*i[0]), a.beta1, a.beta2, a.eps,
                               a.weightDecay, s);
    });
  }
  if (op == "increment") {
    auto p = plan::parseIncrement(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *x = in[0], *y = out[0], *flag = in.size() > 1 ? in[1] : nullptr;
    const bool whenSet = p->whenSet;
    return launch([=]() { return cuda::increment(ints(x), ints(y), flag ? ref(flag) : cuda::Ref{}, whenSet, s); });
  }
  if (op == "lr_schedule") {
    auto p = plan::parseLrSchedule(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    cuda::LrSchedule l;
    using Kind = plan::LrScheduleParams::Kind;
    l.kind = p->kind == Kind::Constant ? 0 : p->kind == Kind::Step ? 1 : 2;
    l.baseLr = p->baseLr, l.gamma = p->gamma, l.minLr = p->minLr;
    l.warmupSteps = p->warmupSteps, l.stepSize = p->stepSize, l.totalSteps = p->totalSteps;
    const Tensor *it = in[0], *lr = out[0];
    return launch([=]() { return cuda::lrSchedule(ints(it), ref(lr), l, s); });
  }
  if (op == "unscale_gradients") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    if (in.size() < 2 || out.size() != in.size())
      return Status::error("unscale_gradients takes n gradients and the scale, and produces n gradients and found_inf");
    const std::vector<const Tensor *> grads(in.begin(), in.end() - 1);
    const Tensor *scale = in.back(), *found = out.back();
    return RunFn([=]() -> Status {
      CASTOR_CUDA(cuda::clearFlag(ref(found), s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(cuda::unscale(ref(g), countOf(*g), ref(scale), ref(found), s));
      return Status::ok();
    });
  }
  if (op == "clip_grad_norm") {
    auto p = plan::parseClipGradNorm(k);
    if (!p)
      return p.status();
    if (in.empty() || out.size() != in.size() + 1)
      return Status::error("clip_grad_norm takes n gradients and produces n gradients and total_norm");
    const std::vector<const Tensor *> grads = in;
    const Tensor *total = out.back();
    const double maxNorm = p->maxNorm;
    return RunFn([=]() -> Status {
      CASTOR_CUDA(cuda::clipZero(scratch_, s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(cuda::clipAccumulate(ref(g), countOf(*g), scratch_, s));
      CASTOR_CUDA(cuda::clipFinish(scratch_, ref(total), maxNorm, s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(cuda::clipApply(ref(g), countOf(*g), scratch_, s));
      return Status::ok();
    });
  }
  if (op == "update_loss_scale") {
    auto p = plan::parseUpdateLossScale(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(3, 2));
    const Tensor *scale = in[0], *tracker = in[1], *found = in[2];
    const plan::UpdateLossScaleParams a = *p;
    return launch([=]() {
      return cuda::updateLossScale(ref(scale), ints(tracker), ref(found), a.growth, a.backoff, a.interval, s);
    });
  }
  if (op == "gradient_stats") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *g = in[0], *y = out[0];
    return launch([=]() { return cuda::gradientStats(ref(g), countOf(*g), ref(y), scratch_, s); });
  }
  return Status::error("the cuda backend has no kernel '" + op + "'");
}

} // namespace

std::unique_ptr<Backend> createCudaBackend(const BackendOptions &options) {
  return std::make_unique<CudaBackend>(options);
}

} // namespace castor
