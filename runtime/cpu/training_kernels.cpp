// The CPU reference kernels of the training step: training-mode dropout, the backward kernels
// that the autodiff emits, the optimizers, the learning-rate schedule and the counters.
//
// Same rules as cpu_backend.cpp: operands are read into double precision, every sum accumulates
// in fp64 in a fixed loop order, each result is rounded once into its output's dtype. Every
// kernel reads all of its inputs before it writes an output, so in-place updates (an output with
// the id of an input) are safe.

#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"
#include "weights/dropout.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace castor::cpu {
namespace {

int64_t scalarInt(Memory *b, const Tensor *t) { return b->readInts(*t)[0]; }

// --- Dropout --------------------------------------------------------------------------------

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
  return RunFn([=]() {
    Values v = b->read(*x);
    if (it) {
      const int64_t iteration = scalarInt(b, it);
      const double scale = d.ratio < 1.0 ? 1.0 / (1.0 - d.ratio) : 0.0;
      for (size_t e = 0; e < v.size(); ++e)
        v[e] = weights::dropoutKeeps(d.ratio, d.seed, d.salt, iteration, e) ? v[e] * scale : 0.0;
    }
    b->write(*y, v);
    return Status::ok();
  });
}

// --- Convolution ----------------------------------------------------------------------------

struct ConvGeometry {
  int64_t N, C, H, W, K, Cg, R, S, P, Q, G, Kg;
  shape::Conv2dAttrs a;
  int64_t x(int64_t n, int64_t c, int64_t h, int64_t w) const { return ((n * C + c) * H + h) * W + w; }
  int64_t f(int64_t k, int64_t ci, int64_t r, int64_t s) const { return ((k * Cg + ci) * R + r) * S + s; }
  int64_t y(int64_t n, int64_t k, int64_t p, int64_t q) const { return ((n * K + k) * P + p) * Q + q; }
};

ConvGeometry convGeometry(const Shape &xs, const Shape &ws, const Shape &ys, const shape::Conv2dAttrs &a) {
  ConvGeometry g{xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], ws[3], ys[2], ys[3], a.groups, ws[0] / a.groups, a};
  return g;
}

// Visits every (input position, filter tap, output position) triple of a convolution once, in
// a fixed order.
template <typename F> void forEachTap(const ConvGeometry &g, F &&f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t grp = k / g.Kg;
      for (int64_t ci = 0; ci < g.Cg; ++ci) {
        const int64_t cc = grp * g.Cg + ci;
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s)
            for (int64_t op = 0; op < g.P; ++op) {
              const int64_t h = op * g.a.strides[0] - g.a.pads[0] + r * g.a.dilations[0];
              if (h < 0 || h >= g.H)
                continue;
              for (int64_t oq = 0; oq < g.Q; ++oq) {
                const int64_t w = oq * g.a.strides[1] - g.a.pads[1] + s * g.a.dilations[1];
                if (w < 0 || w >= g.W)
                  continue;
                f(g.x(n, cc, h, w), g.f(k, ci, r, s), g.y(n, k, op, oq));
              }
            }
      }
    }
}

// conv2d_backward_data (dy [N,K,P,Q], w [K,C/g,R,S]) -> dx [N,C,H,W].
Expected<RunFn> buildConvBackwardData(const KernelContext &c) {
  auto p = plan::parseConv2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *w = c.in[1], *dx = c.out[0];
  ConvGeometry g = convGeometry(shapeOf(*dx), shapeOf(*w), shapeOf(*dy), p->shape);
  return RunFn([=]() {
    Values DY = b->read(*dy), Wt = b->read(*w), DX(size_t(countOf(*dx)), 0.0);
    forEachTap(g, [&](int64_t xi, int64_t fi, int64_t yi) { DX[xi] += DY[yi] * Wt[fi]; });
    b->write(*dx, DX);
    return Status::ok();
  });
}

// conv2d_backward_filter (x [N,C,H,W], dy [N,K,P,Q]) -> dw [K,C/g,R,S].
Expected<RunFn> buildConvBackwardFilter(const KernelContext &c) {
  auto p = plan::parseConv2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *dy = c.in[1], *dw = c.out[0];
  ConvGeometry g = convGeometry(shapeOf(*x), shapeOf(*dw), shapeOf(*dy), p->shape);
  return RunFn([=]() {
    Values X = b->read(*x), DY = b->read(*dy), DW(size_t(countOf(*dw)), 0.0);
    forEachTap(g, [&](int64_t xi, int64_t fi, int64_t yi) { DW[fi] += DY[yi] * X[xi]; });
    b->write(*dw, DW);
    return Status::ok();
  });
}

// conv2d_backward_bias (dy [N,K,...]) -> db [K].
Expected<RunFn> buildConvBackwardBias(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *db = c.out[0];
  Shape s = shapeOf(*dy);
  const int64_t N = s[0], K = s[1], inner = span(s, 2, s.size());
  return RunFn([=]() {
    Values DY = b->read(*dy), DB(size_t(K), 0.0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i)
          DB[k] += DY[(n * K + k) * inner + i];
    b->write(*db, DB);
    return Status::ok();
  });
}

// reduce_sum_to (x) -> y: y broadcasts to x (numpy rules); y = scale * the sum of x over the
// broadcast dimensions.
Expected<RunFn> buildReduceSumTo(const KernelContext &c) {
  auto p = plan::parseReduceSumTo(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  std::vector<int64_t> map = broadcastIndex(shapeOf(*y), shapeOf(*x));
  const double scale = p->scale;
  return RunFn([=]() {
    Values X = b->read(*x), Y(size_t(countOf(*y)), 0.0);
    for (size_t i = 0; i < X.size(); ++i)
      Y[map[i]] += X[i];
    for (double &e : Y)
      e *= scale;
    b->write(*y, Y);
    return Status::ok();
  });
}

// --- Batch normalization ----------------------------------------------------------------------

// batch_norm_training_backward (dy, x, scale, batch_mean, batch_inv_std) -> (dx, dscale, dbias),
// with m = N * spatial elements per channel and xhat = (x - mean) * inv_std:
//   dbias = sum dy;  dscale = sum dy * xhat;
//   dx = scale * inv_std / m * (m * dy - dbias - xhat * dscale).
Expected<RunFn> buildBatchNormBackward(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  Shape xs = shapeOf(*in[1]);
  return RunFn([=]() {
    Values DY = b->read(*in[0]), X = b->read(*in[1]), gamma = b->read(*in[2]), mean = b->read(*in[3]),
           invStd = b->read(*in[4]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const double m = double(N * inner);
    Values DX(X.size()), dScale(size_t(C), 0.0), dBias(size_t(C), 0.0);
    for (int64_t ch = 0; ch < C; ++ch) {
      double sdy = 0, sdyx = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t at = (n * C + ch) * inner + i;
          sdy += DY[at];
          sdyx += DY[at] * (X[at] - mean[ch]) * invStd[ch];
        }
      dBias[ch] = sdy;
      dScale[ch] = sdyx;
      const double k = m > 0 ? gamma[ch] * invStd[ch] / m : 0.0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t at = (n * C + ch) * inner + i;
          const double xhat = (X[at] - mean[ch]) * invStd[ch];
          DX[at] = k * (m * DY[at] - sdy - xhat * sdyx);
        }
    }
    b->write(*out[0], DX);
    b->write(*out[1], dScale);
    b->write(*out[2], dBias);
    return Status::ok();
  });
}

// batch_norm_running_update (running_mean, running_var, batch_mean, batch_inv_std)
//   -> (running_mean, running_var), in place, PyTorch's convention:
//   running_mean = (1 - m) running_mean + m batch_mean
//   running_var  = (1 - m) running_var + m var_biased * count / (count - 1),
//   var_biased = 1 / inv_std^2 - epsilon (count 1: the biased variance).
Expected<RunFn> buildBatchNormRunningUpdate(const KernelContext &c) {
  auto p = plan::parseBatchNormRunningUpdate(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::BatchNormRunningUpdateParams a = *p;
  return RunFn([=]() {
    Values rm = b->read(*in[0]), rv = b->read(*in[1]), mean = b->read(*in[2]), invStd = b->read(*in[3]);
    const double correction = a.count > 1 ? double(a.count) / double(a.count - 1) : 1.0;
    for (size_t ch = 0; ch < rm.size(); ++ch) {
      const double varBiased = 1.0 / (invStd[ch] * invStd[ch]) - a.epsilon;
      rm[ch] = (1 - a.momentum) * rm[ch] + a.momentum * mean[ch];
      rv[ch] = (1 - a.momentum) * rv[ch] + a.momentum * varBiased * correction;
    }
    b->write(*out[0], rm);
    b->write(*out[1], rv);
    return Status::ok();
  });
}

// --- Elementwise backward ---------------------------------------------------------------------

// (dy, saved) -> dx = f(dy, saved) elementwise.
Builder elementwiseBackward(std::function<Expected<std::function<double(double, double)>>(const Kernel &)> make) {
  return [make](const KernelContext &c) -> Expected<RunFn> {
    auto f = make(c.kernel);
    if (!f)
      return f.status();
    Memory *b = &c.backend;
    const Tensor *dy = c.in[0], *s = c.in[1], *dx = c.out[0];
    auto fn = *f;
    return RunFn([=]() {
      Values DY = b->read(*dy), S = b->read(*s);
      for (size_t i = 0; i < DY.size(); ++i)
        DY[i] = fn(DY[i], S[i]);
      b->write(*dx, DY);
      return Status::ok();
    });
  };
}

using Binary = std::function<double(double, double)>;

Expected<Binary> reluBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return Binary([](double dy, double y) { return y > 0 ? dy : 0.0; });
}

Expected<Binary> sigmoidBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return Binary([](double dy, double y) { return dy * y * (1.0 - y); });
}

Expected<Binary> clipBackward(const Kernel &k) {
  auto p = plan::parseClip(k);
  if (!p)
    return p.status();
  const double lo = p->min ? *p->min : -std::numeric_limits<double>::infinity();
  const double hi = p->max ? *p->max : std::numeric_limits<double>::infinity();
  return Binary([lo, hi](double dy, double x) { return (x >= lo && x <= hi) ? dy : 0.0; });
}

// --- Pooling backward ---------------------------------------------------------------------

// max_pool2d_backward (dy, x) -> dx: each window's gradient goes to its first maximum in
// row-major window order (the element the forward selects), accumulating across overlapping
// windows. avg_pool2d_backward (dy) -> dx (shape from the output): each window's gradient is
// spread over its valid elements, divided by the forward's divisor.
Expected<RunFn> buildPoolBackward(const KernelContext &c, bool isMax) {
  auto p = plan::parsePool2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *x = isMax ? c.in[1] : nullptr, *dx = c.out[0];
  Shape xs = shapeOf(*dx), ys = shapeOf(*dy);
  auto a = p->shape;
  const bool includePad = p->countIncludePad;
  return RunFn([=]() {
    Values DY = b->read(*dy), X = isMax ? b->read(*x) : Values(), DX(size_t(countOf(*dx)), 0.0);
    const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
    for (int64_t nc = 0; nc < NC; ++nc)
      for (int64_t op = 0; op < P; ++op)
        for (int64_t oq = 0; oq < Q; ++oq) {
          const int64_t h0 = op * a.strides[0] - a.pads[0], w0 = oq * a.strides[1] - a.pads[1];
          const double g = DY[(nc * P + op) * Q + oq];
          if (isMax) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t at = -1;
            for (int64_t r = 0; r < a.kernel[0]; ++r) {
              const int64_t h = h0 + r * a.dilations[0];
              if (h < 0 || h >= H)
                continue;
              for (int64_t s = 0; s < a.kernel[1]; ++s) {
                const int64_t w = w0 + s * a.dilations[1];
                if (w < 0 || w >= W)
                  continue;
                const int64_t i = (nc * H + h) * W + w;
                if (at < 0 || X[i] > best || std::isnan(X[i])) { // as the forward: the last NaN wins
                  best = X[i];
                  at = i;
                }
              }
            }
            if (at >= 0)
              DX[at] += g;
            continue;
          }
          int64_t valid = 0;
          for (int64_t r = 0; r < a.kernel[0]; ++r) {
            const int64_t h = h0 + r;
            for (int64_t s = 0; s < a.kernel[1]; ++s) {
              const int64_t w = w0 + s;
              valid += (h >= 0 && h < H && w >= 0 && w < W) ? 1 : 0;
            }
          }
          int64_t divisor = valid;
          if (includePad) {
            int64_t h1 = std::min(h0 + a.kernel[0], H + a.pads[2]);
            int64_t w1 = std::min(w0 + a.kernel[1], W + a.pads[3]);
            divisor = (h1 - h0) * (w1 - w0);
          }
          if (divisor <= 0)
            continue;
          const double share = g / double(divisor);
          for (int64_t r = 0; r < a.kernel[0]; ++r) {
            const int64_t h = h0 + r;
            if (h < 0 || h >= H)
              continue;
            for (int64_t s = 0; s < a.kernel[1]; ++s) {
              const int64_t w = w0 + s;
              if (w >= 0 && w < W)
                DX[(nc * H + h) * W + w] += share;
            }
          }
        }
    b->write(*dx, DX);
    return Status::ok();
  });
}

// global_avg_pool_backward (dy [N,C,1...]) -> dx [N,C,d...] = dy / prod(d).
Expected<RunFn> buildGlobalAvgPoolBackward(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *dx = c.out[0];
  Shape xs = shapeOf(*dx);
  const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
  return RunFn([=]() {
    Values DY = b->read(*dy), DX(size_t(NC * inner));
    for (int64_t i = 0; i < NC; ++i)
      for (int64_t j = 0; j < inner; ++j)
        DX[i * inner + j] = DY[i] / double(inner);
    b->write(*dx, DX);
    return Status::ok();
  });
}

// --- Softmax and the loss ---------------------------------------------------------------------

// softmax_backward (dy, y) -> dx = y * (dy - sum(dy * y, axis)).
Expected<RunFn> buildSoftmaxBackward(const KernelContext &c) {
  auto axis = plan::parseAxis(c.kernel, -1);
  if (!axis)
    return axis.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *y = c.in[1], *dx = c.out[0];
  Shape s = shapeOf(*y);
  auto ax = shape::normalizeAxis(*axis, int64_t(s.size()));
  if (!ax)
    return Status::error("axis out of range");
  const int64_t outer = span(s, 0, size_t(*ax)), n = s[size_t(*ax)], inner = span(s, size_t(*ax) + 1, s.size());
  return RunFn([=]() {
    Values DY = b->read(*dy), Y = b->read(*y), DX(Y.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner + i;
          dot += DY[at] * Y[at];
        }
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner + i;
          DX[at] = Y[at] * (DY[at] - dot);
        }
      }
    b->write(*dx, DX);
    return Status::ok();
  });
}

// softmax_cross_entropy_backward (dloss, logits [N,C], labels [N]) -> dlogits [N,C]:
//   dlogits[n] = w_n * (softmax(logits[n]) - target_n),  target = (1 - s) onehot + s / C,
//   w_n = dloss / N (mean), dloss (sum), dloss[n] (none).
Expected<RunFn> buildSoftmaxCrossEntropyBackward(const KernelContext &c) {
  auto p = plan::parseSoftmaxCrossEntropy(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dloss = c.in[0], *x = c.in[1], *labels = c.in[2], *dx = c.out[0];
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const shape::Reduction reduction = p->reduction;
  return RunFn([=]() {
    Values X = b->read(*x), DL = b->read(*dloss), DX(X.size());
    std::vector<int64_t> y = b->readInts(*labels);
    for (int64_t n = 0; n < N; ++n) {
      if (y[n] < 0 || y[n] >= C)
        return Status::error("label " + std::to_string(y[n]) + " of sample " + std::to_string(n) +
                             " is outside [0, " + std::to_string(C) + ")");
      const double w = reduction == shape::Reduction::None ? DL[n]
                       : reduction == shape::Reduction::Mean ? DL[0] / double(N)
                                                             : DL[0];
      const double *row = X.data() + n * C;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < C; ++j)
        mx = std::max(mx, row[j]);
      double sum = 0;
      for (int64_t j = 0; j < C; ++j)
        sum += std::exp(row[j] - mx);
      const double logZ = mx + std::log(sum);
      for (int64_t j = 0; j < C; ++j) {
        const double target = (j == y[n] ? 1.0 - eps : 0.0) + eps / double(C);
        DX[n * C + j] = w * (std::exp(row[j] - logZ) - target);
      }
    }
    b->write(*dx, DX);
    return Status::ok();
  });
}

// count_correct (logits [N,C], labels [N]) -> [] i64: rows whose first maximum is the label.
Expected<RunFn> buildCountCorrect(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *labels = c.in[1], *out = c.out[0];
  const int64_t N = x->shape(0), C = x->shape(1);
  return RunFn([=]() {
    Values X = b->read(*x);
    std::vector<int64_t> y = b->readInts(*labels);
    int64_t correct = 0;
    for (int64_t n = 0; n < N; ++n) {
      int64_t best = 0;
      for (int64_t j = 1; j < C; ++j)
        if (X[n * C + j] > X[n * C + best])
          best = j;
      correct += (C > 0 && best == y[n]) ? 1 : 0;
    }
    b->write(*out, Values{double(correct)});
    return Status::ok();
  });
}

// split (x) -> (y0, y1, ...): consecutive slices of x along `axis`, each as thick as its output.
Expected<RunFn> buildSplit(const KernelContext &c) {
  auto axis = plan::parseAxis(c.kernel, 0);
  if (!axis)
    return axis.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0];
  auto out = c.out;
  Shape xs = shapeOf(*x);
  auto ax = shape::normalizeAxis(*axis, int64_t(xs.size()));
  if (!ax)
    return Status::error("axis out of range");
  const int64_t outer = span(xs, 0, size_t(*ax));
  const uint64_t innerBytes = uint64_t(span(xs, size_t(*ax) + 1, xs.size())) * plan::dtypeSize(x->dtype());
  return RunFn([=]() {
    std::vector<uint8_t> src(b->slot(*x), b->slot(*x) + x->bytes());
    const uint8_t *from = src.data();
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor *t : out) {
        const uint64_t chunk = uint64_t(t->shape(int(*ax))) * innerBytes;
        std::memcpy(b->slot(*t) + o * chunk, from, chunk);
        from += chunk;
      }
    return Status::ok();
  });
}

// --- Optimizers, schedule, counters -----------------------------------------------------------

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
    const double lr = b->read(*in[3])[0];
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
    const double lr = b->read(*in[4])[0];
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

// increment (counter i64 []) -> counter + 1, in place.
Expected<RunFn> buildIncrement(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  return RunFn([=]() {
    b->writeInts(*y, {scalarInt(b, x) + 1});
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

const std::map<std::string, Builder> &trainingBuilders() {
  static const std::map<std::string, Builder> table = {
      {"dropout", buildDropout},
      {"dropout_backward", buildDropout},
      {"conv2d_backward_data", buildConvBackwardData},
      {"conv2d_backward_filter", buildConvBackwardFilter},
      {"conv2d_backward_bias", buildConvBackwardBias},
      {"reduce_sum_to", buildReduceSumTo},
      {"batch_norm_training_backward", buildBatchNormBackward},
      {"batch_norm_running_update", buildBatchNormRunningUpdate},
      {"relu_backward", elementwiseBackward(reluBackward)},
      {"sigmoid_backward", elementwiseBackward(sigmoidBackward)},
      {"clip_backward", elementwiseBackward(clipBackward)},
      {"max_pool2d_backward", [](const KernelContext &c) { return buildPoolBackward(c, true); }},
      {"avg_pool2d_backward", [](const KernelContext &c) { return buildPoolBackward(c, false); }},
      {"global_avg_pool_backward", buildGlobalAvgPoolBackward},
      {"softmax_backward", buildSoftmaxBackward},
      {"softmax_cross_entropy_backward", buildSoftmaxCrossEntropyBackward},
      {"count_correct", buildCountCorrect},
      {"split", buildSplit},
      {"sgd_update", buildSgd},
      {"adamw_update", buildAdamW},
      {"increment", buildIncrement},
      {"lr_schedule", buildLrSchedule},
      {"fill", buildFill},
  };
  return table;
}

} // namespace castor::cpu
