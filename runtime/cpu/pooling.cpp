// Pooling on the CPU reference: max_pool2d, avg_pool2d, global_avg_pool and their backward ops.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace castor::cpu {
namespace {

Expected<RunFn> buildPool(const KernelContext &c, bool isMax) {
  auto p = plan::parsePool2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  Shape xs = shapeOf(*x), ys = shapeOf(*y);
  auto a = p->shape;
  bool includePad = p->countIncludePad;
  return RunFn([=]() {
    Values X = b->read(*x), Y(size_t(span(ys, 0, 4)));
    const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
    const auto rows = windowRanges(P, H, a.kernel[0], a.strides[0], a.pads[0], a.dilations[0]);
    const auto cols = windowRanges(Q, W, a.kernel[1], a.strides[1], a.pads[1], a.dilations[1]);
    const int64_t dh = a.dilations[0], dw = a.dilations[1];
    parallelFor(NC, 4.0 * double(X.size()), [&](int64_t nc) {
      const double *plane = X.data() + nc * H * W;
      for (int64_t op = 0; op < P; ++op) {
        const auto [r0, r1] = rows[size_t(op)];
        const int64_t h0 = op * a.strides[0] - a.pads[0];
        for (int64_t oq = 0; oq < Q; ++oq) {
          const auto [s0, s1] = cols[size_t(oq)];
          const int64_t w0 = oq * a.strides[1] - a.pads[1];
          double acc;
          if (isMax) {
            acc = -std::numeric_limits<double>::infinity();
            for (int64_t r = r0; r < r1; ++r) {
              const double *row = plane + (h0 + r * dh) * W + w0;
              for (int64_t s = s0; s < s1; ++s) {
                const double v = row[s * dw];
                // Branch-free (random data mispredicts): v wins when greater or NaN.
                acc = selectBits((v > acc) | (v != v), v, acc);
              }
            }
          } else {
            acc = 0.0;
            for (int64_t r = r0; r < r1; ++r) {
              const double *row = plane + (h0 + r * dh) * W + w0;
              for (int64_t s = s0; s < s1; ++s)
                acc += row[s * dw];
            }
            int64_t divisor = (r1 - r0) * (s1 - s0);
            if (includePad) {
              // As PyTorch: the window clipped to the padded input (not to the ceil-mode overhang).
              int64_t h1 = std::min(h0 + a.kernel[0], H + a.pads[2]);
              int64_t w1 = std::min(w0 + a.kernel[1], W + a.pads[3]);
              divisor = (h1 - h0) * (w1 - w0);
            }
            acc = divisor > 0 ? acc / double(divisor) : 0.0;
          }
          Y[(nc * P + op) * Q + oq] = acc;
        }
      }
    });
    b->write(*y, Y);
    return Status::ok();
  });
}

Expected<RunFn> buildGlobalAvgPool(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  Shape xs = shapeOf(*x);
  return RunFn([=]() {
    Values X = b->read(*x);
    const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
    Values Y(static_cast<size_t>(NC));
    for (int64_t i = 0; i < NC; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < inner; ++j)
        sum += X[i * inner + j];
      Y[i] = sum / double(inner);
    }
    b->write(*y, Y);
    return Status::ok();
  });
}

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
    const auto rows = windowRanges(P, H, a.kernel[0], a.strides[0], a.pads[0], a.dilations[0]);
    const auto cols = windowRanges(Q, W, a.kernel[1], a.strides[1], a.pads[1], a.dilations[1]);
    parallelFor(NC, 4.0 * double(DX.size()), [&](int64_t nc) {
      for (int64_t op = 0; op < P; ++op)
        for (int64_t oq = 0; oq < Q; ++oq) {
          const int64_t h0 = op * a.strides[0] - a.pads[0], w0 = oq * a.strides[1] - a.pads[1];
          const double g = DY[(nc * P + op) * Q + oq];
          if (isMax) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t at = -1;
            const auto [r0, r1] = rows[size_t(op)];
            const auto [s0, s1] = cols[size_t(oq)];
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t base = (nc * H + h0 + r * a.dilations[0]) * W + w0;
              for (int64_t s = s0; s < s1; ++s) {
                const int64_t i = base + s * a.dilations[1];
                const double v = X[i];
                // As the forward (the last NaN wins), branch-free.
                const bool take = (at < 0) | (v > best) | (v != v);
                best = selectBits(take, v, best);
                at += (i - at) & (int64_t(0) - int64_t(take));
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
    });
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

} // namespace

const KernelTable &poolingKernels() {
  static const KernelTable table = {
      {OpId::MaxPool2d, [](const KernelContext &c) { return buildPool(c, true); }},
      {OpId::AvgPool2d, [](const KernelContext &c) { return buildPool(c, false); }},
      {OpId::GlobalAvgPool, buildGlobalAvgPool},
      {OpId::MaxPool2dBackward, [](const KernelContext &c) { return buildPoolBackward(c, true); }},
      {OpId::AvgPool2dBackward, [](const KernelContext &c) { return buildPoolBackward(c, false); }},
      {OpId::GlobalAvgPoolBackward, buildGlobalAvgPoolBackward},
  };
  return table;
}

} // namespace castor::cpu
