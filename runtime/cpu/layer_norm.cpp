// layer_norm and layer_norm_backward on the CPU reference: one row at a time, in fp64.
#include "cpu/cpu_internal.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <cmath>

namespace castor::cpu {
namespace {

Expected<RunFn> buildLayerNorm(const KernelContext &c) {
  auto p = plan::parseLayerNorm(c.kernel);
  if (!p)
    return p.status();
  auto rows = plan::layerNormRows(*c.in[0], *c.in[1], p->axis);
  if (!rows)
    return rows.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *scale = c.in[1], *bias = c.in[2], *y = c.out[0], *mean = c.out[1], *inv = c.out[2];
  const plan::LayerNormRows r = *rows;
  const double eps = p->epsilon;
  return RunFn([=]() {
    Values X = b->read(*x), G = b->read(*scale), B = b->read(*bias);
    Values Y(X.size()), M(size_t(r.rows)), S(size_t(r.rows));
    for (int64_t i = 0; i < r.rows; ++i) {
      const double *row = X.data() + i * r.length;
      double sum = 0, sq = 0;
      for (int64_t j = 0; j < r.length; ++j)
        sum += row[j];
      const double mu = sum / double(r.length);
      for (int64_t j = 0; j < r.length; ++j)
        sq += (row[j] - mu) * (row[j] - mu);
      const double s = 1.0 / std::sqrt(sq / double(r.length) + eps);
      for (int64_t j = 0; j < r.length; ++j)
        Y[i * r.length + j] = (row[j] - mu) * s * G[j] + B[j];
      M[i] = mu;
      S[i] = s;
    }
    b->write(*y, Y);
    b->write(*mean, M);
    b->write(*inv, S);
    return Status::ok();
  });
}

Expected<RunFn> buildLayerNormBackward(const KernelContext &c) {
  auto p = plan::parseLayerNorm(c.kernel);
  if (!p)
    return p.status();
  auto rows = plan::layerNormRows(*c.in[1], *c.in[2], p->axis);
  if (!rows)
    return rows.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *x = c.in[1], *scale = c.in[2], *mean = c.in[3], *inv = c.in[4];
  const Tensor *dx = c.out[0], *dscale = c.out[1], *dbias = c.out[2];
  const plan::LayerNormRows r = *rows;
  return RunFn([=]() {
    Values DY = b->read(*dy), X = b->read(*x), G = b->read(*scale), M = b->read(*mean), S = b->read(*inv);
    Values DX(X.size()), DG(size_t(r.length), 0.0), DB(size_t(r.length), 0.0);
    std::vector<double> xhat(size_t(r.length)), g(size_t(r.length));
    for (int64_t i = 0; i < r.rows; ++i) {
      const double *dyRow = DY.data() + i * r.length, *xRow = X.data() + i * r.length;
      double sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < r.length; ++j) {
        xhat[j] = (xRow[j] - M[i]) * S[i];
        g[j] = dyRow[j] * G[j];
        sumG += g[j];
        sumGX += g[j] * xhat[j];
        DG[j] += dyRow[j] * xhat[j];
        DB[j] += dyRow[j];
      }
      const double n = double(r.length);
      for (int64_t j = 0; j < r.length; ++j)
        DX[i * r.length + j] = S[i] * (g[j] - sumG / n - xhat[j] * sumGX / n);
    }
    b->write(*dx, DX);
    b->write(*dscale, DG);
    b->write(*dbias, DB);
    return Status::ok();
  });
}

} // namespace

const KernelTable &layerNormKernels() {
  static const KernelTable table = {
      {plan::OpId::LayerNorm, buildLayerNorm},
      {plan::OpId::LayerNormBackward, buildLayerNormBackward},
  };
  return table;
}

} // namespace castor::cpu
