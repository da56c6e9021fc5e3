// The unary element-wise ops' functions in double, shared by their kernels (elementwise.cpp) and
// by batch_norm_apply (batch_norm.cpp), whose clip must compute as the clip op.
#pragma once

#include <algorithm>
#include <cmath>

namespace castor::cpu {

struct Relu {
  double operator()(double v) const { return v > 0 ? v : (std::isnan(v) ? v : 0.0); }
};
struct Sigmoid {
  double operator()(double v) const { return 1.0 / (1.0 + std::exp(-v)); }
};
struct Erf {
  double operator()(double v) const { return std::erf(v); }
};
struct Gelu { // x Phi(x), or PyTorch's tanh approximation
  bool tanhForm;
  double operator()(double v) const {
    if (tanhForm)
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
};
struct Clip {
  double lo, hi;
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return std::min(std::max(v, lo), hi);
  }
};
struct HardSigmoid {
  double alpha, beta;
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return std::min(std::max(alpha * v + beta, 0.0), 1.0);
  }
};
struct HardSwish { // as PyTorch: x relu6(x + 3) / 6
  double operator()(double v) const {
    if (std::isnan(v))
      return v;
    return v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
  }
};

} // namespace castor::cpu
