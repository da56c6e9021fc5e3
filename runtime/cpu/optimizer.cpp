// The CPU reference's optimizers and what drives them: sgd_update and adamw_update (as
// torch.optim.SGD and AdamW; with the overflow flag, skipped on overflow), lr_schedule, increment;
// dynamic loss scaling with the semantics of PyTorch's GradScaler (unscale_gradients,
// update_loss_scale), gradient clipping as torch.nn.utils.clip_grad_norm_, per-tensor gradient
// statistics.
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

// sgd_update (param, grad, momentum_buffer, lr [] [, step i64 []]) -> (param, momentum_buffer),
// in place, as torch.optim.SGD:
//   g = grad + weight_decay * param
//   momentum != 0: buf = g on the first step (step == 1), else momentum * buf + (1 - dampening) g;
//                  g = g + momentum * buf (nesterov) or buf
//   param -= lr * g
Expected<RunFn> buildSgd(const KernelContext &c) {
  auto p = plan::parseSgd(c.kernel);
  if (!p)
    return p.status();
  if (p->momentum != 0 && c.in.size() < 5)
    return Status::error("sgd with momentum needs the step counter as its 5th input");
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::SgdParams a = *p;
  return RunFn([=]() {
    Values W = b->read(*in[0]), G = b->read(*in[1]);
    const double lr = scalar(b, in[3]);
    Values buf = a.momentum != 0 ? b->read(*in[2]) : Values();
    const bool first = a.momentum != 0 && scalarInt(b, in[4]) <= 1;
    for (size_t i = 0; i < W.size(); ++i) {
      double g = G[i] + a.weightDecay * W[i];
      if (a.momentum != 0) {
        buf[i] = first ? g : a.momentum * buf[i] + (1 - a.dampening) * g;
        g = a.nesterov ? g + a.momentum * buf[i] : buf[i];
      }
      W[i] -= lr * g;
    }
    b->write(*out[0], W);
    if (a.momentum != 0)
      b->write(*out[1], buf);
    return Status::ok();
  });
}

// adamw_update (param, grad, exp_avg, exp_avg_sq, lr [], step i64 []) -> (param, exp_avg,
// exp_avg_sq), in place, as torch.optim.AdamW:
//   param *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   param -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
Expected<RunFn> buildAdamW(const KernelContext &c) {
  auto p = plan::parseAdamW(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::AdamWParams a = *p;
  return RunFn([=]() {
    Values W = b->read(*in[0]), G = b->read(*in[1]), M = b->read(*in[2]), V = b->read(*in[3]);
    const double lr = scalar(b, in[4]);
    const double step = double(scalarInt(b, in[5]));
    const double bc1 = 1 - std::pow(a.beta1, step), bc2Sqrt = std::sqrt(1 - std::pow(a.beta2, step));
    const double stepSize = lr / bc1;
    for (size_t i = 0; i < W.size(); ++i) {
      W[i] *= 1 - lr * a.weightDecay;
      M[i] = a.beta1 * M[i] + (1 - a.beta1) * G[i];
      V[i] = a.beta2 * V[i] + (1 - a.beta2) * G[i] * G[i];
      W[i] -= stepSize * M[i] / (std::sqrt(V[i]) / bc2Sqrt + a.eps);
    }
    b->write(*out[0], W);
    b->write(*out[1], M);
    b->write(*out[2], V);
    return Status::ok();
  });
}

double learningRate(const plan::LrScheduleParams &p, int64_t it) {
  using Kind = plan::LrScheduleParams::Kind;
  if (it < p.warmupSteps)
    return p.baseLr * double(it + 1) / double(p.warmupSteps);
  switch (p.kind) {
  case Kind::Constant:
    return p.baseLr;
  case Kind::Step:
    return p.baseLr * std::pow(p.gamma, double(it / p.stepSize));
  case Kind::Cosine: {
    const double T = double(p.totalSteps - p.warmupSteps);
    if (T <= 0)
      return p.minLr;
    const double t = std::min(std::max(double(it - p.warmupSteps), 0.0), T);
    const double pi = 3.14159265358979323846;
    return p.minLr + (p.baseLr - p.minLr) * (1 + std::cos(pi * t / T)) / 2;
  }
  }
  return p.baseLr;
}

// lr_schedule (iteration i64 []) -> lr [].
Expected<RunFn> buildLrSchedule(const KernelContext &c) {
  auto p = plan::parseLrSchedule(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *it = c.in[0], *lr = c.out[0];
  const plan::LrScheduleParams a = *p;
  return RunFn([=]() {
    b->write(*lr, Values{learningRate(a, scalarInt(b, it))});
    return Status::ok();
  });
}

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

const KernelTable &optimizerKernels() {
  static const KernelTable table = {
      {OpId::UnscaleGradients, buildUnscaleGradients},
      {OpId::ClipGradNorm, buildClipGradNorm},
      {OpId::UpdateLossScale, buildUpdateLossScale},
      {OpId::GradientStats, buildGradientStats},
      {OpId::Increment, buildIncrement},
      {OpId::LrSchedule, buildLrSchedule},
      {OpId::SgdUpdate, skippedOnOverflow(buildSgd, sgdHasFlag)},
      {OpId::AdamwUpdate, skippedOnOverflow(buildAdamW, adamwHasFlag)},
  };
  return table;
}

} // namespace castor::cpu
