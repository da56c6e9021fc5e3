// Builders of the reduction kernels (reduce.cu): conv bias gradient and reduce_sum_to, the
// batch-norm kernels cuDNN does not take, global average pooling.
#include "cuda/kernels/builders.h"
#include "cuda/kernels/reduce.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>

namespace castor::cuda::own {
namespace {

// reduce_sum_to and conv2d_backward_bias: y = scale * sum of x over the dims y broadcasts along.
// The per-channel two-stage kernel when x's storage is [reduced, kept, reduced] and y stores the
// kept dims in the same order; else the general reduction.
Expected<RunFn> buildReduce(DeviceContext &ctx, const std::string &op, const Tensor *x, const Tensor *y, double scale) {
  DeviceContext *c = &ctx;
  const Shape xs = shapeOf(*x), ys = shapeOf(*y);
  if (xs.size() > size_t(kMaxRank) || ys.size() > xs.size())
    return Status::error(op + ": unsupported ranks");
  const auto xst = storageStrides(ctx, *x), yst = storageStrides(ctx, *y);
  struct Dim {
    int64_t size, xs, ys;
    bool kept;
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (xs[d] == 1)
      continue;
    const size_t off = xs.size() - ys.size();
    const bool inY = d >= off;
    const int64_t yd = inY ? ys[d - off] : 1;
    if (yd != xs[d] && yd != 1)
      return Status::error(op + ": the output does not broadcast to the input");
    dims.push_back(Dim{xs[d], xst[d], inY ? yst[d - off] : 0, yd == xs[d]});
  }
  // x's storage order, and the kept dims in y's storage order.
  std::vector<Dim> byX = dims, keptY;
  std::sort(byX.begin(), byX.end(), [](const Dim &p, const Dim &q) { return p.xs > q.xs; });
  for (const Dim &d : dims)
    if (d.kept)
      keptY.push_back(d);
  std::sort(keptY.begin(), keptY.end(), [](const Dim &p, const Dim &q) { return p.ys > q.ys; });
  std::vector<Dim> keptX;
  for (const Dim &d : byX)
    if (d.kept)
      keptX.push_back(d);
  bool sameKeptOrder = keptX.size() == keptY.size();
  for (size_t i = 0; sameKeptOrder && i < keptX.size(); ++i)
    sameKeptOrder = keptX[i].xs == keptY[i].xs;
  // [A reduced][C kept][B reduced] in x's storage order?
  int groups = 0; // kept runs
  int64_t A = 1, C = 1, B = 1;
  for (size_t i = 0; i < byX.size(); ++i) {
    if (byX[i].kept) {
      if (i == 0 || !byX[i - 1].kept)
        ++groups;
      C *= byX[i].size;
    } else {
      (groups == 0 ? A : B) *= byX[i].size;
    }
  }
  if (groups == 0) // a full reduction: one row of every element
    B *= A, A = 1;
  if (groups <= 1 && sameKeptOrder) {
    // The partial sums live only while the kernel runs: the step's shared workspace holds them.
    ctx.requestWorkspace(channelScratchBytes(A, C, B));
    return launch([=]() { return channelSum(c->ref(x), c->ref(y), A, C, B, scale, c->workspace, c->stream); });
  }
  Reduction r;
  for (const Dim &d : keptY) {
    r.kept[r.keptRank] = d.size, r.keptStride[r.keptRank] = d.xs, ++r.keptRank;
    r.outCount *= d.size;
  }
  for (const Dim &d : byX)
    if (!d.kept) {
      r.red[r.redRank] = d.size, r.redStride[r.redRank] = d.xs, ++r.redRank;
      r.redCount *= d.size;
    }
  return launch([=]() { return reduceSum(c->ref(x), c->ref(y), r, scale, c->stream); });
}

} // namespace

// conv2d_backward_bias
Expected<RunFn> buildConv2dBackwardBias(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                        const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  if (in[0]->shape_size() < 2)
    return Status::error(op + ": dy must be [N,K,...]");
  const Tensor *dy = in[0], *db = out[0];
  const ChannelGeometry g = channelGeometry(ctx, *dy);
  if (countOf(*db) != g.C)
    return Status::error(op + ": db must hold K elements");
  ctx.requestWorkspace(channelScratchBytes(g.A, g.C, g.B)); // partial sums, only while it runs
  return launch([=]() { return channelSum(c->ref(dy), c->ref(db), g.A, g.C, g.B, 1.0, c->workspace, s); });
}

// reduce_sum_to
Expected<RunFn> buildReduceSumTo(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  const std::string &op = k.op();
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseReduceSumTo(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  return buildReduce(ctx, op, in[0], out[0], p->scale);
}

namespace {
// What the own batch-norm kernels share: the attributes, the channel geometry of the data
// tensor `x` and the two-stage channel reduction's partial sums (kept per first output).
struct OwnBatchNorm {
  plan::BatchNormParams attrs;
  ChannelGeometry g;
  void *scratch;
};

// Checks that the data tensors share one storage order (the caller has checked the operand
// counts).
Expected<OwnBatchNorm> ownBatchNorm(DeviceContext &ctx, const Kernel &k, std::initializer_list<const Tensor *> data,
                                    const Tensor *x, const Tensor *firstOutput) {
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  if (p->sync)
    return Status::error(k.op() + ": synchronized batch norm (--sync-batch-norm) runs on the cpu backend so far");
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, k.op(), data));
  const ChannelGeometry g = channelGeometry(ctx, *x);
  auto scratch = scratchFor(ctx, kTagChannel, firstOutput, batchNormScratchBytes(g.A, g.C, g.B));
  if (!scratch)
    return scratch.status();
  return OwnBatchNorm{*p, g, *scratch};
}
} // namespace

// batch_norm_training
Expected<RunFn> buildBatchNormTraining(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                       const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(3, 3));
  auto bn = ownBatchNorm(ctx, k, {in[0], out[0]}, in[0], out[0]);
  if (!bn)
    return bn.status();
  const ChannelGeometry g = bn->g;
  void *buf = bn->scratch;
  const auto i = in, o = out;
  const double eps = bn->attrs.epsilon, momentum = bn->attrs.momentum;
  const bool update = out.size() == 5 && in.size() == 5;
  return RunFn([=]() -> Status {
    Ref rm, rv;
    rm.p = nullptr, rv.p = nullptr;
    if (update) {
      // The statistics are updated in place in the outputs (copies first when the ids differ).
      for (int j : {3, 4})
        CASTOR_RETURN_IF_ERROR(c->copyUnlessSame(i[size_t(j)], o[size_t(j)]));
      rm = c->ref(o[3]), rv = c->ref(o[4]);
    }
    return cudaStatus(batchNormTraining(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(o[0]), c->ref(o[1]),
                                        c->ref(o[2]), rm, rv, g.A, g.C, g.B, eps, momentum, buf, s),
                      "batch_norm_training");
  });
}

// batch_norm_inference
Expected<RunFn> buildBatchNormInference(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                        const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(5, 1));
  auto bn = ownBatchNorm(ctx, k, {in[0], out[0]}, in[0], out[0]);
  if (!bn)
    return bn.status();
  const ChannelGeometry g = bn->g;
  void *buf = bn->scratch;
  const auto i = in;
  const Tensor *y = out[0];
  const double eps = bn->attrs.epsilon;
  return launch([=]() {
    return batchNormInference(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(y), g.A,
                              g.C, g.B, eps, buf, s);
  });
}

// batch_norm_training_backward
Expected<RunFn> buildBatchNormTrainingBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                               const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(5, 3));
  auto bn = ownBatchNorm(ctx, k, {in[0], in[1], out[0]}, in[1], out[0]);
  if (!bn)
    return bn.status();
  const ChannelGeometry g = bn->g;
  void *buf = bn->scratch;
  const auto i = in, o = out;
  return launch([=]() {
    return batchNormBackward(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(o[0]),
                             c->ref(o[1]), c->ref(o[2]), g.A, g.C, g.B, buf, s);
  });
}

// batch_norm_running_update. The step's updates, one per batch norm and consecutive in the plan,
// run as one launch (one block each), built by the first of them; the others run nothing.
Expected<RunFn> buildBatchNormRunningUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                            const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  if (isCovered(ctx))
    return coveredKernel();
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseBatchNormRunningUpdate(k);
  if (!p)
    return p.status();
  if (p->sync)
    return Status::error(k.op() + ": synchronized batch norm (--sync-batch-norm) runs on the cpu backend so far");
  // The skip flag (found_inf), when the step's update can be skipped: then every update of the
  // group is under that same flag.
  const bool flagged = in.size() == 5;
  CASTOR_RETURN_IF_ERROR(need(flagged ? 5 : 4, 2));
  const auto i = in;
  const Ref found = flagged ? c->ref(in[4]) : Ref{};
  const plan::BatchNormRunningUpdateParams a = *p;
  const std::vector<int> group = consecutiveRun(ctx, [&](const Kernel &j) {
    if (j.op() != k.op() || j.inputs_size() != k.inputs_size() || j.outputs_size() != 2)
      return false;
    if (flagged && j.inputs(4) != k.inputs(4))
      return false;
    auto q = plan::parseBatchNormRunningUpdate(j);
    const std::vector<const Tensor *> ts = operandsOf(ctx, j);
    if (!q || q->sync || std::find(ts.begin(), ts.end(), nullptr) != ts.end())
      return false;
    return std::all_of(ts.begin(), ts.begin() + 4, [&](const Tensor *t) { return countOf(*t) == countOf(*ts[0]); });
  });
  if (group.size() > 1) {
    std::vector<RunningUpdate> updates;
    for (int g : group) {
      const Kernel &j = ctx.plan->kernels(g);
      const auto q = plan::parseBatchNormRunningUpdate(j);
      const std::vector<const Tensor *> ts = operandsOf(ctx, j);
      RunningUpdate u;
      u.runMean = c->ref(ts[0]), u.runVar = c->ref(ts[1]), u.mean = c->ref(ts[2]), u.invStd = c->ref(ts[3]);
      u.C = countOf(*ts[0]), u.count = q->count, u.momentum = q->momentum, u.eps = q->epsilon;
      updates.push_back(u);
    }
    auto buffer = scratchFor(ctx, kTagMulti, out[0], updates.size() * sizeof(RunningUpdate));
    if (!buffer)
      return buffer.status();
    CASTOR_CUDA(cudaMemcpy(*buffer, updates.data(), updates.size() * sizeof(RunningUpdate), cudaMemcpyHostToDevice));
    for (size_t g = 1; g < group.size(); ++g)
      ctx.coveredKernels.insert(group[g]);
    const auto *entries = static_cast<const RunningUpdate *>(*buffer);
    const int n = int(updates.size());
    return launch([=]() { return batchNormRunningUpdateAll(entries, n, found, s); });
  }
  return launch([=]() {
    return batchNormRunningUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), found, countOf(*i[0]),
                                  a.momentum, a.epsilon, a.count, s);
  });
}

// global_avg_pool, global_avg_pool_backward
Expected<RunFn> buildGlobalAvgPool(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const bool fwd = opOf(k) == OpId::GlobalAvgPool;
  const Tensor *big = fwd ? in[0] : out[0];
  if (big->shape_size() < 2)
    return Status::error(op + " takes [N,C,...]");
  const Shape xs = shapeOf(*big);
  const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
  const bool cl = ctx.channelsLast(big);
  const Tensor *x = in[0], *y = out[0];
  return launch([=]() {
    return fwd ? globalAvgPool(c->ref(x), c->ref(y), N, C, inner, cl, s)
               : globalAvgPoolBackward(c->ref(x), c->ref(y), N, C, inner, cl, s);
  });
}

} // namespace castor::cuda::own
