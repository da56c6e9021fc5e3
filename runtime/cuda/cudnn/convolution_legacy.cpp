// Convolutions through cuDNN's legacy convolution API: NCHW or NHWC descriptors following the
// tensors' layout, the algorithm picked by cuDNN's heuristic (cudnnGet*Algorithm_v7), FMA math
// (no TF32) for fp32; under ctx.deterministic only algorithms cuDNN reports CUDNN_DETERMINISTIC
// (not, e.g., the filter gradient's ALGO_0 and ALGO_3, which accumulate with atomics). The path
// for f64 and the fallback when the graph API finds no engine.
#include "cuda/cudnn/convolution_legacy.h"

#include <memory>

namespace castor::cuda::conv {

LegacyDescriptors::~LegacyDescriptors() {
  if (x)
    cudnnDestroyTensorDescriptor(x);
  if (y)
    cudnnDestroyTensorDescriptor(y);
  if (w)
    cudnnDestroyFilterDescriptor(w);
  if (conv)
    cudnnDestroyConvolutionDescriptor(conv);
}

cudnnMathType_t legacyMathType(plan::DType dtype) {
  // fp32: FMA kernels only (no TF32), so that fp32 agrees with the reference within 1e-4.
  return dtype == plan::F32 || dtype == plan::F64 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

Expected<std::shared_ptr<LegacyDescriptors>> legacyDescriptors(const Problem &p) {
  const Shape &xs = p.xs, &ws = p.ws, &ys = p.ys;
  if (p.xNhwc != p.wNhwc || p.xNhwc != p.yNhwc)
    return Status::error("convolution operands in different layouts");
  auto d = std::make_shared<LegacyDescriptors>();
  const plan::DType dt = p.dtype;
  const cudnnDataType_t type = cudnnType(dt);
  const cudnnDataType_t compute = dt == plan::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->x));
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->y));
  CASTOR_CUDNN(cudnnCreateFilterDescriptor(&d->w));
  CASTOR_CUDNN(cudnnCreateConvolutionDescriptor(&d->conv));
  // Channels-last storage is cuDNN's NHWC format (dims are still given as N, C, H, W).
  const cudnnTensorFormat_t format = p.xNhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->x, format, type, int(xs[0]), int(xs[1]), int(xs[2]), int(xs[3])));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->y, format, type, int(ys[0]), int(ys[1]), int(ys[2]), int(ys[3])));
  CASTOR_CUDNN(cudnnSetFilter4dDescriptor(d->w, type, format, int(ws[0]), int(ws[1]), int(ws[2]), int(ws[3])));
  CASTOR_CUDNN(cudnnSetConvolution2dDescriptor(d->conv, int(p.padH), int(p.padW), int(p.strideH), int(p.strideW),
                                               int(p.dilationH), int(p.dilationW), CUDNN_CROSS_CORRELATION,
                                               compute));
  CASTOR_CUDNN(cudnnSetConvolutionGroupCount(d->conv, int(p.groups)));
  CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, legacyMathType(dt)));
  int on = 0, oc = 0, oh = 0, ow = 0;
  CASTOR_CUDNN(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &on, &oc, &oh, &ow));
  if (on != ys[0] || oc != ys[1] || oh != ys[2] || ow != ys[3])
    return Status::error("cuDNN's output shape [" + std::to_string(on) + ", " + std::to_string(oc) + ", " +
                         std::to_string(oh) + ", " + std::to_string(ow) + "] differs from the plan's");
  return d;
}

Expected<RunFn> buildLegacy(DeviceContext &ctx, const Problem &p) {
  DeviceContext *c = &ctx;
  const plan::Tensor *x = p.x, *w = p.w, *y = p.y;
  auto descriptors = legacyDescriptors(p);
  if (!descriptors)
    return descriptors.status();
  std::shared_ptr<LegacyDescriptors> d = *descriptors;
  const plan::DType dt = p.dtype;
  const bool fp32 = dt == plan::F32 || dt == plan::F64;

  // The heuristic's first algorithm that runs within the workspace limit (and, for fp32, uses
  // FMA math; under ctx.deterministic, is deterministic).
  auto acceptable = [&](cudnnStatus_t status, size_t memory, cudnnMathType_t math, cudnnDeterminism_t determinism) {
    return status == CUDNN_STATUS_SUCCESS && memory <= ctx.workspaceLimit &&
           (!fp32 || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH) &&
           (!ctx.deterministic || determinism == CUDNN_DETERMINISTIC);
  };
  constexpr int kMaxAlgos = 16;
  int returned = 0;
  size_t wsBytes = 0;
  cudnnMathType_t math = fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  // The heuristic's first engine that fits the workspace (and, in fp32, uses no tensor-core
  // down-conversion), else `fallback` (deterministic, each of them).
  auto choose = [&](const auto *perf, auto fallback) {
    for (int i = 0; i < returned; ++i)
      if (acceptable(perf[i].status, perf[i].memory, perf[i].mathType, perf[i].determinism)) {
        math = fp32 ? CUDNN_FMA_MATH : perf[i].mathType;
        return perf[i].algo;
      }
    return fallback;
  };
  static const float onef = 1.0f, zerof = 0.0f;
  static const double oned = 1.0, zerod = 0.0;
  const void *one = dt == plan::F64 ? static_cast<const void *>(&oned) : static_cast<const void *>(&onef);
  const void *zero = dt == plan::F64 ? static_cast<const void *>(&zerod) : static_cast<const void *>(&zerof);
  RunFn run;
  if (p.pass == Pass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(
        cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn, d->x, d->w, d->conv, d->y, kMaxAlgos, &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn, d->x, d->w, d->conv, d->y, algo, &wsBytes));
    run = [c, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionForward(c->cudnn, one, d->x, c->ptr(x), d->w, c->ptr(w), d->conv, algo,
                                                 c->workspace, wsBytes, zero, d->y, c->ptr(y)),
                         "cudnnConvolutionForward");
    };
  } else if (p.pass == Pass::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn, d->w, d->y, d->conv, d->x, kMaxAlgos, &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(
        cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn, d->w, d->y, d->conv, d->x, algo, &wsBytes));
    // Here x is dx (written) and y is dy (read).
    run = [c, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionBackwardData(c->cudnn, one, d->w, c->ptr(w), d->y, c->ptr(y), d->conv, algo,
                                                      c->workspace, wsBytes, zero, d->x, c->ptr(x)),
                         "cudnnConvolutionBackwardData");
    };
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
    CASTOR_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn, d->x, d->y, d->conv, d->w, kMaxAlgos,
                                                               &returned, perf));
    auto algo = choose(perf, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    CASTOR_CUDNN(cudnnSetConvolutionMathType(d->conv, math));
    CASTOR_CUDNN(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn, d->x, d->y, d->conv, d->w, algo, &wsBytes));
    // Here w is dw (written).
    run = [c, d, algo, x, w, y, wsBytes, one, zero]() {
      return cudnnStatus(cudnnConvolutionBackwardFilter(c->cudnn, one, d->x, c->ptr(x), d->y, c->ptr(y), d->conv,
                                                        algo, c->workspace, wsBytes, zero, d->w, c->ptr(w)),
                         "cudnnConvolutionBackwardFilter");
    };
  }
  ctx.requestWorkspace(wsBytes);
  return run;
}

} // namespace castor::cuda::conv
