// Element-wise builders of the own kernels: unary ops and their backward, add/mul with broadcasting,
// identity/cast/reshape/flatten (a reorder where the storage orders differ), fill, dropout,
// concat/split.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/layout.h"
#include "cuda/kernels/optimizer.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <unordered_set>
#include <optional>

namespace castor::cuda::own {
namespace {

// identity/reshape/flatten/cast: a copy (or conversion) when x and y have the same storage order,
// else a reorder through channels-last <-> row-major.
Expected<RunFn> buildCopy(DeviceContext &ctx, const std::string &op, const Tensor *x, const Tensor *y) {
  DeviceContext *c = &ctx;
  const bool rx = reordered(ctx, x), ry = reordered(ctx, y);
  if (countOf(*x) != countOf(*y))
    return Status::error(op + ": input and output element counts differ");
  if ((!rx && !ry) || (rx && ry && shapeOf(*x) == shapeOf(*y))) {
    if (x->dtype() == y->dtype())
      return RunFn([c, x, y]() { return c->copyUnlessSame(x, y); });
    return launch([c, x, y]() { return convert(c->ref(x), c->ref(y), countOf(*y), c->stream); });
  }
  if (overlap(x, y))
    return layoutError(op, "an in-place reshape between a channels-last tensor and a tensor of another shape "
                           "(the bytes must be reordered)");
  if (rx && ry && x->dtype() != y->dtype())
    return layoutError(op, "a cast that also reshapes a channels-last tensor");
  // One temporary: the converted input (x's order, y's dtype) or the row-major middle of a
  // channels-last -> channels-last reshape.
  const bool needTemp = x->dtype() != y->dtype() || (rx && ry);
  void *temp = nullptr;
  if (needTemp) {
    auto t = scratchFor(ctx, kTagReorder, y, y->bytes());
    if (!t)
      return t.status();
    temp = *t;
  }
  const int elem = int(plan::dtypeSize(y->dtype()));
  const Shape xs = shapeOf(*x), ys = shapeOf(*y);
  return RunFn([=]() -> Status {
    const void *src = c->ptr(x);
    if (x->dtype() != y->dtype()) {
      CASTOR_CUDA(convert(c->ref(x), Ref{temp, int(y->dtype())}, countOf(*x), c->stream));
      src = temp;
    }
    if (rx && ry) { // reshape: x channels-last -> row-major temp -> y channels-last
      CASTOR_CUDA(fromChannelsLast(src, temp, xs[0], xs[1], xs[2] * xs[3], elem, c->stream));
      CASTOR_CUDA(toChannelsLast(temp, c->ptr(y), ys[0], ys[1], ys[2] * ys[3], elem, c->stream));
    } else if (rx) {
      CASTOR_CUDA(fromChannelsLast(src, c->ptr(y), xs[0], xs[1], xs[2] * xs[3], elem, c->stream));
    } else {
      CASTOR_CUDA(toChannelsLast(src, c->ptr(y), ys[0], ys[1], ys[2] * ys[3], elem, c->stream));
    }
    return Status::ok();
  });
}

// A unary element-wise op (forward, or with Backward its gradient) from its attributes.
template <class Op, bool Backward>
Expected<RunFn> buildElementwiseOf(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(Backward ? 2 : 1, 1));
  auto op = plan::parseElementwise<Op>(k);
  if (!op)
    return op.status().withContext(k.op());
  const Op f = *op;
  if constexpr (Backward) {
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, k.op(), {in[0], in[1], out[0]}));
    const Tensor *dy = in[0], *sv = in[1], *dx = out[0];
    return launch([=]() { return unaryBackward(f, c->ref(dy), c->ref(sv), c->ref(dx), countOf(*dx), s); });
  } else {
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, k.op(), {in[0], out[0]}));
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() { return unary(f, c->ref(x), c->ref(y), countOf(*y), s); });
  }
}

// Whether a cast x -> y is a conversion in storage order (what castAll does), between floats.
bool plainFloatCast(const DeviceContext &ctx, const Tensor *x, const Tensor *y) {
  auto isFloat = [](plan::DType t) { return t == plan::F32 || t == plan::F16 || t == plan::BF16 || t == plan::F64; };
  const bool rx = reordered(ctx, x), ry = reordered(ctx, y);
  return isFloat(x->dtype()) && isFloat(y->dtype()) && x->dtype() != y->dtype() && countOf(*x) == countOf(*y) &&
         ((!rx && !ry) || (rx && ry && shapeOf(*x) == shapeOf(*y)));
}

// A run of consecutive casts of one dtype pair (castor-schedule-casts places the weights' and the
// gradients' casts together) as one multi-tensor launch, built by the first of them; the others
// run nothing. A cast joins only if it reads nothing an earlier one of the run writes. Null when
// the kernel casts alone.
Expected<std::optional<RunFn>> buildCastGroup(DeviceContext &ctx, const Kernel &k, const Tensor *x, const Tensor *y) {
  if (!plainFloatCast(ctx, x, y))
    return std::optional<RunFn>();
  std::unordered_set<uint32_t> written;
  const std::vector<int> group = consecutiveRun(ctx, [&](const Kernel &j) {
    if (j.op() != k.op() || j.inputs_size() != 1 || j.outputs_size() != 1 || written.count(j.inputs(0)))
      return false;
    const std::vector<const Tensor *> ts = operandsOf(ctx, j);
    if (!ts[0] || !ts[1] || ts[0]->dtype() != x->dtype() || ts[1]->dtype() != y->dtype() ||
        !plainFloatCast(ctx, ts[0], ts[1]))
      return false;
    written.insert(j.outputs(0));
    return true;
  });
  if (group.size() < 2)
    return std::optional<RunFn>();
  DeviceContext *c = &ctx;
  std::vector<const Tensor *> sources, destinations;
  std::vector<TensorEntry> sizes;
  for (int j : group) {
    const std::vector<const Tensor *> ts = operandsOf(ctx, ctx.plan->kernels(j));
    sources.push_back(ts[0]);
    destinations.push_back(ts[1]);
    sizes.push_back(TensorEntry{nullptr, countOf(*ts[0]), int32_t(x->dtype()), 0});
  }
  auto buffer = scratchFor(ctx, kTagMulti, y, castTableBytes(sizes));
  if (!buffer)
    return buffer.status();
  for (size_t g = 1; g < group.size(); ++g)
    ctx.coveredKernels.insert(group[g]);
  // The table holds arena pointers, which are fixed once the arena is allocated (before the
  // kernels are built): upload it now.
  std::vector<TensorEntry> from, to;
  for (size_t g = 0; g < sources.size(); ++g) {
    from.push_back(TensorEntry{c->ptr(sources[g]), countOf(*sources[g]), int32_t(sources[g]->dtype()), 0});
    to.push_back(TensorEntry{c->ptr(destinations[g]), countOf(*destinations[g]), int32_t(destinations[g]->dtype()), 0});
  }
  MultiTensorTable table;
  CASTOR_CUDA(uploadCastTable(from, to, *buffer, &table));
  const cudaStream_t s = ctx.stream;
  const int fromDt = int(x->dtype()), toDt = int(y->dtype());
  return std::optional<RunFn>(launch([table, fromDt, toDt, s]() { return castAll(table, fromDt, toDt, s); }));
}

} // namespace

// Every unary element-wise op of ops.def and its gradient.
Expected<RunFn> buildElementwise(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  switch (opOf(k)) {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                        \
  case OpId::id:                                                                                               \
    return buildElementwiseOf<elementwise::id, false>(ctx, k, in, out);                                       \
  case OpId::id##Backward:                                                                                     \
    return buildElementwiseOf<elementwise::id, true>(ctx, k, in, out);
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  default:
    return Status::error(k.op() + ": not a unary element-wise op");
  }
}

// add, mul
Expected<RunFn> buildBinary(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  auto bc = physicalBroadcast(ctx, in[0], in[1], out[0]);
  if (!bc)
    return bc.status().withContext(op);
  const Broadcast b = simplifyBroadcast(*bc);
  const OpId bo = opOf(k);
  const Tensor *x = in[0], *y = in[1], *z = out[0];
  return launch([=]() { return binary(bo, c->ref(x), c->ref(y), c->ref(z), b, countOf(*z), s); });
}

// identity, cast, reshape, flatten
Expected<RunFn> buildCopyOrCast(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  const std::string &op = k.op();
  const auto need = operandCheck(k.op(), in, out);
  if (opOf(k) == OpId::Flatten) {
    auto axis = plan::parseAxis(k, 1);
    if (!axis)
      return axis.status();
  } else {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  }
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  if (opOf(k) == OpId::Cast) {
    if (isCovered(ctx))
      return coveredKernel();
    auto group = buildCastGroup(ctx, k, in[0], out[0]);
    if (!group)
      return group.status();
    if (*group)
      return std::move(**group);
  }
  return buildCopy(ctx, op, in[0], out[0]);
}

// fill
Expected<RunFn> buildFill(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseFill(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(0, 1));
  const Tensor *y = out[0];
  const double v = p->value;
  return launch([=]() { return fill(c->ref(y), countOf(*y), v, s); });
}

// dropout, dropout_backward
Expected<RunFn> buildDropout(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseDropout(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0], *it = in.size() > 1 ? in[1] : nullptr;
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {x, y}));
  DropoutGeometry g;
  if (reordered(ctx, y)) {
    g.channelsLast = true;
    g.N = y->shape(0), g.C = y->shape(1), g.H = y->shape(2), g.W = y->shape(3);
  }
  const plan::DropoutParams d = *p;
  if (d.perSample && y->shape_size() > 0 && y->shape(0) > 0)
    g.group = std::max<int64_t>(1, countOf(*y) / y->shape(0));
  return launch([=]() {
    return dropout(c->ref(x), c->ref(y), countOf(*y), it ? c->ints(it) : nullptr, d.ratio, d.seed, d.salt, g, s);
  });
}

// concat, split
Expected<RunFn> buildConcatOrSplit(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  auto axis = plan::parseAxis(k, 0);
  if (!axis)
    return axis.status();
  const bool isConcat = opOf(k) == OpId::Concat;
  if (in.empty() || out.empty())
    return Status::error(op + " needs operands");
  const Tensor *whole = isConcat ? out.at(0) : in.at(0);
  const std::vector<const Tensor *> parts = isConcat ? in : out;
  const Shape ws = shapeOf(*whole);
  auto ax = shape::normalizeAxis(*axis, int64_t(ws.size()));
  if (!ax)
    return Status::error("axis out of range");
  for (const Tensor *t : parts) {
    if (t->dtype() != whole->dtype())
      return Status::error(op + " operands must share one dtype");
    if (ctx.channelsLast(t) != ctx.channelsLast(whole))
      return layoutError(op, "operands in different layouts");
  }
  // In storage order: channels-last maps the axis (C is innermost).
  const Shape ps = physicalShape(ctx, *whole);
  const size_t pax = size_t(physicalAxis(ctx, *whole, int(*ax)));
  const int logicalAxis = int(*ax);
  const int64_t outer = span(ps, 0, pax);
  const uint64_t innerBytes = uint64_t(span(ps, pax + 1, ps.size())) * plan::dtypeSize(whole->dtype());
  const uint64_t rowBytes = uint64_t(ps[pax]) * innerBytes;
  return RunFn([=]() -> Status {
    uint64_t at = 0;
    for (const Tensor *t : parts) {
      const uint64_t chunk = uint64_t(t->shape(logicalAxis)) * innerBytes;
      if (chunk > 0 && outer > 0) {
        if (isConcat)
          CASTOR_CUDA(cudaMemcpy2DAsync(c->ptr(whole) + at, rowBytes, c->ptr(t), chunk, chunk, size_t(outer),
                                        cudaMemcpyDeviceToDevice, s));
        else
          CASTOR_CUDA(cudaMemcpy2DAsync(c->ptr(t), chunk, c->ptr(whole) + at, rowBytes, chunk, size_t(outer),
                                        cudaMemcpyDeviceToDevice, s));
      }
      at += chunk;
    }
    return Status::ok();
  });
}

} // namespace castor::cuda::own
