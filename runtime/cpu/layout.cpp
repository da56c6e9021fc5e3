// The CPU reference's element moves: transpose, slice and slice_backward through a strided view of
// the input (shape::StridedView), byte for byte, so any dtype moves exactly; concat and split along
// an axis.
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


Expected<RunFn> buildConcat(const KernelContext &c) {
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  auto split = splitAtAxis(c.kernel, 0, shapeOf(*y));
  if (!split)
    return split.status();
  const int64_t ax = split->axis, outer = split->outer;
  const uint64_t innerBytes = uint64_t(split->inner) * plan::dtypeSize(y->dtype());
  return RunFn([=]() {
    // Read every input first: an output slot may not alias an input, but be safe regardless.
    std::vector<std::vector<uint8_t>> data;
    for (const Tensor *t : in)
      data.emplace_back(b->slot(*t), b->slot(*t) + t->bytes());
    uint8_t *dst = b->slot(*y);
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < in.size(); ++i) {
        uint64_t chunk = uint64_t(in[i]->shape(int(ax))) * innerBytes;
        std::memcpy(dst, data[i].data() + o * chunk, chunk);
        dst += chunk;
      }
    return Status::ok();
  });
}

// split (x) -> (y0, y1, ...): consecutive slices of x along `axis`, each as thick as its output.
Expected<RunFn> buildSplit(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0];
  auto out = c.out;
  auto split = splitAtAxis(c.kernel, 0, shapeOf(*x));
  if (!split)
    return split.status();
  const int64_t ax = split->axis, outer = split->outer;
  const uint64_t innerBytes = uint64_t(split->inner) * plan::dtypeSize(x->dtype());
  return RunFn([=]() {
    std::vector<uint8_t> src(b->slot(*x), b->slot(*x) + x->bytes());
    const uint8_t *from = src.data();
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor *t : out) {
        const uint64_t chunk = uint64_t(t->shape(int(ax))) * innerBytes;
        std::memcpy(b->slot(*t) + o * chunk, from, chunk);
        from += chunk;
      }
    return Status::ok();
  });
}

} // namespace

const KernelTable &layoutKernels() {
  static const KernelTable table = {
      {plan::OpId::Transpose, buildTranspose},
      {plan::OpId::Slice, buildSlice},
      {plan::OpId::SliceBackward, buildSlice},
      {OpId::Concat, buildConcat},
      {OpId::Split, buildSplit},
  };
  return table;
}

} // namespace castor::cpu
