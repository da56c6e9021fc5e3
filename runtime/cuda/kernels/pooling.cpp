// Builders of the pooling kernels (pooling.cu): max and average pooling, forward and backward.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/pooling.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

namespace castor::cuda::own {
namespace {

PoolGeometry poolGeometry(const plan::Pool2dParams &p, const Shape &xs, const Shape &ys, bool channelsLast) {
  const auto &a = p.shape;
  PoolGeometry g{};
  g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3], g.P = ys[2], g.Q = ys[3];
  g.kh = a.kernel[0], g.kw = a.kernel[1], g.sh = a.strides[0], g.sw = a.strides[1];
  g.padTop = a.pads[0], g.padLeft = a.pads[1], g.padBottom = a.pads[2], g.padRight = a.pads[3];
  g.dh = a.dilations[0], g.dw = a.dilations[1];
  g.includePad = p.countIncludePad;
  g.channelsLast = channelsLast;
  return g;
}

bool samePool(const plan::Pool2dParams &a, const plan::Pool2dParams &b) {
  return a.shape.kernel == b.shape.kernel && a.shape.strides == b.shape.strides && a.shape.pads == b.shape.pads &&
         a.shape.dilations == b.shape.dilations && a.shape.ceilMode == b.shape.ceilMode;
}

// Whether the plan holds a kernel `op` that pools `x` as `p` does (x: the forward's input, the
// backward's second). A training step's max pooling then records its winning taps in the forward,
// in a buffer kept for the plan under x, and its backward only gathers from them: both builders
// decide from the plan alone, so they agree; x outlives the backward, so nothing else writes
// under its key in between. Without a plan (a kernel built alone) each runs on its own.
bool planPools(const DeviceContext &ctx, OpId op, const Tensor *x, const plan::Pool2dParams &p) {
  if (!ctx.plan)
    return false;
  for (const Kernel &j : ctx.plan->kernels()) {
    const int xAt = op == OpId::MaxPool2d ? 0 : 1;
    if (opOf(j) != op || j.inputs_size() <= xAt || j.inputs(xAt) != x->id())
      continue;
    auto q = plan::parsePool2d(j);
    if (q && samePool(*q, p))
      return true;
  }
  return false;
}

} // namespace

// max_pool2d, avg_pool2d
Expected<RunFn> buildPool(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parsePool2d(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0];
  if (x->shape_size() != 4 || y->shape_size() != 4)
    return Status::error(op + " takes [N,C,H,W]");
  if (ctx.channelsLast(x) != ctx.channelsLast(y))
    return layoutError(op, "input and output in different layouts");
  const PoolGeometry g = poolGeometry(*p, shapeOf(*x), shapeOf(*y), ctx.channelsLast(x));
  const bool isMax = opOf(k) == OpId::MaxPool2d;
  if (isMax && maxPoolTapsFit(g) && planPools(ctx, OpId::MaxPool2dBackward, x, *p)) {
    auto taps = scratchFor(ctx, kTagPoolTaps, x, size_t(countOf(*y)));
    if (!taps)
      return taps.status();
    uint8_t *t = static_cast<uint8_t *>(*taps);
    return launch([=]() { return maxPool2dRecordingTaps(c->ref(x), c->ref(y), t, g, s); });
  }
  return launch([=]() { return pool2d(isMax, c->ref(x), c->ref(y), g, s); });
}

// max_pool2d_backward, avg_pool2d_backward
Expected<RunFn> buildPoolBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parsePool2d(k);
  if (!p)
    return p.status();
  const bool isMax = opOf(k) == OpId::MaxPool2dBackward;
  CASTOR_RETURN_IF_ERROR(need(isMax ? 2 : 1, 1));
  const Tensor *dy = in[0], *x = isMax ? in[1] : nullptr, *dx = out[0];
  if (dy->shape_size() != 4 || dx->shape_size() != 4 || (x && x->shape_size() != 4))
    return Status::error(op + " takes [N,C,H,W]");
  if (ctx.channelsLast(dy) != ctx.channelsLast(dx) || (x && ctx.channelsLast(x) != ctx.channelsLast(dx)))
    return layoutError(op, "operands in different layouts");
  const PoolGeometry g = poolGeometry(*p, shapeOf(*dx), shapeOf(*dy), ctx.channelsLast(dx));
  if (isMax && maxPoolTapsFit(g) && planPools(ctx, OpId::MaxPool2d, x, *p)) {
    auto taps = scratchFor(ctx, kTagPoolTaps, x, size_t(countOf(*dy)));
    if (!taps)
      return taps.status();
    const uint8_t *t = static_cast<const uint8_t *>(*taps);
    return launch([=]() { return maxPool2dBackwardFromTaps(c->ref(dy), t, c->ref(dx), g, s); });
  }
  if (isMax && maxPoolTapsFit(g)) {
    auto taps = scratchFor(ctx, kTagPoolTaps, dx, size_t(countOf(*dy)));
    if (!taps)
      return taps.status();
    uint8_t *t = static_cast<uint8_t *>(*taps);
    return launch([=]() { return maxPool2dBackward(c->ref(dy), c->ref(x), c->ref(dx), t, g, s); });
  }
  return launch([=]() { return pool2dBackward(isMax, c->ref(dy), x ? c->ref(x) : Ref{}, c->ref(dx), g, s); });
}

} // namespace castor::cuda::own
