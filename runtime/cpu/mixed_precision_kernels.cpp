// The CPU reference kernels of mixed-precision training: dynamic loss scaling with the semantics
// of PyTorch's GradScaler (unscale_gradients, update_loss_scale), gradient clipping as
// torch.nn.utils.clip_grad_norm_, per-tensor gradient statistics, and the overflow-flag forms of
// sgd_update, adamw_update and increment.
//
// Same rules as the other kernel files: operands are read into double precision, sums accumulate
// in fp64 in a fixed order, each result is rounded once into its output's dtype, and every kernel
// reads an input before it writes the output that updates it in place.

#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace castor::cpu {
namespace {

// unscale_gradients (g_0..g_{n-1}, scale f32 []) -> (g_0..g_{n-1} in place, found_inf f32 []).
// inv = 1/scale in double, rounded to f32 (as GradScaler); g *= inv, rounded into g's dtype;
// found_inf = 1 when any of the stored results is not finite, else 0.
Expected<RunFn> buildUnscaleGradients(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  if (c.in.size() < 2 || c.out.size() != c.in.size())
    return Status::error("unscale_gradients takes n gradients and the scale, and produces n gradients and found_inf");
  Memory *b = &c.backend;
  const size_t n = c.in.size() - 1;
  std::vector<const Tensor *> grads(c.in.begin(), c.in.begin() + long(n));
  const Tensor *scaleT = c.in[n], *foundT = c.out[n];
  return RunFn([=]() {
    const double inv = double(float(1.0 / scalar(b, scaleT)));
    bool found = false;
    for (const Tensor *g : grads) {
      Values v = b->read(*g);
      for (double &e : v)
        e *= inv;
      b->write(*g, v);
      // Non-finite after rounding into the gradient's dtype (an f16 product may overflow).
      for (double e : b->read(*g))
        found = found || !std::isfinite(e);
    }
    b->write(*foundT, Values{found ? 1.0 : 0.0});
    return Status::ok();
  });
}

// clip_grad_norm (g_0..g_{n-1}) -> (g_0..g_{n-1} in place, total_norm f32 []), as
// torch.nn.utils.clip_grad_norm_: total = sqrt(sum of g^2 over every g) accumulated in double,
// coef = max_norm / (total + 1e-6), every g *= coef when coef < 1.
Expected<RunFn> buildClipGradNorm(const KernelContext &c) {
  auto p = plan::parseClipGradNorm(c.kernel);
  if (!p)
    return p.status();
  if (c.in.empty() || c.out.size() != c.in.size() + 1)
    return Status::error("clip_grad_norm takes n gradients and produces n gradients and total_norm");
  Memory *b = &c.backend;
  const std::vector<const Tensor *> grads = c.in;
  const Tensor *totalT = c.out.back();
  const double maxNorm = p->maxNorm;
  return RunFn([=]() {
    std::vector<Values> values;
    values.reserve(grads.size());
    double sumSq = 0.0;
    for (const Tensor *g : grads) {
      values.push_back(b->read(*g));
      for (double e : values.back())
        sumSq += e * e;
    }
    const double total = std::sqrt(sumSq);
    const double coef = maxNorm / (total + 1e-6);
    if (coef < 1.0)
      for (size_t i = 0; i < grads.size(); ++i) {
        for (double &e : values[i])
          e *= coef;
        b->write(*grads[i], values[i]);
      }
    b->write(*totalT, Values{total});
    return Status::ok();
  });
}

// update_loss_scale (scale f32 [], growth_tracker i64 [], found_inf f32 []) -> (scale,
// growth_tracker) in place: on an overflow scale *= backoff and tracker = 0; otherwise
// tracker += 1, and when it reaches interval, scale *= growth and tracker = 0. No clamping.
Expected<RunFn> buildUpdateLossScale(const KernelContext &c) {
  auto p = plan::parseUpdateLossScale(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *scaleT = c.in[0], *trackerT = c.in[1], *foundT = c.in[2];
  const Tensor *scaleOut = c.out[0], *trackerOut = c.out[1];
  const plan::UpdateLossScaleParams a = *p;
  return RunFn([=]() {
    double scale = scalar(b, scaleT);
    int64_t tracker = scalarInt(b, trackerT);
    const bool found = scalar(b, foundT) != 0.0;
    if (found) {
      scale *= a.backoff;
      tracker = 0;
    } else if (++tracker == a.interval) {
      scale *= a.growth;
      tracker = 0;
    }
    b->write(*scaleOut, Values{scale});
    b->writeInts(*trackerOut, {tracker});
    return Status::ok();
  });
}

// gradient_stats (g) -> f32 [3]: mean |g| and max |g| over the finite elements (0 when there
// are none), and the number of non-finite elements.
Expected<RunFn> buildGradientStats(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *g = c.in[0], *y = c.out[0];
  return RunFn([=]() {
    double sum = 0.0, max = 0.0;
    int64_t finite = 0, nonFinite = 0;
    for (double e : b->read(*g)) {
      if (!std::isfinite(e)) {
        ++nonFinite;
        continue;
      }
      const double m = std::fabs(e);
      sum += m;
      max = std::max(max, m);
      ++finite;
    }
    b->write(*y, Values{finite ? sum / double(finite) : 0.0, max, double(nonFinite)});
    return Status::ok();
  });
}

// increment (counter i64 [] [, flag f32 []]) -> counter (in place): + 1, with a flag only when
// it is zero (when = "clear") or nonzero (when = "set").
Expected<RunFn> buildIncrement(const KernelContext &c) {
  auto p = plan::parseIncrement(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  const Tensor *flag = c.in.size() > 1 ? c.in[1] : nullptr;
  const bool whenSet = p->whenSet;
  return RunFn([=]() {
    if (flag && (scalar(b, flag) != 0.0) != whenSet)
      return Status::ok(); // in place: the counter keeps its value
    b->writeInts(*y, {scalarInt(b, x) + 1});
    return Status::ok();
  });
}

// sgd_update and adamw_update with the overflow flag found_inf (f32 []) as an extra last input:
// the optimizer of the training kernels runs when the flag is zero; when it is nonzero nothing is
// written, so the parameter and every buffer keep their bytes. Without the flag, the optimizer
// unchanged.
Builder skippedOnOverflow(Expected<RunFn> (*optimizer)(const KernelContext &), bool (*hasFlag)(const KernelContext &)) {
  return [optimizer, hasFlag](const KernelContext &c) -> Expected<RunFn> {
    if (!hasFlag(c))
      return optimizer(c);
    KernelContext plain{c.backend, c.kernel, c.in, c.out};
    plain.in.pop_back();
    auto run = optimizer(plain);
    if (!run)
      return run.status();
    Memory *b = &c.backend;
    const Tensor *found = c.in.back();
    const RunFn update = std::move(*run);
    return RunFn([=]() { return scalar(b, found) != 0.0 ? Status::ok() : update(); });
  };
}

// sgd_update: (param, grad, buf, lr [, step], found_inf); the flag is the last input when it is
// not an i64 (the step counter is).
bool sgdHasFlag(const KernelContext &c) {
  return c.in.size() == 6 || (c.in.size() == 5 && c.in[4]->dtype() != plan::I64);
}
// adamw_update: (param, grad, exp_avg, exp_avg_sq, lr, step, found_inf).
bool adamwHasFlag(const KernelContext &c) { return c.in.size() == 7; }

} // namespace

const KernelTable &mixedPrecisionKernels() {
  static const KernelTable table = {
      {OpId::UnscaleGradients, buildUnscaleGradients},
      {OpId::ClipGradNorm, buildClipGradNorm},
      {OpId::UpdateLossScale, buildUpdateLossScale},
      {OpId::GradientStats, buildGradientStats},
      {OpId::Increment, buildIncrement},
      {OpId::SgdUpdate, skippedOnOverflow(buildSgdUpdate, sgdHasFlag)},
      {OpId::AdamwUpdate, skippedOnOverflow(buildAdamwUpdate, adamwHasFlag)},
  };
  return table;
}

} // namespace castor::cpu
