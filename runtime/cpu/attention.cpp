// attention and attention_backward on the CPU reference: one (batch, head) at a time, each row of
// scores materialised, in f64 (as every CPU kernel computes; f16/bf16/f32 operands widen exactly
// on reading and round once on writing, stats into f32).
#include "cpu/cpu_internal.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace castor::cpu {
namespace {

// The extents of one attention: heads = B * H (each an independent problem), rows of q (Sq), rows
// of k and v (Sk), the head dimension of q and k (D) and of v (Dv).
struct Geometry {
  int64_t heads, sq, sk, d, dv;
};

Expected<Geometry> geometryOf(const Tensor &q, const Tensor &k, const Tensor &v) {
  auto r = shape::attention(shapeOf(q), shapeOf(k), shapeOf(v));
  if (!r)
    return Status::error(r.error);
  const Shape qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  return Geometry{qs[0] * qs[1], qs[2], ks[2], qs[3], vs[3]};
}

// s[j] = scale * q_row . k_j for every row j of k (one head's k, [Sk, D]).
void scoresOf(const double *qRow, const double *k, const Geometry &g, double scale, double *s) {
  for (int64_t j = 0; j < g.sk; ++j) {
    double dot = 0;
    for (int64_t c = 0; c < g.d; ++c)
      dot += qRow[c] * k[j * g.d + c];
    s[j] = scale * dot;
  }
}

Expected<RunFn> buildAttention(const KernelContext &c) {
  auto p = plan::parseAttention(c.kernel);
  if (!p)
    return p.status();
  auto geometry = geometryOf(*c.in[0], *c.in[1], *c.in[2]);
  if (!geometry)
    return geometry.status();
  Memory *b = &c.backend;
  const Tensor *q = c.in[0], *k = c.in[1], *v = c.in[2], *o = c.out[0], *stats = c.out[1];
  const Geometry g = *geometry;
  const double scale = p->scale;
  return RunFn([=]() {
    Values Q = b->read(*q), K = b->read(*k), V = b->read(*v);
    Values O(size_t(g.heads * g.sq * g.dv), 0.0), L(size_t(g.heads * g.sq));
    parallelFor(g.heads, double(g.sq) * double(g.sk) * double(g.d + g.dv), [&](int64_t h) {
      const double *qh = Q.data() + h * g.sq * g.d, *kh = K.data() + h * g.sk * g.d, *vh = V.data() + h * g.sk * g.dv;
      std::vector<double> s(size_t(g.sk));
      for (int64_t i = 0; i < g.sq; ++i) {
        double *oRow = O.data() + (h * g.sq + i) * g.dv;
        scoresOf(qh + i * g.d, kh, g, scale, s.data());
        double mx = -std::numeric_limits<double>::infinity();
        for (double e : s)
          mx = std::max(mx, e);
        double sum = 0;
        for (double &e : s) {
          e = std::exp(e - mx);
          sum += e;
        }
        // An empty row (Sk = 0) attends to nothing: o = 0, stats = log(0) = -inf.
        L[size_t(h * g.sq + i)] = g.sk ? mx + std::log(sum) : -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < g.sk; ++j)
          for (int64_t c2 = 0; c2 < g.dv; ++c2)
            oRow[c2] += s[j] / sum * vh[j * g.dv + c2];
      }
    });
    b->write(*o, O);
    b->write(*stats, L);
    return Status::ok();
  });
}

// With P = exp(scale q k^T - stats) (the forward's softmax, recomputed from its saved
// log-sum-exp): dv = P^T dO, dS = P (dO v^T - rowsum(dO o)), dq = scale dS k, dk = scale dS^T q.
Expected<RunFn> buildAttentionBackward(const KernelContext &c) {
  auto p = plan::parseAttention(c.kernel);
  if (!p)
    return p.status();
  auto geometry = geometryOf(*c.in[0], *c.in[1], *c.in[2]);
  if (!geometry)
    return geometry.status();
  Memory *b = &c.backend;
  const Tensor *q = c.in[0], *k = c.in[1], *v = c.in[2], *o = c.in[3], *stats = c.in[4], *dO = c.in[5];
  const Tensor *dq = c.out[0], *dk = c.out[1], *dv = c.out[2];
  const Geometry g = *geometry;
  const double scale = p->scale;
  return RunFn([=]() {
    Values Q = b->read(*q), K = b->read(*k), V = b->read(*v), O = b->read(*o), L = b->read(*stats),
           DO = b->read(*dO);
    Values DQ(Q.size(), 0.0), DK(K.size(), 0.0), DV(V.size(), 0.0);
    parallelFor(g.heads, 3.0 * double(g.sq) * double(g.sk) * double(g.d + g.dv), [&](int64_t h) {
      const int64_t qOff = h * g.sq * g.d, kOff = h * g.sk * g.d, vOff = h * g.sk * g.dv, oOff = h * g.sq * g.dv;
      std::vector<double> prob(size_t(g.sk));
      for (int64_t i = 0; i < g.sq; ++i) {
        const double *qRow = Q.data() + qOff + i * g.d;
        const double *oRow = O.data() + oOff + i * g.dv, *doRow = DO.data() + oOff + i * g.dv;
        scoresOf(qRow, K.data() + kOff, g, scale, prob.data());
        const double lse = L[size_t(h * g.sq + i)];
        double rowDot = 0; // rowsum(dO o): the softmax's Jacobian term
        for (int64_t c2 = 0; c2 < g.dv; ++c2)
          rowDot += doRow[c2] * oRow[c2];
        double *dqRow = DQ.data() + qOff + i * g.d;
        for (int64_t j = 0; j < g.sk; ++j) {
          const double pij = std::exp(prob[size_t(j)] - lse);
          const double *vRow = V.data() + vOff + j * g.dv, *kRow = K.data() + kOff + j * g.d;
          double dp = 0;
          for (int64_t c2 = 0; c2 < g.dv; ++c2) {
            dp += doRow[c2] * vRow[c2];
            DV[size_t(vOff + j * g.dv + c2)] += pij * doRow[c2];
          }
          const double ds = scale * pij * (dp - rowDot);
          double *dkRow = DK.data() + kOff + j * g.d;
          for (int64_t c2 = 0; c2 < g.d; ++c2) {
            dqRow[c2] += ds * kRow[c2];
            dkRow[c2] += ds * qRow[c2];
          }
        }
      }
    });
    b->write(*dq, DQ);
    b->write(*dk, DK);
    b->write(*dv, DV);
    return Status::ok();
  });
}

} // namespace

const KernelTable &attentionKernels() {
  static const KernelTable table = {
      {plan::OpId::Attention, buildAttention},
      {plan::OpId::AttentionBackward, buildAttentionBackward},
  };
  return table;
}

} // namespace castor::cpu
