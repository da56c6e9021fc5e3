// Loss builders of the own kernels: softmax, softmax cross-entropy and its backward, count_correct.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/loss.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>

namespace castor::cuda::own {
namespace {

LossReduction lossReduction(shape::Reduction r) {
  return r == shape::Reduction::Mean ? LossReduction::Mean
         : r == shape::Reduction::Sum ? LossReduction::Sum
                                      : LossReduction::None;
}

} // namespace

// softmax, softmax_backward
Expected<RunFn> buildSoftmax(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto axis = plan::parseAxis(k, -1);
  if (!axis)
    return axis.status();
  const bool fwd = opOf(k) == OpId::Softmax;
  CASTOR_RETURN_IF_ERROR(need(fwd ? 1 : 2, 1));
  if (fwd)
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], out[0]}));
  else
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], out[0]}));
  const Shape xs = shapeOf(*out[0]);
  auto ax = shape::normalizeAxis(*axis, int64_t(xs.size()));
  if (!ax)
    return Status::error("axis out of range");
  // Storage shape and axis (all operands share the order).
  const Shape ps = reordered(ctx, out[0]) ? physicalShape(ctx, *out[0]) : xs;
  const size_t pax = size_t(reordered(ctx, out[0]) ? physicalAxis(ctx, *out[0], int(*ax)) : int(*ax));
  const int64_t outer = span(ps, 0, pax), n = ps[pax], inner = span(ps, pax + 1, ps.size());
  const auto i = in;
  const Tensor *y = out[0];
  return launch([=]() {
    return fwd ? softmax(c->ref(i[0]), c->ref(y), outer, n, inner, s)
               : softmaxBackward(c->ref(i[0]), c->ref(i[1]), c->ref(y), outer, n, inner, s);
  });
}

// softmax_cross_entropy
Expected<RunFn> buildSoftmaxCrossEntropy(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                         const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSoftmaxCrossEntropy(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  const Tensor *x = in[0], *labels = in[1], *loss = out[0], *probs = out.size() > 1 ? out[1] : nullptr;
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  auto scratch = scratchFor(ctx, kTagLoss, loss, lossScratchBytes(N));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  const double eps = p->labelSmoothing;
  const LossReduction red = lossReduction(p->reduction);
  return launch([=]() {
    return softmaxCrossEntropy(c->ref(x), c->ints(labels), c->ref(loss), probs ? c->ref(probs) : Ref{nullptr, kF32},
                               N, C, eps, red, buf, s);
  });
}

// softmax_cross_entropy_backward
Expected<RunFn> buildSoftmaxCrossEntropyBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                                 const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSoftmaxCrossEntropy(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(3, 1));
  const Tensor *dl = in[0], *x = in[1], *labels = in[2], *dx = out[0];
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const LossReduction red = lossReduction(p->reduction);
  return launch(
      [=]() {
        return softmaxCrossEntropyBackward(c->ref(dl), c->ref(x), c->ints(labels), c->ref(dx), N, C, eps, red, s);
      });
}

// count_correct
Expected<RunFn> buildCountCorrect(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  const Tensor *x = in[0], *labels = in[1], *y = out[0];
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  return launch([=]() { return countCorrect(c->ref(x), c->ints(labels), c->ints(y), N, C, s); });
}

} // namespace castor::cuda::own
