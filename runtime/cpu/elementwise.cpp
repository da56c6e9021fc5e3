// Element-wise kernels of the CPU reference, each forward beside its backward: the unary ops
// (relu, sigmoid, clip, hard_sigmoid, hard_swish, erf, gelu) and their backward ops, add and mul
// with numpy broadcasting, copies and casts (identity, cast, reshape, flatten), dropout and
// dropout_backward, fill.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "cpu/unary_functors.h"
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

// Unary elementwise kernel in double; make(kernel) parses the attributes into the functor.
template <typename Make> Builder unary(Make make) {
  return [make](const KernelContext &c) -> Expected<RunFn> {
    auto f = make(c.kernel);
    if (!f)
      return f.status();
    return unaryRun(&c.backend, c.in[0], c.out[0], *f);
  };
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

// (dy, saved) -> dx = f(dy, saved) elementwise, chunk by chunk; make(kernel) parses the
// attributes into the functor.
template <typename Make> Builder elementwiseBackward(Make make) {
  return [make](const KernelContext &c) -> Expected<RunFn> {
    auto f = make(c.kernel);
    if (!f)
      return f.status();
    Memory *b = &c.backend;
    const Tensor *dy = c.in[0], *s = c.in[1], *dx = c.out[0];
    return sameShapeBinaryRun(b, dy, s, dx, *f);
  };
}

struct ReluBackward {
  double operator()(double dy, double y) const { return y > 0 ? dy : 0.0; }
};
struct SigmoidBackward {
  double operator()(double dy, double y) const { return dy * y * (1.0 - y); }
};
struct ClipBackward {
  double lo, hi;
  double operator()(double dy, double x) const { return (x >= lo && x <= hi) ? dy : 0.0; }
};
struct HardSigmoidBackward {
  double alpha, beta;
  double operator()(double dy, double x) const {
    const double z = alpha * x + beta;
    return (z > 0.0 && z < 1.0) ? dy * alpha : 0.0;
  }
};
struct HardSwishBackward { // PyTorch's hardswish_backward, boundaries included
  double operator()(double dy, double x) const {
    if (x < -3.0)
      return 0.0;
    return x <= 3.0 ? dy * (x / 3.0 + 0.5) : dy;
  }
};

struct ErfBackward {
  double operator()(double dy, double x) const { return dy * (2.0 / std::sqrt(M_PI)) * std::exp(-x * x); }
};

struct GeluBackward {
  bool tanhForm;
  double operator()(double dy, double x) const {
    if (tanhForm) {
      const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
      return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x));
    }
    const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))), pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    return dy * (cdf + x * pdf);
  }
};

Expected<GeluBackward> geluBackward(const Kernel &k) {
  auto p = plan::parseGelu(k);
  if (!p)
    return p.status();
  return GeluBackward{p->tanh};
}

Expected<ErfBackward> erfBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return ErfBackward{};
}

Expected<ReluBackward> reluBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return ReluBackward{};
}

Expected<SigmoidBackward> sigmoidBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return SigmoidBackward{};
}

Expected<ClipBackward> clipBackward(const Kernel &k) {
  auto p = plan::parseClip(k);
  if (!p)
    return p.status();
  return ClipBackward{p->min ? *p->min : -std::numeric_limits<double>::infinity(),
                      p->max ? *p->max : std::numeric_limits<double>::infinity()};
}

Expected<HardSigmoidBackward> hardSigmoidBackward(const Kernel &k) {
  auto p = plan::parseHardSigmoid(k);
  if (!p)
    return p.status();
  return HardSigmoidBackward{p->alpha, p->beta};
}

Expected<HardSwishBackward> hardSwishBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return HardSwishBackward{};
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
  static const KernelTable table = {
      {OpId::Relu, unary([](const Kernel &k) -> Expected<Relu> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Relu{};
       })},
      {OpId::Sigmoid, unary([](const Kernel &k) -> Expected<Sigmoid> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Sigmoid{};
       })},
      {OpId::Clip, unary([](const Kernel &k) -> Expected<Clip> {
         auto p = plan::parseClip(k);
         if (!p)
           return p.status();
         return Clip{p->min ? *p->min : -std::numeric_limits<double>::infinity(),
                     p->max ? *p->max : std::numeric_limits<double>::infinity()};
       })},
      {OpId::HardSigmoid, unary([](const Kernel &k) -> Expected<HardSigmoid> {
         auto p = plan::parseHardSigmoid(k);
         if (!p)
           return p.status();
         return HardSigmoid{p->alpha, p->beta};
       })},
      {OpId::HardSwish, unary([](const Kernel &k) -> Expected<HardSwish> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return HardSwish{};
       })},
      {OpId::Erf, unary([](const Kernel &k) -> Expected<Erf> {
         CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
         return Erf{};
       })},
      {OpId::Gelu, unary([](const Kernel &k) -> Expected<Gelu> {
         auto p = plan::parseGelu(k);
         if (!p)
           return p.status();
         return Gelu{p->tanh};
       })},
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
      {OpId::ReluBackward, elementwiseBackward(reluBackward)},
      {OpId::SigmoidBackward, elementwiseBackward(sigmoidBackward)},
      {OpId::ClipBackward, elementwiseBackward(clipBackward)},
      {OpId::HardSigmoidBackward, elementwiseBackward(hardSigmoidBackward)},
      {OpId::HardSwishBackward, elementwiseBackward(hardSwishBackward)},
      {OpId::ErfBackward, elementwiseBackward(erfBackward)},
      {OpId::GeluBackward, elementwiseBackward(geluBackward)},
      {OpId::Fill, buildFill},
  };
  return table;
}

} // namespace castor::cpu
