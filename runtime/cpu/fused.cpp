// The fused kernels of the CPU reference (plan/ops.md, "Fused kernels"): each runs the kernels of
// the group it replaces, in order, through their own entries of the kernel table, so a fused plan
// computes bit for bit what the unfused plan computes.
#include "cpu/cpu_internal.h"

#include "plan/op_attrs.h"

#include <memory>
#include <string>
#include <utility>

namespace castor::cpu {
namespace {

using Attrs = std::vector<std::pair<std::string, plan::Attr>>;

// One step of a composition: the kernel of `op` with the attributes given, on the given operands.
struct Step {
  OpId op;
  Attrs attrs;
  std::vector<const Tensor *> in, out;
};

// The fused kernel's batch-norm attributes (epsilon, momentum, sync), without the activation's.
Attrs batchNormAttrs(const Kernel &fused) {
  Attrs attrs;
  for (const auto &[name, value] : fused.attrs())
    if (!plan::isBatchNormReluActivationAttr(name))
      attrs.emplace_back(name, value);
  return attrs;
}

// ReLU6's clip (and clip_backward): min 0, max clipMax.
Attrs clipAttrs(double clipMax) { return {{"min", plan::floatAttr(0.0)}, {"max", plan::floatAttr(clipMax)}}; }

Expected<RunFn> compose(const KernelContext &c, const std::vector<Step> &steps) {
  std::vector<RunFn> runs;
  // The step kernels outlive the build: builders may keep a reference to them.
  auto kernels = std::make_shared<std::vector<Kernel>>(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    Kernel &k = (*kernels)[i];
    k.set_op(std::string(plan::opName(steps[i].op)));
    k.set_name(c.kernel.name());
    for (const auto &[name, value] : steps[i].attrs)
      (*k.mutable_attrs())[name] = value;
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

// x, scale, bias [, z] -> y, mean, inv_std: batch_norm_training into y, [add z in place], relu (or
// ReLU6's clip) in place.
Expected<RunFn> buildBatchNormReluTraining(const KernelContext &c) {
  auto p = plan::parseBatchNormRelu(c.kernel);
  if (!p)
    return p.status();
  const Tensor *y = c.out[0];
  std::vector<Step> steps{{OpId::BatchNormTraining, batchNormAttrs(c.kernel), {c.in[0], c.in[1], c.in[2]}, c.out}};
  if (c.in.size() == 4)
    steps.push_back({OpId::Add, {}, {y, c.in[3]}, {y}});
  if (p->clipMax)
    steps.push_back({OpId::Clip, clipAttrs(*p->clipMax), {y}, {y}});
  else
    steps.push_back({OpId::Relu, {}, {y}, {y}});
  return compose(c, steps);
}

// dy, x, y, scale, bias, mean, inv_std -> dx, dscale, dbias [, dz]: g = relu_backward(dy, y) into
// dz (or dx), then batch_norm_training_backward(g, ...) (which reads each channel of g before
// writing that channel of dx). ReLU6's form: the normalised value t recomputed into dx by
// batch_norm_apply (bit for bit batch_norm_training's output), g = clip_backward(dy, t) in place,
// then the batch norm's backward.
Expected<RunFn> buildBatchNormReluTrainingBackward(const KernelContext &c) {
  auto p = plan::parseBatchNormRelu(c.kernel);
  if (!p)
    return p.status();
  const Tensor *g = c.out.size() == 4 ? c.out[3] : c.out[0];
  const Step batchNormBackward{OpId::BatchNormTrainingBackward, batchNormAttrs(c.kernel),
                               {g, c.in[1], c.in[3], c.in[5], c.in[6]}, {c.out[0], c.out[1], c.out[2]}};
  if (p->clipMax)
    return compose(c, {{OpId::BatchNormApply, {}, {c.in[1], c.in[3], c.in[4], c.in[5], c.in[6]}, {g}},
                       {OpId::ClipBackward, clipAttrs(*p->clipMax), {c.in[0], g}, {g}},
                       batchNormBackward});
  return compose(c, {{OpId::ReluBackward, {}, {c.in[0], c.in[2]}, {g}}, batchNormBackward});
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
