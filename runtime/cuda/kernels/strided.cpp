// Builders of transpose, slice and slice_backward: the shared index rule (shape::StridedView)
// over each operand's storage strides, so channels-last tensors move without a reorder.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/strided.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"
#include "plan/storage_order.h"

namespace castor::cuda::own {
namespace {

Expected<RunFn> buildMove(DeviceContext &ctx, const std::string &op, const Tensor *x, const Tensor *y,
                          const shape::StridedView &view, bool scatter) {
  if (int(view.dims.size()) > kMaxRank)
    return Status::error(op + ": rank " + std::to_string(view.dims.size()) + " is above the kernel's " +
                         std::to_string(kMaxRank));
  if (x->dtype() != y->dtype())
    return Status::error(op + ": input and output must share one dtype");
  // The view walks the gathered side (the forward's result, the backward's gradient); the other
  // side is that tensor's own storage.
  const Tensor *walked = scatter ? x : y;
  const std::vector<int64_t> walkedStrides = storageStrides(ctx, *walked);
  StridedMove m;
  m.rank = int(view.dims.size());
  for (int d = 0; d < m.rank; ++d) {
    m.dims[d] = view.dims[d];
    (scatter ? m.dstStrides : m.srcStrides)[d] = view.strides[d];
    (scatter ? m.srcStrides : m.dstStrides)[d] = walkedStrides[d];
  }
  (scatter ? m.dstOffset : m.srcOffset) = view.offset;
  DeviceContext *c = &ctx;
  const int elem = int(plan::dtypeSize(y->dtype()));
  return RunFn([=]() -> Status {
    if (scatter)
      CASTOR_CUDA(cudaMemsetAsync(c->ptr(y), 0, y->bytes(), c->stream)); // +0.0 in every float dtype
    CASTOR_CUDA(stridedMove(c->ptr(x), c->ptr(y), m, elem, c->stream));
    return Status::ok();
  });
}

} // namespace

Expected<RunFn> buildTranspose(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(1, 1));
  auto p = plan::parseTranspose(k);
  if (!p)
    return p.status();
  const Tensor *x = in[0], *y = out[0];
  if (x == y)
    return Status::error("transpose: an in-place transpose is not supported");
  bool fromChannels = false;
  if (y->has_view_of() && y->view_of() == x->id() && plan::isChannelsLastPerm(p->perm, &fromChannels)) {
    // A transposed view: [N,C,H,W] stored channels-last is [N,H,W,C] row-major, no kernel runs.
    const Tensor *channels = fromChannels ? x : y, *rows = fromChannels ? y : x;
    if ((plan::ordersDiffer(*channels) && !ctx.channelsLast(channels)) || reordered(ctx, rows))
      return layoutError(k.op(), "a transposed view whose [N,C,H,W] side is not stored channels-last");
    return RunFn([]() { return Status::ok(); });
  }
  auto view = shape::transposeView(shapeOf(*x), storageStrides(ctx, *x), p->perm);
  if (!view)
    return Status::error("transpose: " + shape::transpose(shapeOf(*x), p->perm).error);
  return buildMove(ctx, k.op(), x, y, *view, false);
}

Expected<RunFn> buildSlice(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(1, 1));
  auto p = plan::parseSlice(k);
  if (!p)
    return p.status();
  const bool backward = opOf(k) == OpId::SliceBackward;
  const Tensor *x = in[0], *y = out[0];
  if (x == y)
    return Status::error(k.op() + ": in place is not supported");
  const Tensor *whole = backward ? y : x;
  auto view = shape::sliceView(shapeOf(*whole), storageStrides(ctx, *whole), p->starts, p->ends, p->steps);
  if (!view)
    return Status::error(k.op() + ": " + shape::slice(shapeOf(*whole), p->starts, p->ends, p->steps).error);
  return buildMove(ctx, k.op(), x, y, *view, backward);
}

} // namespace castor::cuda::own
