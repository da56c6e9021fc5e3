// reduce_sum_to on the CPU reference: the sum over the dimensions an operand was broadcast along.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"

namespace castor::cpu {
namespace {

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

} // namespace

const KernelTable &reduceKernels() {
  static const KernelTable table = {
      {OpId::ReduceSumTo, buildReduceSumTo},
  };
  return table;
}

} // namespace castor::cpu
