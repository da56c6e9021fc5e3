// Optimizer and loss-scaler builders of the own kernels: SGD, AdamW, counters, the learning-rate
// schedule, the multi-tensor unscale and clipping, the loss-scale update, gradient statistics.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/reduce.h"
#include "cuda/kernels/optimizer.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>

namespace castor::cuda::own {

// sgd_update
Expected<RunFn> buildSgdUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSgd(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(4, 2));
  const bool hasFlag = in.size() == 6 || (in.size() == 5 && in[4]->dtype() != plan::I64);
  const Tensor *step = in.size() >= 5 && in[4]->dtype() == plan::I64 ? in[4] : nullptr;
  if (p->momentum != 0 && !step)
    return Status::error("sgd with momentum needs the step counter as its 5th input");
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], in[2]}));
  const Tensor *found = hasFlag ? in.back() : nullptr;
  const auto i = in;
  const plan::SgdParams a = *p;
  return launch([=]() {
    return sgdUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), step ? c->ints(step) : nullptr,
                     found ? c->ref(found) : Ref{nullptr, kF32}, countOf(*i[0]), a.momentum, a.nesterov,
                     a.weightDecay, a.dampening, s);
  });
}

namespace {

// Whether adamw_update kernel `j` can join a multi-tensor launch led by `lead`: the same
// hyper-parameters, learning rate, step counter and overflow flag; param, grad and moments f32
// and stored alike.
bool joinsAdamwGroup(const DeviceContext &ctx, const Kernel &lead, const plan::AdamWParams &a, const Kernel &j) {
  if (j.op() != lead.op() || j.inputs_size() != lead.inputs_size() || j.outputs_size() != 3)
    return false;
  for (int x = 4; x < lead.inputs_size(); ++x) // lr, step [, found_inf]
    if (j.inputs(x) != lead.inputs(x))
      return false;
  auto p = plan::parseAdamW(j);
  if (!p || p->beta1 != a.beta1 || p->beta2 != a.beta2 || p->eps != a.eps || p->weightDecay != a.weightDecay)
    return false;
  const std::vector<const Tensor *> ts = operandsOf(ctx, j);
  for (int x = 0; x < 4; ++x)
    if (!ts[size_t(x)] || ts[size_t(x)]->dtype() != plan::F32 || countOf(*ts[size_t(x)]) != countOf(*ts[0]) ||
        reordered(ctx, ts[size_t(x)]) != reordered(ctx, ts[0]))
      return false;
  return true;
}

} // namespace

// adamw_update. A run of consecutive adamw_update kernels of one optimizer step (PyTorch's
// fused/foreach AdamW) is one multi-tensor launch, built by the first of them; the others run
// nothing. Each parameter's update is independent of the others', so the order is free.
Expected<RunFn> buildAdamwUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  if (isCovered(ctx))
    return coveredKernel();
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseAdamW(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(6, 3));
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], in[2], in[3]}));
  const Tensor *found = in.size() == 7 ? in[6] : nullptr;
  const auto i = in;
  const plan::AdamWParams a = *p;
  const std::vector<int> group =
      consecutiveRun(ctx, [&](const Kernel &j) { return joinsAdamwGroup(ctx, k, a, j); });
  if (group.size() > 1) {
    std::vector<AdamwTensors> tensors;
    for (int j : group) {
      const std::vector<const Tensor *> ts = operandsOf(ctx, ctx.plan->kernels(j));
      tensors.push_back(AdamwTensors{c->ptr(ts[0]), c->ptr(ts[1]), c->ptr(ts[2]), c->ptr(ts[3]), countOf(*ts[0])});
    }
    auto buffer = scratchFor(ctx, kTagMulti, out[0], adamwTableBytes(tensors));
    if (!buffer)
      return buffer.status();
    AdamwTable table;
    CASTOR_CUDA(uploadAdamwTable(tensors, *buffer, &table));
    for (size_t g = 1; g < group.size(); ++g)
      ctx.coveredKernels.insert(group[g]);
    return launch([=]() {
      return adamwAll(table, c->ref(i[4]), c->ints(i[5]), found ? c->ref(found) : Ref{nullptr, kF32}, a.beta1,
                      a.beta2, a.eps, a.weightDecay, s);
    });
  }
  return launch([=]() {
    return adamwUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ints(i[5]),
                       found ? c->ref(found) : Ref{nullptr, kF32}, countOf(*i[0]), a.beta1, a.beta2, a.eps,
                       a.weightDecay, s);
  });
}

// increment
Expected<RunFn> buildIncrement(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseIncrement(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0], *flag = in.size() > 1 ? in[1] : nullptr;
  const bool whenSet = p->whenSet;
  return launch(
      [=]() { return increment(c->ints(x), c->ints(y), flag ? c->ref(flag) : Ref{nullptr, kF32}, whenSet, s); });
}

// lr_schedule
Expected<RunFn> buildLrSchedule(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseLrSchedule(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  LrSchedule l;
  using Kind = plan::LrScheduleParams::Kind;
  l.kind = p->kind == Kind::Constant ? 0 : p->kind == Kind::Step ? 1 : 2;
  l.baseLr = p->baseLr, l.gamma = p->gamma, l.minLr = p->minLr;
  l.warmupSteps = p->warmupSteps, l.stepSize = p->stepSize, l.totalSteps = p->totalSteps;
  const Tensor *it = in[0], *lr = out[0];
  return launch([=]() { return lrSchedule(c->ints(it), c->ref(lr), l, s); });
}

// unscale_gradients, clip_grad_norm
Expected<RunFn> buildUnscaleGradients(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                      const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const bool isUnscale = opOf(k) == OpId::UnscaleGradients;
  double maxNorm = 0;
  if (isUnscale) {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    if (in.size() < 2 || out.size() != in.size())
      return Status::error("unscale_gradients takes n gradients and the scale, and produces n gradients and "
                           "found_inf");
  } else {
    auto p = plan::parseClipGradNorm(k);
    if (!p)
      return p.status();
    maxNorm = p->maxNorm;
    if (in.empty() || out.size() != in.size() + 1)
      return Status::error("clip_grad_norm takes n gradients and produces n gradients and total_norm");
  }
  // One table of every gradient (the arena does not move: pointers are final), uploaded now.
  const size_t n = isUnscale ? in.size() - 1 : in.size();
  std::vector<TensorEntry> entries;
  for (size_t j = 0; j < n; ++j) {
    const Tensor *g = in[j];
    if (!isFloat(g->dtype()))
      return Status::error(op + ": gradient '" + g->name() + "' is not a float tensor");
    if (countOf(*g) > int64_t(1) << 40)
      return Status::error(op + ": gradient too large");
    TensorEntry e;
    e.p = c->ptr(g), e.n = countOf(*g), e.dt = int32_t(g->dtype());
    entries.push_back(e);
  }
  const Tensor *result = out.back(); // found_inf or total_norm: written only by this kernel
  auto buffer = scratchFor(ctx, kTagMulti, result, multiTensorBytes(entries));
  if (!buffer)
    return buffer.status();
  MultiTensorTable table;
  CASTOR_CUDA(uploadMultiTensor(entries, *buffer, &table));
  if (isUnscale) {
    const Tensor *scale = in.back();
    return launch([=]() { return unscaleAll(table, c->ref(scale), c->ref(result), s); });
  }
  return launch([=]() { return clipAll(table, c->ref(result), maxNorm, s); });
}

// update_loss_scale
Expected<RunFn> buildUpdateLossScale(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseUpdateLossScale(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(3, 2));
  const Tensor *scale = in[0], *tracker = in[1], *found = in[2];
  const plan::UpdateLossScaleParams a = *p;
  return launch([=]() {
    return updateLossScale(c->ref(scale), c->ints(tracker), c->ref(found), a.growth, a.backoff, a.interval, s);
  });
}

// gradient_stats
Expected<RunFn> buildGradientStats(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *g = in[0], *y = out[0];
  const bool deterministic = ctx.deterministic;
  return launch([=]() { return gradientStats(c->ref(g), countOf(*g), c->ref(y), c->scratch, deterministic, s); });
}

} // namespace castor::cuda::own
