// What each element-wise op computes: its scalar formula and its derivative, once.
//
// Every unary element-wise op of the registry (ops.def's CASTOR_ELEMENTWISE_OP lines) is one
// struct here. The plan's attribute parser (op_attrs.h: parseElementwise), the validator's rule,
// the CPU reference kernel (in f64), the CUDA kernel (in the accumulation type, f32 for
// f16/bf16 data) and the rows of ops.md (checked by runtime.elementwise-documented) all come
// from it; the compiler's dialect declares the op and its gradient with one `defm` in
// ElementwiseOps.td, whose VJP emits `<op>_backward`(dy, saved).
//
// An op struct has
//   - `formula`, `derivative`: the text of ops.md's rows;
//   - `saved`: what `<op>_backward` receives besides dy, the forward's input x or output y;
//   - its attributes as fields with their defaults, listed by `attrs(visit)`;
//   - `check()`: nullptr, or why the attribute values are refused;
//   - `forward(x)` and `backward(dy, saved)`, templates over the arithmetic type (f32 or f64),
//     host and device.
// Plain C++ without protobuf: the CUDA kernels (.cu) include it.
#pragma once

// NVRTC compiles this text into generated kernels (cuda/kernels/fused_elementwise_source.h) and
// has no standard headers: the prelude there defines what it needs of <math.h>.
#ifndef __CUDACC_RTC__
#include <math.h>
#endif

#if defined(__CUDACC__)
#define CASTOR_HD __host__ __device__ __forceinline__
#else
#define CASTOR_HD inline
#endif

namespace castor::elementwise {

enum class Saved { Input, Output };

// The math functions of the formulas, one overload per arithmetic type (host and device).
namespace math {
CASTOR_HD float exp(float v) { return ::expf(v); }
CASTOR_HD double exp(double v) { return ::exp(v); }
CASTOR_HD float erf(float v) { return ::erff(v); }
CASTOR_HD double erf(double v) { return ::erf(v); }
CASTOR_HD float tanh(float v) { return ::tanhf(v); }
CASTOR_HD double tanh(double v) { return ::tanh(v); }
CASTOR_HD float log1p(float v) { return ::log1pf(v); }
CASTOR_HD double log1p(double v) { return ::log1p(v); }
// exp(v) - 1 without the cancellation near 0 (ELU's negative side).
CASTOR_HD float expm1(float v) { return ::expm1f(v); }
CASTOR_HD double expm1(double v) { return ::expm1(v); }
CASTOR_HD float sqrt(float v) { return ::sqrtf(v); }
CASTOR_HD double sqrt(double v) { return ::sqrt(v); }
template <class A> CASTOR_HD A abs(A v) { return v < A(0) ? -v : v; }
// log(1 + exp(v)) as max(v, 0) + log1p(exp(-|v|)): exp never overflows, and no digits are lost
// for large |v| (PyTorch's softplus switches to the identity above 20, which this equals there).
template <class A> CASTOR_HD A softplus(A v) { return (v > A(0) ? v : A(0)) + log1p(exp(-abs(v))); }
// 1 / (1 + exp(-v)) with exp of a non-positive argument only.
template <class A> CASTOR_HD A sigmoid(A v) {
  const A e = exp(-abs(v));
  return v >= A(0) ? A(1) / (A(1) + e) : e / (A(1) + e);
}
template <class A> CASTOR_HD bool isNan(A v) { return v != v; }
// min(max(v, lo), hi), NaN staying NaN.
template <class A> CASTOR_HD A clamp(A v, A lo, A hi) { return v < lo ? lo : (v > hi ? hi : v); }
} // namespace math

// Ops whose attributes need no check beyond their types.
struct AnyAttrs {
  const char *check() const { return nullptr; }
};

struct Relu : AnyAttrs {
  static constexpr const char *formula = "max(x, 0)";
  static constexpr const char *derivative = "dy where y > 0, else 0";
  static constexpr Saved saved = Saved::Output;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return x > A(0) ? x : (math::isNan(x) ? x : A(0)); }
  template <class A> CASTOR_HD A backward(A dy, A y) const { return y > A(0) ? dy : A(0); }
};

struct Sigmoid : AnyAttrs {
  static constexpr const char *formula = "1 / (1 + exp(-x))";
  static constexpr const char *derivative = "dy y (1 - y)";
  static constexpr Saved saved = Saved::Output;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return A(1) / (A(1) + math::exp(-x)); }
  template <class A> CASTOR_HD A backward(A dy, A y) const { return dy * y * (A(1) - y); }
};

// ReLU6 is clip with min 0 and max 6; an absent bound is infinite.
struct Clip : AnyAttrs {
  static constexpr const char *formula = "min(max(x, min), max)";
  static constexpr const char *derivative = "dy where min <= x <= max (inclusive), else 0";
  static constexpr Saved saved = Saved::Input;
  double min = -INFINITY, max = INFINITY;
  template <class V> void attrs(V &&visit) {
    visit("min", min);
    visit("max", max);
  }
  template <class A> CASTOR_HD A forward(A x) const {
    return math::isNan(x) ? x : A(math::clamp(double(x), min, max));
  }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    return (double(x) >= min && double(x) <= max) ? dy : A(0);
  }
};

// ONNX HardSigmoid's defaults; PyTorch's hardsigmoid exports alpha 1/6.
struct HardSigmoid {
  static constexpr const char *formula = "max(0, min(1, alpha x + beta))";
  static constexpr const char *derivative = "dy alpha where 0 < alpha x + beta < 1, else 0";
  static constexpr Saved saved = Saved::Input;
  double alpha = 0.2, beta = 0.5;
  template <class V> void attrs(V &&visit) {
    visit("alpha", alpha);
    visit("beta", beta);
  }
  const char *check() const { return isfinite(alpha) && isfinite(beta) ? nullptr : "alpha and beta must be finite"; }
  template <class A> CASTOR_HD A forward(A x) const { return math::clamp(A(alpha) * x + A(beta), A(0), A(1)); }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    const A z = A(alpha) * x + A(beta);
    return (z > A(0) && z < A(1)) ? dy * A(alpha) : A(0);
  }
};

// As PyTorch's hardswish and hardswish_backward, boundaries included.
struct HardSwish : AnyAttrs {
  static constexpr const char *formula = "x relu6(x + 3) / 6";
  static constexpr const char *derivative = "0 where x < -3, dy (x/3 + 1/2) where -3 <= x <= 3, dy where x > 3";
  static constexpr Saved saved = Saved::Input;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return x * math::clamp(x + A(3), A(0), A(6)) / A(6); }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    return x < A(-3) ? A(0) : (x <= A(3) ? dy * (x / A(3) + A(0.5)) : dy);
  }
};

struct Erf : AnyAttrs {
  static constexpr const char *formula = "erf(x)";
  static constexpr const char *derivative = "dy 2/sqrt(pi) exp(-x^2)";
  static constexpr Saved saved = Saved::Input;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return math::erf(x); }
  template <class A> CASTOR_HD A backward(A dy, A x) const { return dy * A(1.1283791670955126) * math::exp(-x * x); }
};

// ONNX LeakyRelu's and PyTorch's default slope 0.01.
struct LeakyRelu {
  static constexpr const char *formula = "x where x >= 0, else alpha x";
  static constexpr const char *derivative = "dy where x >= 0, else alpha dy";
  static constexpr Saved saved = Saved::Input;
  double alpha = 0.01;
  template <class V> void attrs(V &&visit) { visit("alpha", alpha); }
  const char *check() const { return isfinite(alpha) ? nullptr : "alpha must be finite"; }
  template <class A> CASTOR_HD A forward(A x) const { return x >= A(0) ? x : A(alpha) * x; }
  template <class A> CASTOR_HD A backward(A dy, A x) const { return x >= A(0) ? dy : A(alpha) * dy; }
};

// ONNX Elu; PyTorch's elu: the gradient from the input, as PyTorch's elu_backward with
// is_result=false (dy alpha exp(x) where x <= 0).
struct Elu {
  static constexpr const char *formula = "x where x > 0, else alpha (exp(x) - 1)";
  static constexpr const char *derivative = "dy where x > 0, else dy alpha exp(x)";
  static constexpr Saved saved = Saved::Input;
  double alpha = 1.0;
  template <class V> void attrs(V &&visit) { visit("alpha", alpha); }
  const char *check() const { return isfinite(alpha) ? nullptr : "alpha must be finite"; }
  template <class A> CASTOR_HD A forward(A x) const { return x > A(0) ? x : A(alpha) * math::expm1(x); }
  template <class A> CASTOR_HD A backward(A dy, A x) const { return x > A(0) ? dy : dy * A(alpha) * math::exp(x); }
};

// ONNX Selu's defaults are PyTorch's selu constants rounded to float (ONNX attributes are f32).
struct Selu {
  static constexpr const char *formula = "gamma x where x > 0, else gamma alpha (exp(x) - 1)";
  static constexpr const char *derivative = "dy gamma where x > 0, else dy gamma alpha exp(x)";
  static constexpr Saved saved = Saved::Input;
  double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  template <class V> void attrs(V &&visit) {
    visit("alpha", alpha);
    visit("gamma", gamma);
  }
  const char *check() const { return isfinite(alpha) && isfinite(gamma) ? nullptr : "alpha and gamma must be finite"; }
  template <class A> CASTOR_HD A forward(A x) const {
    return x > A(0) ? A(gamma) * x : A(gamma) * A(alpha) * math::expm1(x);
  }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    return x > A(0) ? dy * A(gamma) : dy * A(gamma) * A(alpha) * math::exp(x);
  }
};

// ONNX Celu; PyTorch's celu (elu with input scale 1/alpha).
struct Celu {
  static constexpr const char *formula = "x where x > 0, else alpha (exp(x / alpha) - 1)";
  static constexpr const char *derivative = "dy where x > 0, else dy exp(x / alpha)";
  static constexpr Saved saved = Saved::Input;
  double alpha = 1.0;
  template <class V> void attrs(V &&visit) { visit("alpha", alpha); }
  const char *check() const {
    return isfinite(alpha) && alpha != 0 ? nullptr : "alpha must be finite and non-zero";
  }
  template <class A> CASTOR_HD A forward(A x) const { return x > A(0) ? x : A(alpha) * math::expm1(x / A(alpha)); }
  template <class A> CASTOR_HD A backward(A dy, A x) const { return x > A(0) ? dy : dy * math::exp(x / A(alpha)); }
};

// ONNX Softplus; PyTorch's softplus (beta 1), whose gradient dy exp(x) / (exp(x) + 1) is dy sigmoid(x).
struct Softplus : AnyAttrs {
  static constexpr const char *formula = "log(1 + exp(x)) = max(x, 0) + log1p(exp(-abs(x)))";
  static constexpr const char *derivative = "dy sigmoid(x)";
  static constexpr Saved saved = Saved::Input;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return math::softplus(x); }
  template <class A> CASTOR_HD A backward(A dy, A x) const { return dy * math::sigmoid(x); }
};

// ONNX Mish; PyTorch's mish and mish_backward.
struct Mish : AnyAttrs {
  static constexpr const char *formula = "x tanh(softplus(x))";
  static constexpr const char *derivative = "dy (t + x sigmoid(x) (1 - t^2)), t = tanh(softplus(x))";
  static constexpr Saved saved = Saved::Input;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return x * math::tanh(math::softplus(x)); }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    const A t = math::tanh(math::softplus(x));
    return dy * (t + x * math::sigmoid(x) * (A(1) - t * t));
  }
};

// ONNX Softsign; PyTorch's softsign.
struct Softsign : AnyAttrs {
  static constexpr const char *formula = "x / (1 + abs(x))";
  static constexpr const char *derivative = "dy / (1 + abs(x))^2";
  static constexpr Saved saved = Saved::Input;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return x / (A(1) + math::abs(x)); }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    const A d = A(1) + math::abs(x);
    return dy / (d * d);
  }
};

// ONNX Sqrt (ReduceL2's root); PyTorch's sqrt, whose gradient dy / (2 y) is infinite at 0.
struct Sqrt : AnyAttrs {
  static constexpr const char *formula = "sqrt(x) (NaN where x < 0)";
  static constexpr const char *derivative = "dy / (2 y)";
  static constexpr Saved saved = Saved::Output;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return math::sqrt(x); }
  template <class A> CASTOR_HD A backward(A dy, A y) const { return dy / (A(2) * y); }
};

// ONNX Reciprocal, and the divisor of Div by a computed tensor (imported as a * reciprocal(b):
// F.normalize's division by the norm); PyTorch's reciprocal, whose gradient -dy / x^2 is -dy y^2.
struct Reciprocal : AnyAttrs {
  static constexpr const char *formula = "1 / x";
  static constexpr const char *derivative = "-dy y^2";
  static constexpr Saved saved = Saved::Output;
  template <class V> void attrs(V &&) {}
  template <class A> CASTOR_HD A forward(A x) const { return A(1) / x; }
  template <class A> CASTOR_HD A backward(A dy, A y) const { return -dy * y * y; }
};

// x Phi(x), or with `tanh` PyTorch's approximation (gelu(approximate="tanh")).
struct Gelu : AnyAttrs {
  static constexpr const char *formula =
      "x Phi(x) = x (1 + erf(x / sqrt(2))) / 2; with tanh: x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2";
  static constexpr const char *derivative = "dy (Phi(x) + x phi(x)), or the derivative of the tanh form";
  static constexpr Saved saved = Saved::Input;
  bool tanh = false;
  template <class V> void attrs(V &&visit) { visit("tanh", tanh); }
  template <class A> CASTOR_HD A forward(A x) const {
    if (tanh)
      return A(0.5) * x * (A(1) + math::tanh(A(0.7978845608028654) * (x + A(0.044715) * x * x * x)));
    return A(0.5) * x * (A(1) + math::erf(x * A(0.7071067811865476)));
  }
  template <class A> CASTOR_HD A backward(A dy, A x) const {
    if (tanh) {
      const A k = A(0.7978845608028654), t = math::tanh(k * (x + A(0.044715) * x * x * x));
      return dy * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * k * (A(1) + A(3 * 0.044715) * x * x));
    }
    const A cdf = A(0.5) * (A(1) + math::erf(x * A(0.7071067811865476)));
    const A pdf = A(0.3989422804014327) * math::exp(A(-0.5) * x * x); // 1 / sqrt(2 pi)
    return dy * (cdf + x * pdf);
  }
};

} // namespace castor::elementwise
