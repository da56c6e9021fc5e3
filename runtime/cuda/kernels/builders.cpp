// The CUDA backend's own kernels, for every plan op that no library call covers: element-wise
// ops, casts, pooling, reductions, the loss, the optimizers and the loss scaler. Each .cu file of
// this folder has its builder beside it (elementwise.cpp, reduce.cpp, pooling.cpp, loss.cpp,
// optimizer.cpp); this file holds the helpers they share. executor/kernel_table.cpp maps ops to
// builders.
//
// Layouts: a rank-4 float tensor may be stored channels-last (base/device_context.h). Same-shape
// element-wise kernels are layout-agnostic when every operand has the same storage order;
// broadcasts index each operand by its storage strides in the output's storage order;
// reductions, pooling, dropout (its mask is keyed by the logical index), concat/split and
// softmax describe channels-last operands to the kernels; reshapes between a channels-last
// tensor and one of another shape reorder. A kernel that cannot run on its layouts is refused
// when it is built, naming the op and CASTOR_CUDA_LAYOUT=nchw.
//
// Scratch beyond ctx.scratch comes from ctx.persistentBuffer, keyed by a tag in the top four
// bits and the id of a tensor that only this kernel writes.
#include "cuda/kernels/builders.h"
#include "plan/storage_order.h"

namespace castor::cuda::own {
Expected<void *> scratchFor(DeviceContext &ctx, ScratchTag tag, const Tensor *owner, size_t bytes) {
  if (owner->id() >= (1u << 28))
    return Status::error("tensor id " + std::to_string(owner->id()) + " beyond the scratch key range");
  return ctx.persistentBuffer(uint32_t(tag) << 28 | owner->id(), bytes);
}

std::vector<const Tensor *> operandsOf(const DeviceContext &ctx, const Kernel &k) {
  std::vector<const Tensor *> ts;
  for (auto *ids : {&k.inputs(), &k.outputs()})
    for (uint32_t id : *ids) {
      auto it = ctx.tensorsById->find(id);
      ts.push_back(it == ctx.tensorsById->end() ? nullptr : it->second);
    }
  return ts;
}

std::vector<int> consecutiveRun(const DeviceContext &ctx, const std::function<bool(const Kernel &)> &joins) {
  std::vector<int> run;
  if (!ctx.plan || !ctx.tensorsById || ctx.buildingKernel < 0)
    return run;
  for (int j = ctx.buildingKernel; j < ctx.plan->kernels_size(); ++j) {
    const Kernel &k = ctx.plan->kernels(j);
    if (!joins(k))
      break;
    bool pending = false;
    for (const Tensor *t : operandsOf(ctx, k))
      pending = pending || !t || ctx.pendingWrites.count(t->id());
    if (pending)
      break;
    run.push_back(j);
  }
  return run;
}

bool isCovered(const DeviceContext &ctx) { return ctx.coveredKernels.count(ctx.buildingKernel) > 0; }

RunFn coveredKernel() {
  return RunFn([]() { return Status::ok(); });
}

Status layoutError(const std::string &op, const std::string &what) {
  return Status::error(op + ": " + what +
                       " is not supported with channels-last storage on cuda; run with CASTOR_CUDA_LAYOUT=nchw");
}

// Whether t's storage order differs from the plan's row-major order (channels-last with C > 1
// and H*W > 1; [N,1,H,W] and [N,C,1,1] are the same bytes either way).
bool reordered(const DeviceContext &ctx, const Tensor *t) {
  return ctx.channelsLast(t) && plan::ordersDiffer(*t);
}

// Operands of one shape must share their storage order.
Status sameOrder(const DeviceContext &ctx, const std::string &op, std::initializer_list<const Tensor *> ts) {
  const bool first = reordered(ctx, *ts.begin());
  for (const Tensor *t : ts)
    if (t && reordered(ctx, t) != first)
      return layoutError(op, "operands stored in different orders (channels-last and row-major)");
  return Status::ok();
}

// Element stride in storage of each logical dim of t.
std::vector<int64_t> storageStrides(const DeviceContext &ctx, const Tensor &t) {
  const Shape s = shapeOf(t);
  std::vector<int64_t> st(s.size(), 0);
  if (ctx.channelsLast(&t)) { // [N,C,H,W] stored [N,H,W,C]
    st[1] = 1, st[3] = s[1], st[2] = s[3] * s[1], st[0] = s[2] * s[3] * s[1];
    return st;
  }
  int64_t k = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = k;
    k *= s[d];
  }
  return st;
}

// The logical dims of t from the outermost in storage to the innermost.
std::vector<int> storageOrder(const DeviceContext &ctx, const Tensor &t) {
  if (ctx.channelsLast(&t))
    return {0, 2, 3, 1};
  std::vector<int> order(size_t(t.shape_size()));
  for (size_t d = 0; d < order.size(); ++d)
    order[d] = int(d);
  return order;
}

// a, b broadcast against out, in out's storage order, each indexed by its storage strides.
Expected<Broadcast> physicalBroadcast(const DeviceContext &ctx, const Tensor *a, const Tensor *b, const Tensor *out) {
  const Shape os = shapeOf(*out);
  if (os.size() > size_t(kMaxRank))
    return Status::error("broadcasting over more than " + std::to_string(kMaxRank) + " dimensions");
  auto aligned = [&](const Tensor *t) -> Expected<std::vector<int64_t>> {
    const Shape ts = shapeOf(*t);
    const auto st = storageStrides(ctx, *t);
    if (ts.size() > os.size())
      return Status::error("operand of higher rank than the output");
    std::vector<int64_t> r(os.size(), 0);
    for (size_t i = 0; i < ts.size(); ++i) {
      const size_t d = ts.size() - 1 - i, o = os.size() - 1 - i;
      if (ts[d] != os[o] && ts[d] != 1)
        return Status::error("operand does not broadcast to the output");
      r[o] = ts[d] == 1 ? 0 : st[d];
    }
    return r;
  };
  auto sa = aligned(a), sb = aligned(b);
  if (!sa)
    return sa.status();
  if (!sb)
    return sb.status();
  const std::vector<int> order = storageOrder(ctx, *out);
  Broadcast bc;
  bc.rank = int(os.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t d = size_t(order[k]);
    bc.out[k] = os[d], bc.sa[k] = (*sa)[d], bc.sb[k] = (*sb)[d];
  }
  return bc;
}

ChannelGeometry channelGeometry(const DeviceContext &ctx, const Tensor &x) {
  const Shape s = shapeOf(x);
  if (ctx.channelsLast(&x))
    return {s[0] * s[2] * s[3], s[1], 1};
  return {s.empty() ? 1 : s[0], s.size() > 1 ? s[1] : 1, span(s, 2, s.size())};
}

OperandCheck operandCheck(const std::string &op, const TensorList &in, const TensorList &out) { return {op, in, out}; }

Status OperandCheck::operator()(size_t nin, size_t nout) const {
  if (in.size() < nin || out.size() < nout)
    return Status::error(op + " needs at least " + std::to_string(nin) + " inputs and " + std::to_string(nout) +
                         " outputs");
  return Status::ok();
}

} // namespace castor::cuda::own
