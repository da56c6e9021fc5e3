// Element-wise kernels of the CPU reference, each forward beside its backward: every unary op of
// ops.def's CASTOR_ELEMENTWISE_OP lines and its gradient, from elementwise_ops.h's formulas, add and mul
// with numpy broadcasting, copies and casts (identity, cast, reshape, flatten), dropout and
// dropout_backward, fill.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "plan/elementwise_ops.h"
#include "plan/op_attrs.h"
#include "weights/dropout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace castor::cpu {
namespace {

// Elementwise y = f(x), chunk by chunk (an in-place update reads each chunk before writing it).
template <typename F> RunFn unaryRun(Memory *b, const Tensor *x, const Tensor *y, F f) {
  return [=]() {
    parallelChunks(countOf(*y), 4.0, [&](int64_t i0, int64_t n) {
      double v[kChunk];
      b->readRange(*x, i0, n, v);
      for (int64_t i = 0; i < n; ++i)
        v[i] = f(v[i]);
      b->writeRange(*y, i0, n, v);
    });
    return Status::ok();
  };
}

// A unary element-wise op of elementwise_ops.h in double, y = op.forward(x).
template <class Op> Expected<RunFn> buildUnary(const KernelContext &c) {
  auto op = plan::parseElementwise<Op>(c.kernel);
  if (!op)
    return op.status();
  return unaryRun(&c.backend, c.in[0], c.out[0], [f = *op](double v) { return f.forward(v); });
}

// Its gradient, dx = op.backward(dy, saved).
template <class Op> Expected<RunFn> buildUnaryBackward(const KernelContext &c) {
  auto op = plan::parseElementwise<Op>(c.kernel);
  if (!op)
    return op.status();
  return sameShapeBinaryRun(&c.backend, c.in[0], c.in[1], c.out[0],
                            [f = *op](double dy, double saved) { return f.backward(dy, saved); });
}

template <typename Op> Builder binary(Op op) {
  return [op](const KernelContext &c) -> Expected<RunFn> {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
    Memory *b = &c.backend;
    const Tensor *x = c.in[0], *y = c.in[1], *z = c.out[0];
    Shape out = shapeOf(*z);
    if (shapeOf(*x) == out && shapeOf(*y) == out)
      return sameShapeBinaryRun(b, x, y, z, op);
    auto ix = std::make_shared<std::vector<int64_t>>(broadcastIndex(shapeOf(*x), out));
    auto iy = std::make_shared<std::vector<int64_t>>(broadcastIndex(shapeOf(*y), out));
    return RunFn([=]() {
      Values a = b->read(*x), bb = b->read(*y);
      const int64_t *px = ix->data(), *py = iy->data();
      parallelChunks(int64_t(ix->size()), 4.0, [&](int64_t i0, int64_t n) {
        double r[kChunk];
        for (int64_t i = 0; i < n; ++i)
          r[i] = op(a[size_t(px[i0 + i])], bb[size_t(py[i0 + i])]);
        b->writeRange(*z, i0, n, r);
      });
      return Status::ok();
    });
  };
}

// Same-dtype byte copy (identity, reshape, flatten, dropout at inference).
RunFn byteCopy(Memory *b, const Tensor *x, const Tensor *y) {
  return [=]() {
    if (b->slot(*y) != b->slot(*x)) // a view (Tensor.view_of) already holds the bytes
      std::memmove(b->slot(*y), b->slot(*x), x->bytes());
    return Status::ok();
  };
}

Expected<RunFn> convertCopy(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  if (x->dtype() == y->dtype())
    return byteCopy(b, x, y);
  return RunFn([=]() {
    if (x->dtype() == plan::I64) {
      std::vector<int64_t> v = b->readInts(*x);
      Values d(v.begin(), v.end());
      b->write(*y, d);
      return Status::ok();
    }
    Values v = b->read(*x);
    if (y->dtype() == plan::I64) {
      for (double &e : v) {
        if (!std::isfinite(e) || e >= 9.2233720368547758e18 || e < -9.2233720368547758e18)
          return Status::error("cannot cast " + std::to_string(e) + " to i64");
        e = std::trunc(e);
      }
    }
    b->write(*y, v);
    return Status::ok();
  });
}

// dropout (x [, iteration]) -> y and dropout_backward (dy, iteration) -> dx: with an iteration,
// y = mask * x / (1 - ratio) (weights/dropout.h); without, the identity (inference).
Expected<RunFn> buildDropout(const KernelContext &c) {
  auto p = plan::parseDropout(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  const Tensor *it = c.in.size() > 1 ? c.in[1] : nullptr;
  const plan::DropoutParams d = *p;
  // Elements that share one draw: a whole sample for drop path, else one.
  const size_t group = d.perSample && y->shape_size() > 0 && y->shape(0) > 0
                           ? size_t(*plan::elementCount(*y) / y->shape(0))
                           : 1;
  return RunFn([=]() {
    Values v = b->read(*x);
    if (it) {
      const int64_t iteration = scalarInt(b, it);
      const double scale = d.ratio < 1.0 ? 1.0 / (1.0 - d.ratio) : 0.0;
      for (size_t e = 0; e < v.size(); ++e)
        v[e] = weights::dropoutKeeps(d.ratio, d.seed, d.salt, iteration, e / std::max<size_t>(group, 1)) ? v[e] * scale
                                                                                                         : 0.0;
    }
    b->write(*y, v);
    return Status::ok();
  });
}

// fill () -> y: every element = value.
Expected<RunFn> buildFill(const KernelContext &c) {
  auto p = plan::parseFill(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *y = c.out[0];
  const double v = p->value;
  return RunFn([=]() {
    b->write(*y, Values(size_t(countOf(*y)), v));
    return Status::ok();
  });
}

} // namespace

const KernelTable &elementwiseKernels() {
  static const KernelTable unary = {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                            \
  {OpId::id, buildUnary<elementwise::id>}, {OpId::id##Backward, buildUnaryBackward<elementwise::id>},
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  };
  static const KernelTable table = KernelTable{
      {OpId::Add, binary([](double a, double b) { return a + b; })},
      {OpId::Mul, binary([](double a, double b) { return a * b; })},
      {OpId::Flatten,
       [](const KernelContext &c) -> Expected<RunFn> {
         auto axis = plan::parseAxis(c.kernel, 1);
         if (!axis)
           return axis.status();
         return convertCopy(c);
       }},
      {OpId::Reshape,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Identity,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Cast,
       [](const KernelContext &c) -> Expected<RunFn> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
         return convertCopy(c);
       }},
      {OpId::Dropout, buildDropout},
      {OpId::DropoutBackward, buildDropout},
      {OpId::Fill, buildFill},
  }.merge(unary);
  return table;
}

} // namespace castor::cpu
