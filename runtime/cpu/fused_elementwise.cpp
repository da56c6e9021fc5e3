// The CPU reference of `fused_elementwise` (plan/elementwise_program.h): the program run element
// by element over the domain, each instruction computed in double as its unfused kernel computes
// it (cpu/elementwise.cpp: the formulas of elementwise_ops.h, add and mul, cast) and rounded to its
// dtype as that kernel's write would round it (roundToDtype is Memory::writeRange's rounding), so
// that a fused plan gives bit for bit what the unfused plan gives.
//
// Chunk by chunk over the domain: a chunk reads every input of its elements before it writes any
// output, so an output that updates a same-shape input in place (the same tensor id) is read first.
//
// A reduction output (sum(tK), mean(tK)) keeps its value for the whole domain, then sums it after
// the chunks in the order of the unfused kernels (cpu/reduce.cpp's reduce_sum_to,
// cpu/pooling.cpp's global_avg_pool): in f64, each output element's terms in increasing flat
// index of the domain from 0, then times the scale (sum) or divided by the count (mean), rounded
// once as the output is written. The same additions in the same order give the same bits.
#include "cpu/cpu_internal.h"

#include "plan/elementwise_ops.h"
#include "plan/fused_elementwise.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <memory>

namespace castor::cpu {
namespace {

// One instruction over n elements: r = op(a[, b]), not yet rounded.
using ArrayFn = std::function<void(const double *a, const double *b, double *r, int64_t n)>;

template <class F> ArrayFn unaryArray(F f) {
  return [f](const double *a, const double *, double *r, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      r[i] = f(a[i]);
  };
}
template <class F> ArrayFn binaryArray(F f) {
  return [f](const double *a, const double *b, double *r, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      r[i] = f(a[i], b[i]);
  };
}

// The computation of one instruction, as its own kernel in cpu/elementwise.cpp computes it.
Expected<ArrayFn> instructionFn(const plan::ProgramInstruction &inst) {
  const std::optional<OpId> op = plan::opFromName(inst.kernel.op());
  if (!op)
    return Status::error("unknown op '" + inst.kernel.op() + "'");
  switch (*op) {
  case OpId::Add:
    return binaryArray([](double a, double b) { return a + b; });
  case OpId::Mul:
    return binaryArray([](double a, double b) { return a * b; });
  case OpId::Cast: // the rounding to the result's dtype is the cast
    return unaryArray([](double a) { return a; });
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                          \
  case OpId::id: {                                                                                               \
    auto f = plan::parseElementwise<elementwise::id>(inst.kernel);                                               \
    if (!f)                                                                                                      \
      return f.status();                                                                                         \
    return unaryArray([g = *f](double x) { return g.forward(x); });                                              \
  }                                                                                                              \
  case OpId::id##Backward: {                                                                                     \
    auto f = plan::parseElementwise<elementwise::id>(inst.kernel);                                               \
    if (!f)                                                                                                      \
      return f.status();                                                                                         \
    return binaryArray([g = *f](double dy, double saved) { return g.backward(dy, saved); });                     \
  }
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  default:
    return Status::error("'" + inst.kernel.op() + "' cannot stand in a fused element-wise program");
  }
}

// How one kernel input is read: a slice of its own (it has the domain's shape), or each element
// through the flat index it broadcasts from.
struct InputRead {
  const Tensor *tensor;
  std::shared_ptr<const std::vector<int64_t>> index; // null: the domain's shape
};

Expected<RunFn> buildFusedElementwise(const KernelContext &c) {
  auto fused = plan::parseFusedElementwise(c.kernel, c.in, c.out);
  if (!fused)
    return fused.status();
  auto program = std::make_shared<const plan::ElementwiseProgram>(std::move(fused->program));
  std::vector<ArrayFn> fns;
  for (const plan::ProgramInstruction &inst : program->instructions) {
    auto fn = instructionFn(inst);
    if (!fn)
      return fn.status();
    fns.push_back(std::move(*fn));
  }
  const Shape domain = fused->domain;
  std::vector<InputRead> inputs;
  for (const Tensor *t : c.in)
    inputs.push_back({t, shapeOf(*t) == domain ? nullptr
                                              : std::make_shared<const std::vector<int64_t>>(
                                                    broadcastIndex(shapeOf(*t), domain))});
  Memory *b = &c.backend;
  const std::vector<const Tensor *> outs = c.out;
  int64_t count = 1;
  for (int64_t d : domain)
    count *= d;
  // Of each reduction output, the flat index of its element that each domain element adds to.
  std::vector<std::shared_ptr<const std::vector<int64_t>>> reductionIndex(outs.size());
  for (size_t o = 0; o < outs.size(); ++o)
    if (program->reduction(o).kind != plan::ReduceKind::None)
      reductionIndex[o] = std::make_shared<const std::vector<int64_t>>(broadcastIndex(shapeOf(*outs[o]), domain));
  return RunFn([=]() {
    // The broadcast inputs whole (they are small: a per-channel vector, a scalar).
    std::vector<Values> whole(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k].index)
        whole[k] = b->read(*inputs[k].tensor);
    const size_t nIn = inputs.size(), nValues = nIn + program->instructions.size();
    std::vector<std::vector<double>> reduced(outs.size()); // a reduced value over the whole domain
    for (size_t o = 0; o < outs.size(); ++o)
      if (reductionIndex[o])
        reduced[o].resize(size_t(count));
    parallelChunks(count, 4.0 * double(program->instructions.size()), [&](int64_t i0, int64_t n) {
      // Row v of `values`: input v (v < nIn), else the result of instruction v - nIn.
      std::vector<double> values(nValues * size_t(kChunk));
      auto row = [&](const plan::ProgramValue &v) {
        return values.data() + (v.isInput ? size_t(v.index) : nIn + size_t(v.index)) * size_t(kChunk);
      };
      for (size_t k = 0; k < nIn; ++k) {
        double *dst = values.data() + k * size_t(kChunk);
        if (!inputs[k].index) {
          b->readRange(*inputs[k].tensor, i0, n, dst);
          continue;
        }
        const int64_t *at = inputs[k].index->data() + i0;
        for (int64_t i = 0; i < n; ++i)
          dst[i] = whole[k][size_t(at[i])];
      }
      for (size_t j = 0; j < program->instructions.size(); ++j) {
        const plan::ProgramInstruction &inst = program->instructions[j];
        double *r = row({false, int(j)});
        const double *a = row(inst.operands[0]);
        const double *bb = inst.operands.size() > 1 ? row(inst.operands[1]) : nullptr;
        fns[j](a, bb, r, n);
        for (int64_t i = 0; i < n; ++i)
          r[i] = roundToDtype(r[i], inst.dtype);
      }
      for (size_t o = 0; o < outs.size(); ++o) {
        const double *value = row(program->outputs[o]);
        if (reductionIndex[o])
          std::copy(value, value + n, reduced[o].begin() + i0);
        else
          b->writeRange(*outs[o], i0, n, value);
      }
    });
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!reductionIndex[o])
        continue;
      const plan::ProgramReduction &r = program->reduction(o);
      Values Y(size_t(countOf(*outs[o])), 0.0);
      const std::vector<int64_t> &map = *reductionIndex[o];
      for (size_t i = 0; i < reduced[o].size(); ++i)
        Y[size_t(map[i])] += reduced[o][i];
      const double terms = double(count) / double(std::max<size_t>(Y.size(), 1));
      for (double &e : Y)
        e = r.kind == plan::ReduceKind::Mean ? e / terms : e * r.scale;
      b->write(*outs[o], Y);
    }
    return Status::ok();
  });
}

} // namespace

const KernelTable &fusedElementwiseKernels() {
  static const KernelTable table = {{OpId::FusedElementwise, buildFusedElementwise}};
  return table;
}

} // namespace castor::cpu
