// Fused element-wise programs for the tests of `fused_elementwise` (the CPU reference against the
// unfused kernels in test/runtime/test_fused_elementwise.cpp; the generated CUDA kernels against
// the CPU reference in test/cuda/cuda_kernels.cpp): each case is a program over a data dtype T
// (f32, f16 or bf16), added to a plan either as one fused_elementwise kernel or as the kernels it
// stands for, one per instruction.
#pragma once

#include "plan_builder.h"
#include "plan/elementwise_program.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace castor::test {

struct FusedProgramCase {
  std::string name;
  std::string program; // "{T}" stands for the data dtype
  struct Operand {
    std::vector<int64_t> shape;
    std::string dtype = "{T}";
  };
  std::vector<Operand> inputs, outputs;
  double lo = -4, hi = 4; // the inputs' values, uniform
};

inline std::string withDtype(std::string text, plan::DType t) {
  for (size_t at; (at = text.find("{T}")) != std::string::npos;)
    text.replace(at, 3, plan::dtypeName(t));
  return text;
}

inline plan::DType dtypeOf(const std::string &spelled, plan::DType t) {
  const std::string name = withDtype(spelled, t);
  for (plan::DType d : {plan::F32, plan::F16, plan::BF16, plan::F64})
    if (plan::dtypeName(d) == name)
      return d;
  throw std::runtime_error("no dtype " + name);
}

// "3x5x7x9".
inline std::string dimsName(const std::vector<int64_t> &dims) {
  std::string s;
  for (int64_t d : dims)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// The domain of a case: the broadcast of its inputs (each case has an input of the domain's shape).
inline std::vector<int64_t> caseDomain(const FusedProgramCase &c) {
  std::vector<int64_t> domain;
  for (const auto &in : c.inputs)
    if (in.shape.size() > domain.size() ||
        (in.shape.size() == domain.size() && std::equal(domain.begin(), domain.end(), in.shape.begin(),
                                                        [](int64_t d, int64_t s) { return d <= s; })))
      domain = in.shape;
  return domain;
}

// The programs of issue 39's groups, over `domain` (rank 4: [N, C, H, W]).
inline std::vector<FusedProgramCase> fusedProgramCases(const std::vector<int64_t> &domain) {
  const std::vector<int64_t> perSample{domain[0], domain[1], 1, 1}, perChannel{1, domain[1], 1, 1};
  return {
      {"silu", "t0 = sigmoid(i0) : {T}\nt1 = mul(i0, t0) : {T}\nout t1\n", {{domain}}, {{domain}}},
      // d/dx x sigmoid(x) = dy s + x (dy s (1 - s)): dy, x -> dx.
      {"silu backward",
       "t0 = sigmoid(i1) : {T}\nt1 = mul(i0, t0) : {T}\nt2 = sigmoid_backward(i0, t0) : {T}\n"
       "t3 = mul(i1, t2) : {T}\nt4 = add(t1, t3) : {T}\nout t4\n",
       {{domain}, {domain}},
       {{domain}}},
      // Squeeze-excitation's per-sample, per-channel scale, then hard-swish; both results kept.
      {"se scale",
       "t0 = mul(i0, i1) : {T}\nt1 = hard_swish(t0) : {T}\nout t1, t0\n",
       {{domain}, {perSample}},
       {{domain}, {domain}}},
      // A per-channel bias and a scalar: two broadcasts of other kinds.
      {"channel and scalar",
       "t0 = add(i0, i1) : {T}\nt1 = mul(t0, i2) : {T}\nt2 = relu(t1) : {T}\nout t2\n",
       {{domain}, {perChannel}, {{}}},
       {{domain}}},
      // An f32 product cast to T in the middle, used after the cast in T and in f32.
      {"cast in the middle",
       "t0 = mul(i0, i0) : f32\nt1 = cast(t0) : {T}\nt2 = sigmoid(t1) : {T}\nt3 = cast(t2) : f32\nout t3, t1\n",
       {{domain, "f32"}},
       {{domain, "f32"}, {domain}}},
      {"clip",
       "t0 = clip(i0) {max=0.5, min=-0.25} : {T}\nt1 = clip_backward(i1, i0) {max=0.5, min=-0.25} : {T}\n"
       "t2 = hard_sigmoid(t0) {alpha=0.125, beta=0.25} : {T}\nout t2, t1\n",
       {{domain}, {domain}},
       {{domain}, {domain}}},
      {"gelu backward",
       "t0 = gelu_backward(i0, i1) : {T}\nt1 = gelu_backward(i0, i1) {tanh=true} : {T}\nt2 = add(t0, t1) : {T}\nout t2\n",
       {{domain}, {domain}},
       {{domain}}},
      // timm's activations and their gradients (dy, x): the forwards summed, the gradients summed.
      {"elu family, softplus, mish, softsign",
       "t0 = elu(i1) {alpha=0.5} : {T}\nt1 = selu(i1) : {T}\nt2 = celu(i1) {alpha=2.5} : {T}\n"
       "t3 = softplus(i1) : {T}\nt4 = mish(i1) : {T}\nt5 = softsign(i1) : {T}\n"
       "t6 = add(t0, t1) : {T}\nt7 = add(t6, t2) : {T}\nt8 = add(t7, t3) : {T}\nt9 = add(t8, t4) : {T}\n"
       "t10 = add(t9, t5) : {T}\n"
       "t11 = elu_backward(i0, i1) {alpha=0.5} : {T}\nt12 = selu_backward(i0, i1) : {T}\n"
       "t13 = celu_backward(i0, i1) {alpha=2.5} : {T}\nt14 = softplus_backward(i0, i1) : {T}\n"
       "t15 = mish_backward(i0, i1) : {T}\nt16 = softsign_backward(i0, i1) : {T}\n"
       "t17 = add(t11, t12) : {T}\nt18 = add(t17, t13) : {T}\nt19 = add(t18, t14) : {T}\n"
       "t20 = add(t19, t15) : {T}\nt21 = add(t20, t16) : {T}\nout t10, t21\n",
       {{domain}, {domain}},
       {{domain}, {domain}}},
      // ReduceL2's root and its gradient (dy, x), over positive values (its domain).
      {"sqrt", "t0 = sqrt(i1) : {T}\nt1 = sqrt_backward(i0, t0) : {T}\nout t0, t1\n",
       {{domain}, {domain}},
       {{domain}, {domain}},
       0.25,
       4},
      // The divisor of Div by a computed tensor and its gradient (dy, x), away from 0.
      {"reciprocal", "t0 = reciprocal(i1) : {T}\nt1 = reciprocal_backward(i0, t0) : {T}\nout t0, t1\n",
       {{domain}, {domain}},
       {{domain}, {domain}},
       0.25,
       4},
      // Reductions as outputs. Layer scale's backward (dy, x, gamma): dx = dy gamma and the
      // per-channel gradient of gamma, sum over N, H, W of dy x.
      {"layer scale backward", "t0 = mul(i0, i1) : {T}\nt1 = mul(i0, i2) : {T}\nout t1, sum(t0)[0,2,3]\n",
       {{domain}, {domain}, {perChannel}},
       {{domain}, {perChannel}}},
      // SiLU and squeeze-excitation's global average pool of its output (per sample and channel).
      {"silu and pool", "t0 = sigmoid(i0) : {T}\nt1 = mul(i0, t0) : {T}\nout mean(t1)[2,3], t1\n",
       {{domain}},
       {{perSample}, {domain}}},
      // Squeeze-excitation's scale backward (dy, x, s): dx = dy s, and ds summed over H, W in f32
      // with a scale (an f32-policy reduction of T data).
      {"se scale backward",
       "t0 = mul(i0, i2) : {T}\nt1 = mul(i0, i1) : {T}\nt2 = cast(t1) : f32\nout t0, sum(t2)[2,3]{scale=0.5}\n",
       {{domain}, {domain}, {perSample}},
       {{domain}, {perSample, "f32"}}},
      // The same backward with SiLU's product computed again from its input (dy, y, s), as
      // castor-recompute-elementwise leaves it: dx = dy s, and ds = sum over H, W of dy y sigmoid(y).
      {"se scale backward, silu recomputed",
       "t0 = sigmoid(i1) : {T}\nt1 = mul(i1, t0) : {T}\nt2 = mul(i0, i2) : {T}\nt3 = mul(i0, t1) : {T}\n"
       "out t2, sum(t3)[2,3]\n",
       {{domain}, {domain}, {perSample}},
       {{domain}, {perSample}}},
      // A bias gradient alone (nothing but the reduction leaves the group), without kept dims of 1.
      {"bias gradient", "t0 = mul(i0, i1) : {T}\nout sum(t0)[0,2,3]\n",
       {{domain}, {domain}},
       {{{domain[1], 1, 1}}}},
  };
}

// The ids of a case's tensors in a plan.
struct BuiltFusedCase {
  std::vector<uint32_t> inputs, outputs;
};

// Adds the case over dtype T to `b`: its inputs and outputs, and one fused_elementwise kernel
// (`fused`) or the program's instructions as kernels of their own (intermediates as
// activations), the program read by the plan's own parser.
inline BuiltFusedCase addFusedCase(PlanBuilder &b, const FusedProgramCase &c, plan::DType t, bool fused,
                                   const std::string &program = "") {
  BuiltFusedCase built;
  std::vector<plan::DType> inTypes, outTypes;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inTypes.push_back(dtypeOf(c.inputs[i].dtype, t));
    built.inputs.push_back(b.tensor("i" + std::to_string(i), c.inputs[i].shape, plan::Tensor::INPUT, inTypes.back()));
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outTypes.push_back(dtypeOf(c.outputs[i].dtype, t));
    built.outputs.push_back(
        b.tensor("out" + std::to_string(i), c.outputs[i].shape, plan::Tensor::OUTPUT, outTypes.back()));
  }
  const std::string text = withDtype(program.empty() ? c.program : program, t);
  if (fused) {
    plan::Attr a;
    a.set_s(text);
    b.kernel("fused_elementwise", built.inputs, built.outputs, {{"program", a}}).set_name(c.name);
    return built;
  }
  auto p = plan::parseElementwiseProgram(text, inTypes, &outTypes);
  if (!p)
    throw std::runtime_error(c.name + ": " + p.message());
  // The tensor of each value: an input, an output (the instruction the out line lists), or an
  // activation of the domain's shape; a reduction output is its own kernel reading the value.
  std::vector<uint32_t> temps;
  for (size_t j = 0; j < p->instructions.size(); ++j) {
    const plan::ProgramInstruction &inst = p->instructions[j];
    uint32_t id = 0;
    bool isOutput = false;
    for (size_t o = 0; o < p->outputs.size(); ++o)
      if (!p->outputs[o].isInput && size_t(p->outputs[o].index) == j &&
          p->reduction(o).kind == plan::ReduceKind::None)
        id = built.outputs[o], isOutput = true;
    if (!isOutput)
      id = b.tensor("t" + std::to_string(j), caseDomain(c), plan::Tensor::ACTIVATION, inst.dtype);
    temps.push_back(id);
    std::vector<uint32_t> operands;
    for (const plan::ProgramValue &v : inst.operands)
      operands.push_back(v.isInput ? built.inputs[size_t(v.index)] : temps[size_t(v.index)]);
    std::map<std::string, plan::Attr> attrs(inst.kernel.attrs().begin(), inst.kernel.attrs().end());
    b.kernel(inst.kernel.op(), operands, {id}, attrs).set_name(c.name + " t" + std::to_string(j));
  }
  for (size_t o = 0; o < p->outputs.size(); ++o) {
    const plan::ProgramReduction &r = p->reduction(o);
    if (r.kind == plan::ReduceKind::None)
      continue;
    std::map<std::string, plan::Attr> attrs;
    if (r.kind == plan::ReduceKind::Sum)
      attrs["scale"] = plan::floatAttr(r.scale);
    b.kernel(r.kind == plan::ReduceKind::Sum ? "reduce_sum_to" : "global_avg_pool",
             {temps[size_t(p->outputs[o].index)]}, {built.outputs[o]}, attrs)
        .set_name(c.name + " reduction " + std::to_string(o));
  }
  return built;
}

} // namespace castor::test
