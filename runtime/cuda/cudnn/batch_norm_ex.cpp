// Batch normalization through cuDNN's batch-norm Ex API (cudnnBatchNormalizationForwardTrainingEx,
// cudnnBatchNormalizationBackwardEx, cudnnBatchNormalizationForwardInference): the tuner
// candidate "ex" of every batch-norm layer and the only cuDNN path for f64 and for training
// kernels that update running statistics themselves. The saved mean and inverse standard
// deviation are the plan's outputs; cuDNN's inverse variance is 1/sqrt(biased variance + eps),
// the plan's definition.
//
// The Ex entry points are deprecated in cuDNN 9 in favour of the graph API
// (cudnn/batch_norm_graph.cpp) but remained its fastest batch norm for NHWC half data (persistent
// kernels); the tuner weighs the two per layer. See docs/performance.md.
#include "cuda/cudnn/batch_norm.h"

#include <memory>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace castor::cuda::bn {
namespace {

using plan::Tensor;


// Persistent kernels for NHWC half-precision data, as PyTorch picks for channels-last AMP
// training; plain spatial kernels for fp32 data (the persistent ones gave wrong scale gradients
// for channels-last fp32 data in the CPU/CUDA agreement test) and for inference. Both modes are
// deterministic (the persistent one reduces with scaled integer atomics, in any order the same),
// so BackendOptions::deterministic changes nothing here.
cudnnBatchNormMode_t modeOf(const Problem &p) {
  const bool half = p.dtype == plan::F16 || p.dtype == plan::BF16;
  return p.pass != Pass::Inference && p.nhwc && half ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
}

Expected<std::shared_ptr<ExDescriptors>> describe(const Problem &p) {
  auto d = std::make_shared<ExDescriptors>();
  for (int64_t v : p.dims)
    if (v > INT32_MAX)
      return Status::error("batch norm dimension beyond 2^31");
  const Shape &s = p.dims;
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->x));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d->x, p.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnnType(p.dtype),
                                          int(s[0]), int(s[1]), int(s[2]), int(s[3])));
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d->params));
  CASTOR_CUDNN(cudnnDeriveBNTensorDescriptor(d->params, d->x, modeOf(p)));
  return d;
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

// The reserve space the training forward fills and the backward reads, kept for the plan's
// lifetime and found by both through the saved mean (training output 1, backward input 3).
struct ReserveSpace {
  void *ptr = nullptr;
  size_t bytes = 0;
};
Expected<ReserveSpace> reserveSpace(DeviceContext &ctx, const Problem &p) {
  auto bytes = exReserveBytes(ctx, p);
  if (!bytes)
    return bytes.status();
  if (*bytes == 0)
    return ReserveSpace{};
  const Tensor *mean = p.pass == Pass::Training ? p.out[1] : p.in[3];
  auto ptr = ctx.persistentBuffer(mean->id(), *bytes);
  if (!ptr)
    return ptr.status();
  return ReserveSpace{*ptr, *bytes};
}

Expected<tuning::Executable> training(DeviceContext &ctx, const Problem &p) {
  const cudnnBatchNormMode_t mode = modeOf(p);
  auto d = describe(p);
  if (!d)
    return d.status();
  size_t workspace = 0;
  CASTOR_CUDNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
      ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, (*d)->x, nullptr, (*d)->x, (*d)->params, nullptr, &workspace));
  auto space = reserveSpace(ctx, p);
  if (!space)
    return space.status();
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const TensorList &in = p.in, &out = p.out;
  const Tensor *x = in[0], *y = out[0], *scale = in[1], *bias = in[2], *mean = out[1], *invStd = out[2];
  const Tensor *runIn[2] = {p.runningUpdate ? in[3] : nullptr, p.runningUpdate ? in[4] : nullptr};
  const Tensor *runOut[2] = {p.runningUpdate ? out[3] : nullptr, p.runningUpdate ? out[4] : nullptr};
  const double eps = p.epsilon, momentum = p.momentum;
  const plan::DType dt = p.dtype;
  void *reservePtr = space->ptr;
  const size_t reserveBytes = space->bytes;
  tuning::Executable e;
  e.workspaceBytes = workspace;
  e.run = [=](void *ws) -> Status {
    for (int j = 0; j < 2; ++j) // running statistics are updated in place in the outputs
      if (runIn[j])
        CASTOR_RETURN_IF_ERROR(c->copyUnlessSame(runIn[j], runOut[j]));
    return cudnnStatus(cudnnBatchNormalizationForwardTrainingEx(
                           c->cudnn, mode, CUDNN_BATCHNORM_OPS_BN, one(dt), zero(dt), desc->x, c->ptr(x), nullptr,
                           nullptr, desc->x, c->ptr(y), desc->params, c->ptr(scale), c->ptr(bias), momentum,
                           runOut[0] ? c->ptr(runOut[0]) : nullptr, runOut[1] ? c->ptr(runOut[1]) : nullptr, eps,
                           c->ptr(mean), c->ptr(invStd), nullptr, ws, workspace, reservePtr, reserveBytes),
                       "cudnnBatchNormalizationForwardTrainingEx");
  };
  return e;
}

Expected<tuning::Executable> backward(DeviceContext &ctx, const Problem &p) {
  const cudnnBatchNormMode_t mode = modeOf(p);
  auto d = describe(p);
  if (!d)
    return d.status();
  size_t workspace = 0;
  CASTOR_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(ctx.cudnn, mode, CUDNN_BATCHNORM_OPS_BN, (*d)->x,
                                                                 nullptr, (*d)->x, nullptr, (*d)->x, (*d)->params,
                                                                 nullptr, &workspace));
  auto space = reserveSpace(ctx, p);
  if (!space)
    return space.status();
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const Tensor *dy = p.in[0], *x = p.in[1], *scale = p.in[2], *mean = p.in[3], *invStd = p.in[4];
  const Tensor *dx = p.out[0], *dscale = p.out[1], *dbias = p.out[2];
  const double eps = p.epsilon;
  const plan::DType dt = p.dtype;
  void *reservePtr = space->ptr;
  const size_t reserveBytes = space->bytes;
  tuning::Executable e;
  e.workspaceBytes = workspace;
  e.run = [=](void *ws) -> Status {
    return cudnnStatus(cudnnBatchNormalizationBackwardEx(
                           c->cudnn, mode, CUDNN_BATCHNORM_OPS_BN, one(dt), zero(dt), one(dt), zero(dt), desc->x,
                           c->ptr(x), nullptr, nullptr, desc->x, c->ptr(dy), nullptr, nullptr, desc->x, c->ptr(dx),
                           desc->params, c->ptr(scale), nullptr, c->ptr(dscale), c->ptr(dbias), eps, c->ptr(mean),
                           c->ptr(invStd), nullptr, ws, workspace, reservePtr, reserveBytes),
                       "cudnnBatchNormalizationBackwardEx");
  };
  return e;
}

Expected<tuning::Executable> inference(DeviceContext &ctx, const Problem &p) {
  auto d = describe(p);
  if (!d)
    return d.status();
  DeviceContext *c = &ctx;
  const auto desc = *d;
  const double eps = p.epsilon;
  const plan::DType dt = p.dtype;
  const TensorList i = p.in;
  const Tensor *x = p.in[0], *y = p.out[0];
  tuning::Executable e;
  e.run = [=](void *) -> Status {
    return cudnnStatus(cudnnBatchNormalizationForwardInference(c->cudnn, CUDNN_BATCHNORM_SPATIAL, one(dt), zero(dt),
                                                               desc->x, c->ptr(x), desc->x, c->ptr(y), desc->params,
                                                               c->ptr(i[1]), c->ptr(i[2]), c->ptr(i[3]),
                                                               c->ptr(i[4]), eps),
                       "cudnnBatchNormalizationForwardInference");
  };
  return e;
}

} // namespace

ExDescriptors::~ExDescriptors() {
  if (x)
    cudnnDestroyTensorDescriptor(x);
  if (params)
    cudnnDestroyTensorDescriptor(params);
  if (activation)
    cudnnDestroyActivationDescriptor(activation);
}

Expected<size_t> exReserveBytes(DeviceContext &ctx, const Problem &p) {
  if (p.pass == Pass::Inference)
    return size_t(0);
  auto d = describe(p);
  if (!d)
    return d.status();
  size_t reserve = 0;
  CASTOR_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ctx.cudnn, modeOf(p), CUDNN_BATCHNORM_OPS_BN,
                                                                    nullptr, (*d)->x, &reserve));
  return reserve;
}

Expected<tuning::Executable> buildEx(DeviceContext &ctx, const Problem &p) {
  switch (p.pass) {
  case Pass::Training:
    return training(ctx, p);
  case Pass::Backward:
    return backward(ctx, p);
  case Pass::Inference:
    return inference(ctx, p);
  }
  return Status::error("unknown batch norm pass");
}

} // namespace castor::cuda::bn
