// transpose, slice and slice_backward: element moves through a strided view of the input
// (shape::StridedView), byte for byte, so any dtype moves exactly.
#include "cpu/cpu_internal.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"
#include "plan/op_registry.h"

#include <cstring>

namespace castor::cpu {
namespace {

// Calls fn(viewOffset, linearIndex) for every element of the view, in row-major order.
template <typename Fn>
void forEachElement(const shape::StridedView &v, Fn fn) {
  const size_t rank = v.dims.size();
  auto count = shape::elementCount(v.dims).value_or(0);
  std::vector<int64_t> index(rank, 0);
  int64_t at = v.offset;
  for (int64_t i = 0; i < count; ++i) {
    fn(at, i);
    for (size_t d = rank; d-- > 0;) {
      at += v.strides[d];
      if (++index[d] < v.dims[d])
        break;
      at -= v.strides[d] * v.dims[d];
      index[d] = 0;
    }
  }
}

// gather: y[i] = x[view(i)]; scatter: y = 0, y[view(i)] = x[i].
Expected<RunFn> moveThrough(const KernelContext &c, const shape::StridedView &view, bool scatter) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  const size_t elem = plan::dtypeSize(y->dtype());
  return RunFn([=]() {
    std::vector<uint8_t> src(b->slot(*x), b->slot(*x) + x->bytes()); // the output may alias nothing, but be safe
    uint8_t *dst = b->slot(*y);
    if (scatter)
      std::memset(dst, 0, y->bytes()); // +0.0 in every float dtype
    forEachElement(view, [&](int64_t at, int64_t i) {
      if (scatter)
        std::memcpy(dst + at * elem, src.data() + i * elem, elem);
      else
        std::memcpy(dst + i * elem, src.data() + at * elem, elem);
    });
    return Status::ok();
  });
}

Expected<RunFn> buildTranspose(const KernelContext &c) {
  auto p = plan::parseTranspose(c.kernel);
  if (!p)
    return p.status();
  const Shape xs = shapeOf(*c.in[0]);
  auto view = shape::transposeView(xs, shape::rowMajorStrides(xs), p->perm);
  if (!view)
    return Status::error("transpose: " + shape::transpose(xs, p->perm).error);
  return moveThrough(c, *view, false);
}

// slice reads the view of its input; slice_backward writes its input into the same view of its output.
Expected<RunFn> buildSlice(const KernelContext &c) {
  auto p = plan::parseSlice(c.kernel);
  if (!p)
    return p.status();
  const bool backward = plan::opFromName(c.kernel.op()) == plan::OpId::SliceBackward;
  const Shape whole = shapeOf(backward ? *c.out[0] : *c.in[0]);
  auto view = shape::sliceView(whole, shape::rowMajorStrides(whole), p->starts, p->ends, p->steps);
  if (!view)
    return Status::error(c.kernel.op() + ": " + shape::slice(whole, p->starts, p->ends, p->steps).error);
  return moveThrough(c, *view, backward);
}

} // namespace

const KernelTable &layoutKernels() {
  static const KernelTable table = {
      {plan::OpId::Transpose, buildTranspose},
      {plan::OpId::Slice, buildSlice},
      {plan::OpId::SliceBackward, buildSlice},
  };
  return table;
}

} // namespace castor::cpu
