// The builder of `fused_elementwise` on the CUDA backend: the kernel's program written as one CUDA
// kernel (fused_elementwise_source.h) over the operands' storage layouts, compiled and loaded
// when the plan is loaded (nvrtc_module.h); its RunFn launches it on the backend's stream.
//
// A program with reduction outputs runs as the reduction kernel of fused_reduction_source.cpp and,
// with more than one slab of rows, its finish kernel.
//
// Generated only: the composed form (each instruction through the own element-wise kernels, with
// scratch) is not offered to the tuner yet.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/fused_elementwise_source.h"
#include "cuda/kernels/nvrtc_module.h"

#include "plan/fused_elementwise.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace castor::cuda::own {
namespace {

// t's element strides over the domain's dims (right-aligned, 0 where it broadcasts), in the
// storage order `order` of the domain.
WalkedOperand walked(const DeviceContext &ctx, const Tensor &t, const Shape &domain, const std::vector<int> &order) {
  const Shape s = shapeOf(t);
  const std::vector<int64_t> st = storageStrides(ctx, t);
  std::vector<int64_t> logical(domain.size(), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t d = s.size() - 1 - i, o = domain.size() - 1 - i;
    logical[o] = s[d] == 1 ? 0 : st[d];
  }
  WalkedOperand w{t.dtype(), {}};
  for (int d : order)
    w.strides.push_back(logical[size_t(d)]);
  return w;
}

// Whether the tensors the kernel indexes by i are 16-byte aligned: its vector path.
bool aligned(DeviceContext *c, const TensorList &inputs, const TensorList &outputs, const std::vector<bool> &inputFlat,
             const std::vector<bool> &outputFlat, std::vector<void *> &pointers) {
  bool ok = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    pointers.push_back(c->ptr(inputs[i]));
    ok = ok && (!inputFlat[i] || reinterpret_cast<uintptr_t>(pointers.back()) % 16 == 0);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    pointers.push_back(c->ptr(outputs[i]));
    ok = ok && (!outputFlat[i] || reinterpret_cast<uintptr_t>(pointers.back()) % 16 == 0);
  }
  return ok;
}

// A kernel with reduction outputs (ReductionLaunch): slabs enough for about four blocks an SM,
// their partial sums in the step's shared workspace (requested here, so that the plan's
// workspace limit counts it), then the finish kernel when there is more than one slab.
Expected<RunFn> launchReduction(DeviceContext &ctx, const FusedKernelSource &source, const LoadedKernel &kernel,
                                const TensorList &in, const TensorList &out) {
  const ReductionLaunch r = source.reduction;
  LoadedKernel finish;
  const int sms = ctx.smCount > 0 ? ctx.smCount : 132;
  const int64_t perSlab = r.innerKept ? r.tiles * r.keptOuter : r.keptOuter;
  int64_t slabs = std::clamp<int64_t>((int64_t(sms) * 4 + perSlab - 1) / perSlab, 1, r.maxSlabs());
  const int64_t rowsPerSlab = (r.reducedOuter + slabs - 1) / slabs;
  slabs = (r.reducedOuter + rowsPerSlab - 1) / rowsPerSlab;
  if (slabs > 1) {
    auto loaded = loadGeneratedKernel(ctx, source.source, r.finishEntry);
    if (!loaded)
      return loaded.status();
    finish = *loaded;
    ctx.requestWorkspace(r.partialBytes(slabs));
  }
  const unsigned grid = unsigned(perSlab * slabs);
  const unsigned finishGrid = unsigned(std::clamp<int64_t>((r.outCount + 255) / 256, 1, int64_t(sms) * 8));
  const int V = source.vector;
  const bool divides = r.inner % V == 0;
  auto opArguments = std::make_shared<std::vector<std::vector<uint8_t>>>(source.opArguments);
  const std::vector<bool> inputFlat = source.inputFlat, outputFlat = source.outputFlat;
  DeviceContext *c = &ctx;
  const TensorList inputs = in, outputs = out;
  return RunFn([=]() -> Status {
    std::vector<void *> pointers;
    const bool isAligned = aligned(c, inputs, outputs, inputFlat, outputFlat, pointers);
    int vectorized = V > 1 && divides && isAligned ? 1 : 0;
    void *partial = c->workspace;
    unsigned slabCount = unsigned(slabs);
    unsigned long long rows = static_cast<unsigned long long>(rowsPerSlab);
    std::vector<void *> args;
    for (void *&p : pointers)
      args.push_back(&p);
    for (std::vector<uint8_t> &bytes : *opArguments)
      args.push_back(bytes.data());
    args.push_back(&partial);
    args.push_back(&slabCount);
    args.push_back(&rows);
    args.push_back(&vectorized);
    CASTOR_RETURN_IF_ERROR(launchGenerated(kernel, grid, 256, c->stream, args.data()));
    if (slabCount == 1)
      return Status::ok();
    std::vector<void *> finishArgs;
    for (size_t k = inputs.size(); k < pointers.size(); ++k)
      finishArgs.push_back(&pointers[k]);
    finishArgs.push_back(&partial);
    finishArgs.push_back(&slabCount);
    return launchGenerated(finish, finishGrid, 256, c->stream, finishArgs.data());
  });
}

} // namespace

Expected<RunFn> buildFusedElementwise(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto fused = plan::parseFusedElementwise(k, in, out);
  if (!fused)
    return fused.status().withContext(k.op());
  const Shape domain = fused->domain;
  // The walk follows the storage order of the first output of the domain's shape (else of the
  // first such input: a group whose outputs are all reductions); an operand of another order is
  // read (or written) through its own strides.
  const Tensor *walkedLike = out[0];
  for (const TensorList *list : {&out, &in}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const Tensor *t) { return shapeOf(*t) == domain; });
    if (it != list->end()) {
      walkedLike = *it;
      break;
    }
  }
  std::vector<int> order = storageOrder(ctx, *walkedLike);
  if (order.size() != domain.size()) {
    order.resize(domain.size());
    for (size_t d = 0; d < order.size(); ++d)
      order[d] = int(d);
  }
  FusedKernelSpec spec;
  spec.program = std::move(fused->program);
  for (int d : order)
    spec.dims.push_back(domain[size_t(d)]);
  for (const Tensor *t : in) {
    spec.inputs.push_back(walked(ctx, *t, domain, order));
    spec.inputAliased.push_back(std::any_of(out.begin(), out.end(), [&](const Tensor *o) { return o->id() == t->id(); }));
  }
  for (const Tensor *t : out) {
    spec.outputs.push_back(walked(ctx, *t, domain, order));
    spec.outputAliased.push_back(std::any_of(in.begin(), in.end(), [&](const Tensor *i) { return i->id() == t->id(); }));
  }
  std::vector<WalkedOperand *> operands;
  for (auto *list : {&spec.inputs, &spec.outputs})
    for (WalkedOperand &o : *list)
      operands.push_back(&o);
  simplifyWalk(spec.dims, operands);
  if (const char *fault = std::getenv("CASTOR_FUSED_ELEMENTWISE_FAULT"); fault && *fault)
    spec.faultOp = fault;
  auto source = writeFusedKernel(spec);
  if (!source)
    return source.status().withContext(k.op());
  auto loaded = loadGeneratedKernel(ctx, source->source, source->entry);
  if (!loaded)
    return loaded.status().withContext(k.op());
  ctx.layerChoices[out[0]->id()] = "generated";
  if (source->reduces)
    return launchReduction(ctx, *source, *loaded, in, out);

  int64_t count = 1;
  for (int64_t d : domain)
    count *= d;
  const int V = source->vector;
  constexpr int kBlock = 256;
  const int64_t work = V > 1 ? std::max<int64_t>(count / V, count % V) : count;
  const int sms = ctx.smCount > 0 ? ctx.smCount : 132;
  const unsigned grid = unsigned(std::clamp<int64_t>((work + kBlock - 1) / kBlock, 1, int64_t(sms) * 8));
  auto opArguments = std::make_shared<std::vector<std::vector<uint8_t>>>(std::move(source->opArguments));
  const std::vector<bool> inputFlat = source->inputFlat, outputFlat = source->outputFlat;
  DeviceContext *c = &ctx; // the context outlives the RunFns
  const LoadedKernel kernel = *loaded;
  const TensorList inputs = in, outputs = out;
  return RunFn([=]() -> Status {
    if (count == 0)
      return Status::ok();
    std::vector<void *> pointers;
    bool aligned = V > 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      pointers.push_back(c->ptr(inputs[i]));
      aligned = aligned && (!inputFlat[i] || reinterpret_cast<uintptr_t>(pointers.back()) % 16 == 0);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      pointers.push_back(c->ptr(outputs[i]));
      aligned = aligned && (!outputFlat[i] || reinterpret_cast<uintptr_t>(pointers.back()) % 16 == 0);
    }
    unsigned long long n = static_cast<unsigned long long>(count);
    int vectorized = aligned ? 1 : 0;
    std::vector<void *> args;
    for (void *&p : pointers)
      args.push_back(&p);
    for (std::vector<uint8_t> &bytes : *opArguments)
      args.push_back(bytes.data());
    args.push_back(&n);
    args.push_back(&vectorized);
    return launchGenerated(kernel, grid, kBlock, c->stream, args.data());
  });
}

} // namespace castor::cuda::own
