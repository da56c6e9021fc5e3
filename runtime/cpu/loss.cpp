// softmax, softmax_cross_entropy, their backward ops and count_correct on the CPU reference.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"

#include <cmath>
#include <limits>

namespace castor::cpu {
namespace {

Expected<RunFn> buildSoftmax(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  auto split = splitAtAxis(c.kernel, -1, shapeOf(*x));
  if (!split)
    return split.status();
  const int64_t outer = split->outer, n = split->n, inner = split->inner;
  return RunFn([=]() {
    Values X = b->read(*x);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j)
          mx = std::max(mx, X[(o * n + j) * inner + i]);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double &e = X[(o * n + j) * inner + i];
          e = std::exp(e - mx);
          sum += e;
        }
        for (int64_t j = 0; j < n; ++j)
          X[(o * n + j) * inner + i] /= sum;
      }
    b->write(*y, X);
    return Status::ok();
  });
}

// PyTorch's cross_entropy on logits with class-index targets and label smoothing eps:
// loss_n = (1 - eps) * -log p[n, y_n] + eps / C * sum_c -log p[n, c].
Expected<RunFn> buildSoftmaxCrossEntropy(const KernelContext &c) {
  auto p = plan::parseSoftmaxCrossEntropy(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *labels = c.in[1], *loss = c.out[0];
  const Tensor *probs = c.out.size() > 1 ? c.out[1] : nullptr;
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const shape::Reduction reduction = p->reduction;
  return RunFn([=]() {
    Values X = b->read(*x);
    std::vector<int64_t> y = b->readInts(*labels);
    Values perSample(static_cast<size_t>(N)), P(X.size());
    for (int64_t n = 0; n < N; ++n) {
      CASTOR_RETURN_IF_ERROR(checkLabel(y[n], n, C));
      const double *row = X.data() + n * C;
      const double logZ = logSumExp(row, C);
      double nllAll = 0;
      for (int64_t j = 0; j < C; ++j) {
        nllAll += logZ - row[j];
        P[n * C + j] = std::exp(row[j] - logZ);
      }
      perSample[n] = (1 - eps) * (logZ - row[y[n]]) + eps / double(C) * nllAll;
    }
    if (reduction == shape::Reduction::None) {
      b->write(*loss, perSample);
    } else {
      double total = 0;
      for (double v : perSample)
        total += v;
      if (reduction == shape::Reduction::Mean)
        total /= double(N);
      b->write(*loss, Values{total});
    }
    if (probs)
      b->write(*probs, P);
    return Status::ok();
  });
}

// softmax_backward (dy, y) -> dx = y * (dy - sum(dy * y, axis)).
Expected<RunFn> buildSoftmaxBackward(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *y = c.in[1], *dx = c.out[0];
  auto split = splitAtAxis(c.kernel, -1, shapeOf(*y));
  if (!split)
    return split.status();
  const int64_t outer = split->outer, n = split->n, inner = split->inner;
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
      CASTOR_RETURN_IF_ERROR(checkLabel(y[n], n, C));
      const double w = reduction == shape::Reduction::None ? DL[n]
                       : reduction == shape::Reduction::Mean ? DL[0] / double(N)
                                                             : DL[0];
      const double *row = X.data() + n * C;
      const double logZ = logSumExp(row, C);
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

} // namespace

const KernelTable &lossKernels() {
  static const KernelTable table = {
      {OpId::Softmax, buildSoftmax},
      {OpId::SoftmaxCrossEntropy, buildSoftmaxCrossEntropy},
      {OpId::SoftmaxBackward, buildSoftmaxBackward},
      {OpId::SoftmaxCrossEntropyBackward, buildSoftmaxCrossEntropyBackward},
      {OpId::CountCorrect, buildCountCorrect},
  };
  return table;
}

} // namespace castor::cpu
