// Builders of layer_norm and layer_norm_backward. The rows must be contiguous: a rank-4
// operand the backend keeps channels-last is refused (layer norm of image-shaped tensors over
// their last dimension is not laid out for it yet).
#include "cuda/kernels/builders.h"
#include "cuda/kernels/layer_norm.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

namespace castor::cuda::own {
namespace {

Status rowMajorOperands(const DeviceContext &ctx, const std::string &op, const TensorList &in,
                        const TensorList &out) {
  for (const TensorList *list : {&in, &out})
    for (const Tensor *t : *list)
      if (ctx.channelsLast(t))
        return layoutError(op, "a rank-4 operand, which this backend stores channels-last (" + t->name() + ")");
  return Status::ok();
}

} // namespace

Expected<RunFn> buildLayerNorm(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(3, 3));
  CASTOR_RETURN_IF_ERROR(rowMajorOperands(ctx, k.op(), in, out));
  auto p = plan::parseLayerNorm(k);
  if (!p)
    return p.status();
  auto g = plan::layerNormRows(*in[0], *in[1], p->axis);
  if (!g)
    return g.status();
  DeviceContext *c = &ctx;
  const plan::LayerNormRows rg = *g;
  const double eps = p->epsilon;
  const Tensor *x = in[0], *scale = in[1], *bias = in[2], *y = out[0], *mean = out[1], *inv = out[2];
  return launch([=]() {
    return layerNormForward(c->ref(x), c->ref(scale), c->ref(bias), c->ref(y), c->ref(mean), c->ref(inv), rg.rows,
                            rg.length, eps, c->stream);
  });
}

Expected<RunFn> buildLayerNormBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                       const TensorList &out) {
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(5, 3));
  CASTOR_RETURN_IF_ERROR(rowMajorOperands(ctx, k.op(), in, out));
  auto p = plan::parseLayerNorm(k);
  if (!p)
    return p.status();
  auto g = plan::layerNormRows(*in[1], *in[2], p->axis);
  if (!g)
    return g.status();
  const plan::LayerNormRows rg = *g;
  // The parameter gradients' partial sums live only while the kernel runs: the step's shared
  // workspace holds them (a buffer per layer would add up over a deep model).
  const Tensor *dy = in[0], *x = in[1], *scale = in[2], *mean = in[3], *inv = in[4];
  const Tensor *dx = out[0], *dscale = out[1], *dbias = out[2];
  auto dtypeOf = [](const Tensor *t) { return Ref{nullptr, int(t->dtype())}; };
  const size_t scratch =
      layerNormBackwardScratch(dtypeOf(dy), dtypeOf(x), dtypeOf(scale), dtypeOf(mean), dtypeOf(inv), dtypeOf(dx),
                               dtypeOf(dscale), dtypeOf(dbias), rg.rows, rg.length);
  ctx.requestWorkspace(scratch);
  DeviceContext *c = &ctx;
  return launch([=]() {
    return layerNormBackward(c->ref(dy), c->ref(x), c->ref(scale), c->ref(mean), c->ref(inv), c->ref(dx),
                             c->ref(dscale), c->ref(dbias), rg.rows, rg.length, c->workspace, scratch, c->stream);
  });
}

} // namespace castor::cuda::own
