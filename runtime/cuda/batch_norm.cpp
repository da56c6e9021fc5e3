// Batch normalization (training forward, backward, inference) through cuDNN's batch-norm API:
// x and y in fp16, bf16 or fp32 (NHWC or NCHW), scale, bias and statistics in fp32 — the same
// kernels PyTorch AMP runs. The saved mean and inverse standard deviation are the plan's
// outputs; cuDNN's inverse variance is 1/sqrt(biased variance + eps), the plan's definition.
// Kernels outside that (fp64 statistics with low-precision data, ranks above 4) run the own
// kernels of kernels.cu.
//
// The Ex entry points are deprecated in cuDNN 9 in favour of the graph API but remain its
// fastest batch norm for NHWC half data (persistent kernels); see docs/performance.md.
#include "cuda/device_context.h"

#include "plan/op_attrs.h"

#include <memory>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace castor::cuda {
namespace {

using plan::Kernel;
using plan::Tensor;

struct BnDescriptors {
  cudnnTensorDescriptor_t x = nullptr, params = nullptr;
  ~BnDescriptors() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (params)
      cudnnDestroyTensorDescriptor(params);
  }
};

bool lowOrSingle(plan::DType t) { return t == plan::F16 || t == plan::BF16 || t == plan::F32; }

// Whether cuDNN runs this batch norm: data x (and y, dy, dx of the same dtype) in f16/bf16/f32
// with f32 per-channel tensors, or everything f64; rank 2 to 4.
bool cudnnRuns(const Tensor *x, const TensorList &perChannel) {
  const plan::DType want = x->dtype() == plan::F64 ? plan::F64 : plan::F32;
  if (!(lowOrSingle(x->dtype()) || x->dtype() == plan::F64) || x->shape_size() < 2 || x->shape_size() > 4)
    return false;
  for (const Tensor *t : perChannel)
    if (t->dtype() != want)
      return false;
  return true;
}

Expected<std::shared_ptr<BnDescriptors>> describe(DeviceContext &ctx, const Tensor *x, cudnnBatchNormMode_t mode) {
  auto d = std::make_shared<BnDescriptors>();
  Shape s = shapeOf(*x);
  while (s.size() < 4)
    s.push_back(1); // [N,C] and [N,C,L] as [N,C,1,1] and [N,C,L,1]
  for (int64_t v : s)
    if (v > INT32_MAX)
      return Status::error("batch norm dimension beyond 2^31");
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->x));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->x, ctx.channelsLast(x) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                          cudnnType(x->dtype()), int(s[0]), int(s[1]), int(s[2]), int(s[3])));
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->params));
  CASTOR_CUDNN(cudnnDeriveBNTensorDescriptor(d->params, d->x, mode));
  return d;
}

// Persistent kernels for NHWC half-precision data, as PyTorch picks for channels-last AMP
// training; plain spatial kernels for fp32 data (the persistent ones gave wrong scale gradients
// for channels-last fp32 data in the CPU/CUDA agreement test).
cudnnBatchNormMode_t trainingMode(const DeviceContext &ctx, const Tensor *x) {
  const bool half = x->dtype() == plan::F16 || x->dtype() == plan::BF16;
  return ctx.channelsLast(x) && half ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
}

const void *one(plan::DType t) {
  static const float f = 1.0f;
  static const double d = 1.0;
  return t == plan::F64 ? static_cast<const void *>(&d) : &f;
}
const void *zero(plan::DType t) {
  static const float f = 0.0f;
  static const double d = 0.0;
  return t == plan::F64 ? static_cast<const void *>(&d) : &f;
}

// x, scale, bias [, running mean, running var] -> y, mean, inv std [, running mean, running var]
Expected<RunFn> buildTraining(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  if (in.size() < 3 || out.size() < 3)
    return Status::error("batch_norm_training needs x, scale, bias and produces y, mean, inv_std");
  const bool update = out.size() == 5 && in.size() == 5;
  TensorList perChannel = {in[1], in[2], out[1], out[2]};
  if (update)
    perChannel.insert(perChannel.end(), {out[3], out[4]});
  if (!cudnnRuns(in[0], perChannel) || out[0]->dtype() != in[0]->dtype())
    return Status::error("unsupported dtypes"); // caller falls back to the own kernels
  const cudnnBatchNormMode_t mode = trainingMode(ctx, in[0]);
  auto d = describe(ctx, in[0], mode);
  if (!d)
    return d.status();
  size_t workspace = 0, reserve = 0;
  CASTOR_CUDNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
      ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, (*d)->x, nullptr, (*d)->x, (*d)->params, nullptr, &workspace));
  CASTOR_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN,
                                                                    nullptr, (*d)->x, &reserve));
  ctx.requestWorkspace(workspace);
  void *reserveSpace = nullptr;
  if (reserve > 0) {
    auto r = ctx.persistentBuffer(out[1]->id(), reserve); // the backward finds it by the saved mean
    if (!r)
      return r.status();
    reserveSpace = *r;
  }
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const Tensor *x = in[0], *y = out[0], *scale = in[1], *bias = in[2], *mean = out[1], *invStd = out[2];
  const Tensor *runIn[2] = {update ? in[3] : nullptr, update ? in[4] : nullptr};
  const Tensor *runOut[2] = {update ? out[3] : nullptr, update ? out[4] : nullptr};
  const double eps = p->epsilon, momentum = p->momentum;
  const plan::DType dt = x->dtype();
  return RunFn([=]() -> Status {
    for (int j = 0; j < 2; ++j) // running statistics are updated in place in the outputs
      if (runIn[j])
        CASTOR_RETURN_IF_ERROR(c->copyUnlessSame(runIn[j], runOut[j]));
    return cudnnStatus(cudnnBatchNormalizationForwardTrainingEx(
                           c->cudnn, mode, CUDNN_BATCHNORM_OPS_BN, one(dt), zero(dt), desc->x, c->ptr(x), nullptr,
                           nullptr, desc->x, c->ptr(y), desc->params, c->ptr(scale), c->ptr(bias), momentum,
                           runOut[0] ? c->ptr(runOut[0]) : nullptr, runOut[1] ? c->ptr(runOut[1]) : nullptr, eps,
                           c->ptr(mean), c->ptr(invStd), nullptr, c->workspace, workspace, reserveSpace, reserve),
                       "cudnnBatchNormalizationForwardTrainingEx");
  });
}

// dy, x, scale, mean, inv std -> dx, dscale, dbias
Expected<RunFn> buildBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  if (in.size() < 5 || out.size() < 3)
    return Status::error("batch_norm_training_backward needs dy, x, scale, mean, inv_std and produces dx, dscale, "
                         "dbias");
  const Tensor *dy = in[0], *x = in[1], *scale = in[2], *mean = in[3], *invStd = in[4];
  const Tensor *dx = out[0], *dscale = out[1], *dbias = out[2];
  if (!cudnnRuns(x, {scale, mean, invStd, dscale, dbias}) || dy->dtype() != x->dtype() || dx->dtype() != x->dtype())
    return Status::error("unsupported dtypes");
  if (ctx.channelsLast(dy) != ctx.channelsLast(x) || ctx.channelsLast(dx) != ctx.channelsLast(x))
    return Status::error("batch norm operands in different layouts");
  const cudnnBatchNormMode_t mode = trainingMode(ctx, x);
  auto d = describe(ctx, x, mode);
  if (!d)
    return d.status();
  size_t workspace = 0, reserve = 0;
  CASTOR_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, (*d)->x,
                                                                 nullptr, (*d)->x, nullptr, (*d)->x, (*d)->params,
                                                                 nullptr, &workspace));
  CASTOR_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN,
                                                                    nullptr, (*d)->x, &reserve));
  ctx.requestWorkspace(workspace);
  void *reserveSpace = nullptr;
  if (reserve > 0) {
    auto r = ctx.persistentBuffer(mean->id(), reserve);
    if (!r)
      return r.status();
    reserveSpace = *r;
  }
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const double eps = p->epsilon;
  const plan::DType dt = x->dtype();
  return RunFn([=]() -> Status {
    return cudnnStatus(cudnnBatchNormalizationBackwardEx(
                           c->cudnn, mode, CUDNN_BATCHNORM_OPS_BN, one(dt), zero(dt), one(dt), zero(dt), desc->x,
                           c->ptr(x), nullptr, nullptr, desc->x, c->ptr(dy), nullptr, nullptr, desc->x, c->ptr(dx),
                           desc->params, c->ptr(scale), nullptr, c->ptr(dscale), c->ptr(dbias), eps, c->ptr(mean),
                           c->ptr(invStd), nullptr, c->workspace, workspace, reserveSpace, reserve),
                       "cudnnBatchNormalizationBackwardEx");
  });
}

// x, scale, bias, mean, var -> y
Expected<RunFn> buildInference(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  if (in.size() < 5 || out.empty())
    return Status::error("batch_norm_inference needs x, scale, bias, mean, var and produces y");
  const Tensor *x = in[0], *y = out[0];
  if (!cudnnRuns(x, {in[1], in[2], in[3], in[4]}) || y->dtype() != x->dtype())
    return Status::error("unsupported dtypes");
  auto d = describe(ctx, x, CUDNN_BATCHNORM_SPATIAL);
  if (!d)
    return d.status();
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const double eps = p->epsilon;
  const plan::DType dt = x->dtype();
  const TensorList i = in;
  return RunFn([=]() -> Status {
    return cudnnStatus(cudnnBatchNormalizationForwardInference(c->cudnn, CUDNN_BATCHNORM_SPATIAL, one(dt), zero(dt),
                                                               desc->x, c->ptr(x), desc->x, c->ptr(y), desc->params,
                                                               c->ptr(i[1]), c->ptr(i[2]), c->ptr(i[3]),
                                                               c->ptr(i[4]), eps),
                       "cudnnBatchNormalizationForwardInference");
  });
}

} // namespace

Expected<RunFn> buildBatchNorm(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  Expected<RunFn> fn = Status::error("no batch norm kernel '" + k.op() + "'");
  if (k.op() == "batch_norm_training")
    fn = buildTraining(ctx, k, in, out);
  else if (k.op() == "batch_norm_training_backward")
    fn = buildBackward(ctx, k, in, out);
  else if (k.op() == "batch_norm_inference")
    fn = buildInference(ctx, k, in, out);
  if (fn || fn.status().message() != "unsupported dtypes")
    return fn;
  // Dtype combinations cuDNN does not take: the own kernels, which read any float dtype.
  return buildOwnKernel(ctx, k, in, out);
}

} // namespace castor::cuda
