// The fused batch-norm-ReLU kernels (plan/ops.md, "Fused kernels"): batch_norm_relu_training
// (x, scale, bias [, z] -> y, mean, inv_std; y = relu(batch_norm(x) [+ z])) and its backward
// (dy, x, y, scale, bias, mean, inv_std -> dx, dscale, dbias [, dz]), each run one of two ways:
//
// - fused: cuDNN's batch-norm Ex API with the ReLU (CUDNN_BATCHNORM_OPS_BN_ACTIVATION, or
//   CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION with the residual z) in its persistent NHWC kernels:
//   one kernel forward and one backward where the group runs two or three, each a pass over
//   the data. The forward fills the reserve space cuDNN asks for (with the residual, about a
//   bit an element: the ReLU's mask) and the backward reads it: kept for the plan's lifetime
//   with ctx.persistentBuffer under the saved inverse std's id (cudnn/batch_norm_ex.cpp keeps
//   its own under the saved mean's: the composed way's batch norm). cuDNN runs these for NHWC
//   fp16 data with fp32 per-channel tensors and C a multiple of 4 only; a layer is checked
//   against those conditions, then against cuDNN's size queries, which refuse what it cannot run,
//   and against what the plan's workspace limit has left for its reserve space.
// - own: Castor's fused kernels (kernels/batch_norm_relu.cu) for channels-last f32/f16/bf16 data:
//   a per-channel reduction and one element-wise pass each way, ReLU, residual add and the
//   residual's gradient included; they take the layers cuDNN's fused kernel does not (bf16, C not
//   a multiple of 4). With a residual the forward records the ReLU's mask (a bit an element in
//   f16/bf16) for the backward, which reads it instead of y: kept beside the arena under the
//   saved inverse std (tag kTagBnReluMask) while the plan's workspace limit has room, else the
//   backward reads y.
// - conv-stats: where the convolution that produces x offers its output's per-channel sums from
//   its epilogue (DeviceContext::ConvStatsOffer, cudnn/convolution_stats.cpp), the own kernels'
//   forward from those sums (one element-wise pass instead of two) and their backward. The
//   pair is timed with the convolution in front of it (the plain one before the other ways), and
//   when this way wins the convolution runs with the statistics.
// - composed: the kernels of the group the op replaces, one after another: the batch norm
//   through buildBatchNorm (cudnn/batch_norm.cpp: cuDNN or the own kernels) into y, then the
//   own element-wise kernels (the residual added in place, the ReLU in place); backward, the
//   ReLU's gradient g into dz (or a scratch area) and the batch norm's backward of g. This is
//   the reference's definition, rounding for rounding.
//
// With clip_max (ReLU6's clip instead of the ReLU; no residual) cuDNN's fused kernel is refused:
// the own kernels clip and recompute the clip's mask (0 <= t <= clip_max) from x, the composed
// group runs the clip and, backward, batch_norm_apply's kernel into the scratch area, then
// clip_backward.
//
// The forward decides and records its way in ctx.layerChoices under the saved mean's id; the
// backward, built later in plan order, follows it (composed when none is recorded): the fused
// backward needs the reserve space of a fused forward, and a batch norm's Ex backward in the
// composed way needs that of an Ex forward of its own. Where cuDNN takes the layer, the tuner
// decides among the ways that take the layer: the forward and its backward (found in the plan)
// timed together, once per layer signature and GPU, the choice kept in the tuning cache.
//
// CASTOR_FUSED_BN=fused|own|conv-stats|composed forces that way where it runs (else the composed one), for
// A/B measurements; CASTOR_BN_API
// (cudnn/batch_norm.cpp) picks the API of the composed way's batch norm as it does for the
// unfused batch_norm_training.
#include "cuda/cudnn/batch_norm.h"
#include "cuda/cudnn/builders.h"
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/builders.h"
#include "cuda/kernels/elementwise.h"

#include "plan/op_attrs.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace castor::cuda {
namespace {

// ReLU6's clip(t, 0, max), as the clip op computes it.
elementwise::Clip clipTo(double max) {
  elementwise::Clip clip;
  clip.min = 0.0;
  clip.max = max;
  return clip;
}

using plan::Kernel;
using plan::OpId;
using plan::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

// The choices recorded in ctx.layerChoices; the fused ones name the cuDNN ops the forward ran,
// which its backward must run too (the reserve space is theirs).
constexpr const char *kFused = "fused";
constexpr const char *kFusedAdd = "fused+add";
constexpr const char *kComposed = "composed";
constexpr const char *kOwn = "own";
constexpr const char *kConvStats = bn::kConvStatsWay;

std::string labelOf(const Kernel &k) { return k.name().empty() ? k.op() : k.name(); }

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Once per process: why a layer runs composed (cuDNN refused it), with the first such layer.
std::atomic<bool> composedNoted{false};
void noteComposed(const Kernel &k, const std::string &why) {
  if (!composedNoted.exchange(true))
    std::fprintf(stderr,
                 "castor: %s (%s): cuDNN's fused batch-norm-ReLU does not take it (%s); such layers run Castor's own "
                 "fused kernels or the group's kernels, whichever the tuner finds faster\n",
                 k.op().c_str(), labelOf(k).c_str(), why.c_str());
}

// cuDNN's fused kernel for one layer: descriptors (x's serves y, z, dy, dx and dz: one shape,
// dtype and layout), ops and sizes.
struct FusedLayer {
  std::shared_ptr<bn::ExDescriptors> d;
  cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  size_t forwardWorkspace = 0, backwardWorkspace = 0, reserveBytes = 0;
};

// The fused kernel for data x with these per-channel tensors (with the residual when `add`), or
// why cuDNN does not run it.
Expected<FusedLayer> fusedLayer(DeviceContext &ctx, const Tensor *x, const TensorList &perChannel, bool add) {
  if (x->shape_size() != 4 || !ctx.channelsLast(x))
    return Status::error("data not stored NHWC");
  if (x->dtype() != plan::F16)
    return Status::error(std::string("data ") + plan::dtypeName(x->dtype()) + ", not f16");
  for (const Tensor *t : perChannel)
    if (t->dtype() != plan::F32)
      return Status::error("per-channel tensors not f32");
  const Shape s = shapeOf(*x);
  for (int64_t v : s)
    if (v > INT32_MAX)
      return Status::error("a dimension beyond 2^31");
  if (s[1] % 4 != 0)
    return Status::error("C = " + std::to_string(s[1]) + ", not a multiple of 4");
  FusedLayer f;
  f.d = std::make_shared<bn::ExDescriptors>();
  f.ops = add ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  bn::ExDescriptors &d = *f.d;
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d.x));
  CASTOR_CUDNN(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, int(s[0]), int(s[1]), int(s[2]),
                                          int(s[3])));
  CASTOR_CUDNN(cudnnCreateTensorDescriptor(&d.params));
  CASTOR_CUDNN(cudnnDeriveBNTensorDescriptor(d.params, d.x, kMode));
  // NaN propagates, as through the own ReLU.
  CASTOR_CUDNN(cudnnCreateActivationDescriptor(&d.activation));
  CASTOR_CUDNN(cudnnSetActivationDescriptor(d.activation, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  cudnnTensorDescriptor_t z = add ? d.x : nullptr;
  CASTOR_CUDNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(ctx.cudnn, kMode, f.ops, d.x, z, d.x, d.params,
                                                                        d.activation, &f.forwardWorkspace));
  CASTOR_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(ctx.cudnn, kMode, f.ops, d.x, d.x, d.x, z, d.x,
                                                                 d.params, d.activation, &f.backwardWorkspace));
  CASTOR_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ctx.cudnn, kMode, f.ops, d.activation, d.x,
                                                                    &f.reserveBytes));
  return f;
}

// The data's per-channel operands as the fused kernel checks them.
TensorList forwardPerChannel(const TensorList &in, const TensorList &out) { return {in[1], in[2], out[1], out[2]}; }
TensorList backwardPerChannel(const TensorList &in, const TensorList &out) {
  return {in[3], in[4], in[5], in[6], out[1], out[2]};
}

const float kOne = 1.0f, kZero = 0.0f; // alpha and beta of fp16 data

Expected<RunFn> fusedForward(DeviceContext &ctx, const plan::BatchNormParams &a, const TensorList &in,
                             const TensorList &out, const FusedLayer &f) {
  const Tensor *x = in[0], *scale = in[1], *bias = in[2], *z = in.size() == 4 ? in[3] : nullptr;
  const Tensor *y = out[0], *mean = out[1], *invStd = out[2];
  auto reserve = ctx.persistentBuffer(invStd->id(), f.reserveBytes);
  if (!reserve)
    return reserve.status();
  // Never a null workspace: cuDNN documents a null one of size 0 as the call of the plain batch
  // norm.
  ctx.requestWorkspace(std::max<size_t>(f.forwardWorkspace, 1));
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const auto d = f.d;
  const cudnnBatchNormOps_t ops = f.ops;
  const size_t workspaceBytes = f.forwardWorkspace, reserveBytes = f.reserveBytes;
  void *reservePtr = *reserve;
  const double eps = a.epsilon, momentum = a.momentum;
  return RunFn([=]() -> Status {
    return cudnnStatus(cudnnBatchNormalizationForwardTrainingEx(
                           c->cudnn, kMode, ops, &kOne, &kZero, d->x, c->ptr(x), z ? d->x : nullptr,
                           z ? c->ptr(z) : nullptr, d->x, c->ptr(y), d->params, c->ptr(scale), c->ptr(bias), momentum,
                           nullptr, nullptr, eps, c->ptr(mean), c->ptr(invStd), d->activation, c->workspace, workspaceBytes,
                           reservePtr, reserveBytes),
                       "cudnnBatchNormalizationForwardTrainingEx (batch norm + ReLU)");
  });
}

// The backward of a fused forward, with the forward's ops. A forward that added a residual
// whose backward has no dz (the residual needs no gradient) still gets one from cuDNN: into the
// workspace, behind cuDNN's own. A backward with dz after a forward without a residual (not a
// pair the compiler emits) computes dz = g with the own kernel.
Expected<RunFn> fusedBackward(DeviceContext &ctx, const plan::BatchNormParams &a, const TensorList &in,
                              const TensorList &out, const FusedLayer &f) {
  const Tensor *dy = in[0], *x = in[1], *y = in[2], *scale = in[3], *bias = in[4], *mean = in[5], *invStd = in[6];
  const Tensor *dx = out[0], *dscale = out[1], *dbias = out[2], *dz = out.size() == 4 ? out[3] : nullptr;
  const bool add = f.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  auto reserve = ctx.persistentBuffer(invStd->id(), f.reserveBytes);
  if (!reserve)
    return reserve.status();
  const size_t workspaceBytes = f.backwardWorkspace;
  const size_t dzScratch = add && !dz ? roundUp(std::max<size_t>(workspaceBytes, 1), 256) : 0;
  ctx.requestWorkspace(dzScratch ? dzScratch + dx->bytes() : std::max<size_t>(workspaceBytes, 1));
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const auto d = f.d;
  const cudnnBatchNormOps_t ops = f.ops;
  const size_t reserveBytes = f.reserveBytes;
  void *reservePtr = *reserve;
  const double eps = a.epsilon;
  const int64_t n = countOf(*dx);
  return RunFn([=]() -> Status {
    void *dzPtr = nullptr;
    if (add)
      dzPtr = dz ? static_cast<void *>(c->ptr(dz)) : static_cast<uint8_t *>(c->workspace) + dzScratch;
    CASTOR_RETURN_IF_ERROR(cudnnStatus(
        cudnnBatchNormalizationBackwardEx(c->cudnn, kMode, ops, &kOne, &kZero, &kOne, &kZero, d->x, c->ptr(x), d->x,
                                          c->ptr(y), d->x, c->ptr(dy), add ? d->x : nullptr, dzPtr, d->x, c->ptr(dx),
                                          d->params, c->ptr(scale), c->ptr(bias), c->ptr(dscale), c->ptr(dbias), eps,
                                          c->ptr(mean), c->ptr(invStd), d->activation, c->workspace, workspaceBytes,
                                          reservePtr, reserveBytes),
        "cudnnBatchNormalizationBackwardEx (batch norm + ReLU)"));
    if (dz && !add)
      return cudaStatus(unaryBackward(elementwise::Relu{}, c->ref(dy), c->ref(y), c->ref(dz), n, c->stream),
                        "relu_backward");
    return Status::ok();
  });
}

// A kernel of the group the fused kernel replaces, with the fused kernel's name and attributes
// (epsilon, momentum). Shared: the builders it is given to may keep a reference to it.
std::shared_ptr<Kernel> stepKernel(const Kernel &fused, OpId op) {
  auto k = std::make_shared<Kernel>();
  k->set_op(std::string(plan::opName(op)));
  k->set_name(labelOf(fused));
  for (const auto &[name, value] : fused.attrs())
    if (!plan::isBatchNormReluActivationAttr(name)) // the activation's, not the batch norm's
      (*k->mutable_attrs())[name] = value;
  return k;
}

// The activation's bound: infinite for relu, clip_max for ReLU6's clip.
float clipMaxOf(const plan::BatchNormReluParams &p) { return p.clipMax ? float(*p.clipMax) : float(kInf); }
bool isClip(float clipMax) { return clipMax < float(kInf); }

// batch_norm_training into y, then y += z, then y = relu(y) (or ReLU6's clip), in place.
Expected<RunFn> composedForward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out,
                                float clipMax) {
  const Tensor *y = out[0], *z = in.size() == 4 ? in[3] : nullptr;
  auto bnKernel = stepKernel(k, OpId::BatchNormTraining);
  auto bn = buildBatchNorm(ctx, *bnKernel, {in[0], in[1], in[2]}, out);
  if (!bn)
    return bn.status().withContext("the batch norm of " + k.op());
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const int64_t n = countOf(*y);
  RunFn bnRun = std::move(*bn);
  return RunFn([=]() -> Status {
    (void)bnKernel; // lives as long as the batch norm built from it
    CASTOR_RETURN_IF_ERROR(bnRun());
    // y and z share shape, dtype and so layout: flat indices (a rank-0 Broadcast).
    if (z)
      CASTOR_RETURN_IF_ERROR(
          cudaStatus(binary(OpId::Add, c->ref(y), c->ref(z), c->ref(y), Broadcast{}, n, c->stream), "add"));
    if (isClip(clipMax))
      return cudaStatus(unary(clipTo(clipMax), c->ref(y), c->ref(y), n, c->stream), "clip");
    return cudaStatus(unary(elementwise::Relu{}, c->ref(y), c->ref(y), n, c->stream), "relu");
  });
}

// g = relu_backward(dy, y) into dz, or without dz into a scratch area; then
// batch_norm_training_backward(g, x, scale, mean, inv_std). ReLU6's clip (no dz): the normalised
// value t recomputed into the scratch area by batch_norm_apply's kernel, g = clip_backward(dy, t)
// in place. The composed forward's t came from the batch norm's kernel (cuDNN's, or the own one),
// which may round an element differently: its gradient may then differ where t lies on a bound.
//
// The scratch area lies in the shared workspace, behind the batch norm's own workspace (its
// request is measured apart from what earlier kernels asked for). The batch-norm builder takes
// g as a tensor: a copy of dx's, registered in ctx.workspaceTensors, so that it reads dx's
// bytes while the batch norm is built and tuned and the scratch area once the workspace exists.
Expected<RunFn> composedBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out,
                                 float clipMax) {
  const Tensor *dy = in[0], *x = in[1], *y = in[2], *dx = out[0];
  std::shared_ptr<Tensor> scratch;
  const Tensor *g = out.size() == 4 ? out[3] : nullptr;
  if (!g) {
    scratch = std::make_shared<Tensor>(*dx);
    scratch->set_name(dx->name() + " (the ReLU's gradient)");
    g = scratch.get();
  }
  auto bnKernel = stepKernel(k, OpId::BatchNormTrainingBackward);
  const size_t earlier = ctx.workspaceBytes;
  ctx.workspaceBytes = 0;
  auto bn = buildBatchNorm(ctx, *bnKernel, {g, x, in[3], in[5], in[6]}, {dx, out[1], out[2]});
  const size_t bnWorkspace = ctx.workspaceBytes;
  ctx.workspaceBytes = earlier;
  ctx.requestWorkspace(bnWorkspace);
  if (!bn)
    return bn.status().withContext("the batch norm of " + k.op());
  const size_t scratchAt = roundUp(bnWorkspace, 256);
  // ReLU6's recomputation needs C floats of coefficients, behind the scratch area.
  const size_t coefAt = roundUp(scratchAt + (scratch ? dx->bytes() : 0), 256);
  if (scratch) {
    ctx.requestWorkspace(scratchAt + dx->bytes());
    ctx.workspaceTensors[scratch.get()] = scratchAt;
  }
  const Shape xs = shapeOf(*x);
  const bool clip = isClip(clipMax);
  if (clip) {
    if (!scratch)
      return Status::error(k.op() + ": clip_max takes no residual gradient");
    // batch_norm_apply's kernel recomputes t: f32, f16 or bf16 data, f32 per-channel tensors (the
    // groups the compiler fuses are f16 or bf16).
    const plan::DType dt = x->dtype();
    bool takes = dt == plan::F32 || dt == plan::F16 || dt == plan::BF16;
    for (size_t i = 3; i < 7; ++i)
      takes = takes && in[i]->dtype() == plan::F32;
    if (!takes)
      return Status::error(k.op() + " with clip_max on cuda needs f32, f16 or bf16 data with f32 scale, bias and "
                                    "statistics (got " + plan::dtypeName(dt) + " data)");
    ctx.requestWorkspace(coefAt + sizeof(float) * size_t(xs[1]));
  }
  // batch_norm_apply's view of x: [A, C, B], channels last B = 1.
  const bool nhwc = ctx.channelsLast(x);
  const int64_t A = nhwc ? xs[0] * xs[2] * xs[3] : xs[0], C = xs[1], B = nhwc ? 1 : xs[2] * xs[3];
  const Tensor *scale = in[3], *bias = in[4], *mean = in[5], *invStd = in[6];
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const int64_t n = countOf(*dx);
  RunFn bnRun = std::move(*bn);
  return RunFn([=]() -> Status {
    (void)bnKernel; // lives as long as the batch norm built from it
    (void)scratch;  // and so does g's tensor, which ctx.workspaceTensors names
    if (clip) {
      auto f32 = [c](const Tensor *t) { return reinterpret_cast<const float *>(c->ptr(t)); };
      float *coef = reinterpret_cast<float *>(static_cast<uint8_t *>(c->workspace) + coefAt);
      CASTOR_RETURN_IF_ERROR(cudaStatus(bnApply(c->ref(x), Ref{}, f32(scale), f32(bias), f32(mean), f32(invStd),
                                                c->ref(g), A, C, B, /*relu=*/false, float(kInf), coef, c->stream),
                                        "batch_norm_apply (ReLU6's normalised value)"));
      CASTOR_RETURN_IF_ERROR(cudaStatus(
          unaryBackward(clipTo(clipMax), c->ref(dy), c->ref(g), c->ref(g), n, c->stream), "clip_backward"));
      return bnRun();
    }
    CASTOR_RETURN_IF_ERROR(cudaStatus(
        unaryBackward(elementwise::Relu{}, c->ref(dy), c->ref(y), c->ref(g), n, c->stream), "relu_backward"));
    return bnRun();
  });
}

// Castor's own fused kernels (kernels/batch_norm_relu.cu): channels-last data [N*H*W, C] of one
// dtype f32/f16/bf16 with f32 per-channel tensors; why not otherwise.
Status ownTakes(const DeviceContext &ctx, const TensorList &data, const TensorList &perChannel) {
  const Tensor *x = data[0];
  if (x->shape_size() != 4 || !ctx.channelsLast(x))
    return Status::error("data not stored NHWC");
  if (x->dtype() != plan::F32 && x->dtype() != plan::F16 && x->dtype() != plan::BF16)
    return Status::error("data not f32, f16 or bf16");
  for (const Tensor *t : data)
    if (t->dtype() != x->dtype())
      return Status::error("data of several dtypes");
  for (const Tensor *t : perChannel)
    if (t->dtype() != plan::F32)
      return Status::error("per-channel tensors not f32");
  return Status::ok();
}

struct Rows {
  int64_t rows, C;
};
Rows rowsOf(const Tensor &x) {
  const Shape s = shapeOf(x);
  return {s[0] * s[2] * s[3], s[1]};
}

const float *f32(const DeviceContext &c, const Tensor *t) { return reinterpret_cast<const float *>(c.ptr(t)); }
float *f32Out(const DeviceContext &c, const Tensor *t) { return reinterpret_cast<float *>(c.ptr(t)); }

// The key of the ReLU's mask the own forward of the layer with this saved inverse std records.
uint32_t maskKey(const Tensor *invStd) { return uint32_t(own::kTagBnReluMask) << 28 | invStd->id(); }

// The buffer an own forward with a residual records the ReLU's mask in, when the plan holds its
// backward and the budget beside the arena has room for it; null otherwise (no mask: the backward
// reads y). CASTOR_BN_RELU_MASK=0 turns the mask off (A/B measurements).
uint8_t *recordedMask(DeviceContext &ctx, const TensorList &in, const TensorList &out, bool backwardInPlan) {
  static const bool off = [] {
    const char *v = std::getenv("CASTOR_BN_RELU_MASK");
    return v && std::string(v) == "0";
  }();
  if (off || in.size() != 4 || !backwardInPlan || out[2]->id() >= (1u << 28))
    return nullptr;
  if (auto it = ctx.persistent.find(maskKey(out[2])); it != ctx.persistent.end())
    return static_cast<uint8_t *>(it->second.first); // another way's candidate asked first
  const Rows g = rowsOf(*in[0]);
  const size_t bytes = bnReluMaskBytes(int(in[0]->dtype()), g.rows, g.C);
  if (bytes == 0)
    return nullptr;
  // The mask stands in for the reserve space of cuDNN's fused kernel, which the plan's budget
  // counts for the layer and which its candidate may hold while the tuner weighs both.
  auto reserve = ctx.persistent.find(out[2]->id());
  const size_t held = ctx.persistentBytes - (reserve == ctx.persistent.end() ? 0 : reserve->second.second);
  if (ctx.besideArenaBudget &&
      held + bytes + ctx.workspaceBytes + DeviceContext::kSmallBufferShare > ctx.besideArenaBudget) {
    static std::atomic<bool> noted{false};
    if (!noted.exchange(true))
      std::fprintf(stderr,
                   "castor: the batch-norm-ReLU's mask (%zu bytes) does not fit what is left of the plan's workspace "
                   "limit; such layers' backward reads y instead\n",
                   bytes);
    return nullptr;
  }
  auto p = ctx.persistentBuffer(maskKey(out[2]), bytes);
  return p ? static_cast<uint8_t *>(*p) : nullptr;
}

// The mask the own forward of this backward's layer recorded, or null.
const uint8_t *maskOfForward(const DeviceContext &ctx, const Tensor *invStd) {
  if (invStd->id() >= (1u << 28))
    return nullptr;
  auto it = ctx.persistent.find(maskKey(invStd));
  return it == ctx.persistent.end() ? nullptr : static_cast<const uint8_t *>(it->second.first);
}

Expected<RunFn> ownForward(DeviceContext &ctx, const plan::BatchNormParams &a, const TensorList &in,
                           const TensorList &out, float clipMax, bool backwardInPlan) {
  const Tensor *x = in[0], *scale = in[1], *bias = in[2], *z = in.size() == 4 ? in[3] : nullptr;
  const Tensor *y = out[0], *mean = out[1], *invStd = out[2];
  const Rows g = rowsOf(*x);
  uint8_t *mask = recordedMask(ctx, in, out, backwardInPlan);
  ctx.requestWorkspace(bnReluWorkspaceBytes(g.rows, g.C));
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const double eps = a.epsilon;
  return RunFn([=]() -> Status {
    return cudaStatus(bnReluForward(c->ref(x), z ? c->ref(z) : Ref{}, f32(*c, scale), f32(*c, bias), c->ref(y),
                                    f32Out(*c, mean), f32Out(*c, invStd), mask, g.rows, g.C, eps, clipMax,
                                    c->workspace, c->stream),
                      "the own batch-norm-ReLU forward");
  });
}

// The own forward from the sums the convolution's epilogue computed.
Expected<RunFn> statsForward(DeviceContext &ctx, const plan::BatchNormParams &a, const TensorList &in,
                             const TensorList &out, float clipMax, const float *sums, bool backwardInPlan) {
  const Tensor *x = in[0], *scale = in[1], *bias = in[2], *z = in.size() == 4 ? in[3] : nullptr;
  const Tensor *y = out[0], *mean = out[1], *invStd = out[2];
  const Rows g = rowsOf(*x);
  uint8_t *mask = recordedMask(ctx, in, out, backwardInPlan);
  ctx.requestWorkspace(sizeof(float) * size_t(g.C));
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const double eps = a.epsilon;
  return RunFn([=]() -> Status {
    return cudaStatus(bnReluForwardFromSums(c->ref(x), z ? c->ref(z) : Ref{}, f32(*c, scale), f32(*c, bias), sums,
                                            c->ref(y), f32Out(*c, mean), f32Out(*c, invStd), mask, g.rows, g.C, eps,
                                            clipMax, c->workspace, c->stream),
                      "the own batch-norm-ReLU forward from the convolution's sums");
  });
}

// After a forward without residual the own backward recomputes the ReLU's mask from x instead of
// reading y (kernels/batch_norm_relu.h): y = relu(t) passes where t does; ReLU6's where
// 0 <= t <= clipMax. After one with a residual it reads the mask the forward recorded, else y.
Expected<RunFn> ownBackward(DeviceContext &ctx, const TensorList &in, const TensorList &out, bool forwardAddedResidual,
                            float clipMax) {
  const uint8_t *mask = forwardAddedResidual ? maskOfForward(ctx, in[6]) : nullptr;
  const Tensor *dy = in[0], *x = in[1], *y = forwardAddedResidual && !mask ? in[2] : nullptr, *scale = in[3],
               *bias = in[4], *mean = in[5], *invStd = in[6];
  const Tensor *dx = out[0], *dscale = out[1], *dbias = out[2], *dz = out.size() == 4 ? out[3] : nullptr;
  const Rows g = rowsOf(*x);
  ctx.requestWorkspace(bnReluWorkspaceBytes(g.rows, g.C));
  DeviceContext *c = &ctx;
  return RunFn([=]() -> Status {
    return cudaStatus(bnReluBackward(c->ref(dy), c->ref(x), y ? c->ref(y) : Ref{}, mask, f32(*c, scale), f32(*c, bias),
                                     f32(*c, mean), f32(*c, invStd), c->ref(dx), dz ? c->ref(dz) : Ref{},
                                     f32Out(*c, dscale), f32Out(*c, dbias), g.rows, g.C, clipMax, c->workspace,
                                     c->stream),
                      "the own batch-norm-ReLU backward");
  });
}

// Whether the forward whose saved mean is `mean` adds a residual (unknown: as if it did, so that
// the backward reads y).
bool forwardAddsResidual(const DeviceContext &ctx, const Tensor *mean) {
  if (!ctx.plan)
    return true;
  for (const Kernel &k : ctx.plan->kernels())
    if (opOf(k) == OpId::BatchNormReluTraining && k.outputs_size() == 3 && k.outputs(1) == mean->id())
      return k.inputs_size() == 4;
  return true;
}

// The backward kernel of the forward whose saved mean is `mean`, and its operands, from the plan.
struct BackwardKernel {
  const Kernel *kernel = nullptr;
  TensorList in, out;
};
std::optional<BackwardKernel> backwardOf(const DeviceContext &ctx, const Tensor *mean) {
  if (!ctx.plan || !ctx.tensorsById)
    return std::nullopt;
  for (const Kernel &k : ctx.plan->kernels()) {
    if (opOf(k) != OpId::BatchNormReluTrainingBackward || k.inputs_size() != 7 || k.inputs(5) != mean->id())
      continue;
    BackwardKernel b{&k, {}, {}};
    for (auto [ids, list] : {std::pair{&k.inputs(), &b.in}, std::pair{&k.outputs(), &b.out}})
      for (uint32_t id : *ids) {
        auto t = ctx.tensorsById->find(id);
        if (t == ctx.tensorsById->end())
          return std::nullopt;
        list->push_back(t->second);
      }
    return b;
  }
  return std::nullopt;
}

// A layer's way chosen by the tuner among those that take it (cuDNN's fused kernel, the own
// kernels, the composed group): the forward and its backward (found in the plan) timed together on
// the real buffers, the choice cached per layer signature with the other tuning choices. Each
// candidate builds both kernels; the winner's forward is returned, its backward is built again when
// the plan reaches it (following the recorded way). What only the losers needed is given back:
// reserve space (cuDNN's fused kernels keep theirs under the saved inverse std, the Ex batch norm of
// the composed way under the saved mean), workspace requests, scratch tensors.
Expected<RunFn> tunedForward(DeviceContext &ctx, const Kernel &k, const plan::BatchNormParams &a, float clipMax,
                             const TensorList &in, const TensorList &out, const std::optional<FusedLayer> &f,
                             bool own, const BackwardKernel &bwd, const DeviceContext::ConvStatsOffer *offer) {
  struct Built {
    RunFn forward;
    size_t forwardWorkspace = 0;
  };
  auto built = std::make_shared<std::unordered_map<std::string, Built>>();
  const size_t workspaceBefore = ctx.workspaceBytes;
  std::unordered_map<const Tensor *, size_t> scratchBefore = ctx.workspaceTensors;
  DeviceContext *c = &ctx;
  auto candidate = [&](const std::string &way) {
    tuning::Candidate cand;
    cand.name = way;
    cand.build = [c, &k, a, clipMax, in, out, f, bwd, way, built, offer]() -> Expected<tuning::Executable> {
      c->workspaceBytes = 0;
      auto fwd = way == kFused       ? fusedForward(*c, a, in, out, *f)
                 : way == kOwn       ? ownForward(*c, a, in, out, clipMax, true)
                 : way == kConvStats ? statsForward(*c, a, in, out, clipMax, offer->sums, true)
                                     : composedForward(*c, k, in, out, clipMax);
      const size_t forwardWorkspace = c->workspaceBytes;
      if (!fwd)
        return fwd.status();
      c->workspaceBytes = 0;
      auto back = way == kFused ? fusedBackward(*c, a, bwd.in, bwd.out, *f)
                  : way == kOwn || way == kConvStats ? ownBackward(*c, bwd.in, bwd.out, in.size() == 4, clipMax)
                                                     : composedBackward(*c, *bwd.kernel, bwd.in, bwd.out, clipMax);
      size_t pairWorkspace = std::max(forwardWorkspace, c->workspaceBytes);
      if (!back)
        return back.status();
      (*built)[way] = Built{*fwd, forwardWorkspace};
      // With a convolution that offers the statistics, each way is timed behind it: the plain
      // convolution, or for conv-stats the one that computes them.
      std::function<Status(void *)> conv;
      if (offer) {
        conv = way == kConvStats ? offer->withStats : offer->plain;
        pairWorkspace = std::max(pairWorkspace, way == kConvStats ? offer->statsWorkspace : offer->plainWorkspace);
      }
      tuning::Executable e;
      e.workspaceBytes = pairWorkspace;
      RunFn forward = *fwd, backward = std::move(*back);
      // The kernels read ctx.workspace when they run: the tuner's buffer while it times them.
      e.run = [c, conv, forward, backward](void *ws) -> Status {
        void *shared = c->workspace;
        c->workspace = ws;
        Status s = conv ? conv(ws) : Status::ok();
        if (s.isOk())
          s = forward();
        if (s.isOk())
          s = backward();
        c->workspace = shared;
        return s;
      };
      return e;
    };
    return cand;
  };
  std::vector<tuning::Candidate> candidates;
  if (f)
    candidates.push_back(candidate(kFused));
  if (own)
    candidates.push_back(candidate(kOwn));
  if (own && offer)
    candidates.push_back(candidate(kConvStats));
  candidates.push_back(candidate(kComposed));
  const std::string key = std::string("batch_norm_relu.pair|x:") + plan::dtypeName(in[0]->dtype()) +
                          (ctx.channelsLast(in[0]) ? "|nhwc=" : "|nchw=") + dimsList(shapeOf(*in[0])) +
                          (in.size() == 4 ? "|add" : "") + (bwd.out.size() == 4 ? "|dz" : "") +
                          (isClip(clipMax) ? "|clip_max=" + std::to_string(clipMax) : std::string()) +
                          (offer ? "|after=" + offer->signature : std::string());
  auto choice = tuning::choose(ctx, key, candidates);
  ctx.workspaceBytes = workspaceBefore;
  for (auto it = ctx.workspaceTensors.begin(); it != ctx.workspaceTensors.end();)
    it = scratchBefore.count(it->first) ? std::next(it) : ctx.workspaceTensors.erase(it);
  if (!choice)
    return choice.status();
  const std::string &way = choice->name;
  if (way != kFused)
    ctx.releasePersistentBuffer(out[2]->id());
  if (way != kComposed)
    ctx.releasePersistentBuffer(out[1]->id());
  if (way != kOwn && way != kConvStats && out[2]->id() < (1u << 28))
    ctx.releasePersistentBuffer(maskKey(out[2]));
  const Built &winner = built->at(way);
  ctx.requestWorkspace(winner.forwardWorkspace);
  if (offer)
    *offer->useStats = way == kConvStats;
  ctx.layerChoices[out[1]->id()] =
      way == kFused && f->ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? std::string(kFusedAdd) : way;
  return winner.forward;
}

Expected<RunFn> buildForward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  if (in.size() < 3 || in.size() > 4 || out.size() != 3)
    return Status::error(k.op() + " needs x, scale, bias [, z] and produces y, batch_mean, batch_inv_std");
  auto params = plan::parseBatchNormRelu(k);
  if (!params)
    return params.status();
  const plan::BatchNormParams *a = &params->batchNorm;
  const float clipMax = clipMaxOf(*params);
  if (a->sync)
    return Status::error(k.op() + ": synchronized batch norm (--sync-batch-norm) runs on the cpu backend so far");
  const uint32_t layer = out[1]->id();
  const std::string forced = bn::forcedWay();
  auto f = isClip(clipMax) ? Expected<FusedLayer>(Status::error("cuDNN's fused kernel runs relu, not ReLU6's clip"))
                           : fusedLayer(ctx, in[0], forwardPerChannel(in, out), in.size() == 4);
  // The reserve space stays allocated for the plan's lifetime: a layer whose reserve the plan's
  // workspace limit has no room left for runs another way rather than failing the plan.
  if (f && ctx.besideArenaBudget &&
      ctx.persistentBytes + f->reserveBytes + ctx.workspaceBytes + DeviceContext::kSmallBufferShare > ctx.besideArenaBudget)
    f = Status::error("its reserve space of " + std::to_string(f->reserveBytes) +
                      " bytes does not fit what is left of the plan's workspace limit");
  TensorList data{in[0], out[0]};
  if (in.size() == 4)
    data.push_back(in[3]);
  const bool own = ownTakes(ctx, data, forwardPerChannel(in, out)).isOk();
  if (!f && forced.empty())
    noteComposed(k, f.message());
  if (forced == kFused && f) {
    auto run = fusedForward(ctx, *a, in, out, *f);
    if (run)
      ctx.layerChoices[layer] = f->ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? kFusedAdd : kFused;
    return run;
  }
  const bool backwardInPlan = backwardOf(ctx, out[1]).has_value();
  if (forced == kOwn && own) {
    ctx.layerChoices[layer] = kOwn;
    return ownForward(ctx, *a, in, out, clipMax, backwardInPlan);
  }
  auto offerIt = ctx.convStatsOffers.find(in[0]->id());
  const DeviceContext::ConvStatsOffer *offer = offerIt == ctx.convStatsOffers.end() ? nullptr : &offerIt->second;
  if (forced == kConvStats && own && offer) {
    *offer->useStats = true;
    ctx.layerChoices[layer] = kConvStats;
    return statsForward(ctx, *a, in, out, clipMax, offer->sums, backwardInPlan);
  }
  auto bwd = backwardOf(ctx, out[1]);
  if (forced.empty() && (f || own) && bwd)
    return tunedForward(ctx, k, *a, clipMax, in, out, f ? std::optional<FusedLayer>(*f) : std::nullopt, own, *bwd,
                        offer);
  ctx.layerChoices[layer] = kComposed;
  return composedForward(ctx, k, in, out, clipMax);
}

Expected<RunFn> buildBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  if (in.size() != 7 || out.size() < 3 || out.size() > 4)
    return Status::error(k.op() + " needs dy, x, y, scale, bias, batch_mean, batch_inv_std and produces dx, dscale, "
                                  "dbias [, dz]");
  auto params = plan::parseBatchNormRelu(k);
  if (!params)
    return params.status();
  const plan::BatchNormParams *a = &params->batchNorm;
  const float clipMax = clipMaxOf(*params);
  if (a->sync)
    return Status::error(k.op() + ": synchronized batch norm (--sync-batch-norm) runs on the cpu backend so far");
  auto choice = ctx.layerChoices.find(in[5]->id());
  if (choice == ctx.layerChoices.end() || choice->second == kComposed)
    return composedBackward(ctx, k, in, out, clipMax);
  if (choice->second == kOwn || choice->second == kConvStats)
    return ownBackward(ctx, in, out, forwardAddsResidual(ctx, in[5]), clipMax);
  // The forward ran cuDNN's fused kernel: so must the backward, with the forward's ops.
  auto f = fusedLayer(ctx, in[1], backwardPerChannel(in, out), choice->second == kFusedAdd);
  if (!f)
    return f.status().withContext("the forward of this layer ran cuDNN's fused batch-norm-ReLU; its backward cannot");
  return fusedBackward(ctx, *a, in, out, *f);
}

} // namespace

Expected<RunFn> buildBatchNormRelu(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                   const TensorList &out) {
  if (opOf(k) == OpId::BatchNormReluTraining)
    return buildForward(ctx, k, in, out);
  if (opOf(k) == OpId::BatchNormReluTrainingBackward)
    return buildBackward(ctx, k, in, out);
  return Status::error("no batch-norm-ReLU kernel '" + k.op() + "'");
}

} // namespace castor::cuda
