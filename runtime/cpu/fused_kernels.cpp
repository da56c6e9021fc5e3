// The fused kernels of the CPU reference (plan/ops.md, "Fused kernels"): each runs the kernels of
// the group it replaces, in order, through their own entries of the kernel table, so a fused plan
// computes bit for bit what the unfused plan computes.
#include "cpu/cpu_internal.h"

#include <memory>

namespace castor::cpu {
namespace {

// One step of a composition: the kernel of `op`, with the fused kernel's attributes when
// `keepAttrs` (batch norm's epsilon, momentum and sync) and none otherwise, on the given operands.
struct Step {
  OpId op;
  bool keepAttrs;
  std::vector<const Tensor *> in, out;
};

Expected<RunFn> compose(const KernelContext &c, const std::vector<Step> &steps) {
  std::vector<RunFn> runs;
  // The step kernels outlive the build: builders may keep a reference to them.
  auto kernels = std::make_shared<std::vector<Kernel>>(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    Kernel &k = (*kernels)[i];
    k.set_op(std::string(plan::opName(steps[i].op)));
    k.set_name(c.kernel.name());
    if (steps[i].keepAttrs)
      *k.mutable_attrs() = c.kernel.attrs();
    const Builder *build = cpuKernels().find(steps[i].op);
    if (!build)
      return Status::error("no cpu kernel '" + std::string(plan::opName(steps[i].op)) + "' to compose");
    auto run = (*build)(KernelContext{c.backend, k, steps[i].in, steps[i].out, c.replicas});
    if (!run)
      return run.status().withContext(std::string("composing ") + c.kernel.op());
    runs.push_back(std::move(*run));
  }
  return RunFn([runs, kernels]() {
    for (const RunFn &run : runs)
      CASTOR_RETURN_IF_ERROR(run());
    return Status::ok();
  });
}

// x, scale, bias [, z] -> y, mean, inv_std: batch_norm_training into y, [add z in place], relu in
// place.
Expected<RunFn> buildBatchNormReluTraining(const KernelContext &c) {
  const Tensor *y = c.out[0];
  std::vector<Step> steps{{OpId::BatchNormTraining, true, {c.in[0], c.in[1], c.in[2]}, c.out}};
  if (c.in.size() == 4)
    steps.push_back({OpId::Add, false, {y, c.in[3]}, {y}});
  steps.push_back({OpId::Relu, false, {y}, {y}});
  return compose(c, steps);
}

// dy, x, y, scale, bias, mean, inv_std -> dx, dscale, dbias [, dz]: g = relu_backward(dy, y) into
// dz (or dx), then batch_norm_training_backward(g, ...) (which reads each channel of g before
// writing that channel of dx).
Expected<RunFn> buildBatchNormReluTrainingBackward(const KernelContext &c) {
  const Tensor *g = c.out.size() == 4 ? c.out[3] : c.out[0];
  return compose(c, {{OpId::ReluBackward, false, {c.in[0], c.in[2]}, {g}},
                     {OpId::BatchNormTrainingBackward, true, {g, c.in[1], c.in[3], c.in[5], c.in[6]},
                      {c.out[0], c.out[1], c.out[2]}}});
}

} // namespace

const KernelTable &fusedKernels() {
  static const KernelTable table = {
      {OpId::BatchNormReluTraining, buildBatchNormReluTraining},
      {OpId::BatchNormReluTrainingBackward, buildBatchNormReluTrainingBackward},
  };
  return table;
}

} // namespace castor::cpu
