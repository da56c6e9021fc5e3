// The CUDA backend's own kernels (elementwise.cu, reduce.cu, pooling.cu, loss.cu, optimizer.cu)
// for every plan op that no library call covers: element-wise ops, casts, pooling, reductions,
// the loss, the optimizers and the loss scaler.
//
// Layouts: a rank-4 float tensor may be stored channels-last (device_context.h). Same-shape
// element-wise kernels are layout-agnostic when every operand has the same storage order;
// broadcasts index each operand by its storage strides in the output's storage order;
// reductions, pooling, dropout (its mask is keyed by the logical index), concat/split and
// softmax describe channels-last operands to the kernels; reshapes between a channels-last
// tensor and one of another shape reorder. A kernel that cannot run on its layouts is refused
// when it is built, naming the op and CASTOR_CUDA_LAYOUT=nchw.
//
// Scratch beyond ctx.scratch comes from ctx.persistentBuffer, keyed by a tag in the top four
// bits and the id of a tensor that only this kernel writes.
#include "cuda/device_context.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace castor::cuda {
namespace {

using plan::Kernel;
using plan::Tensor;

enum ScratchTag : uint32_t { kTagChannel = 0x8, kTagLoss = 0x9, kTagMulti = 0xA, kTagReorder = 0xB };

Expected<void *> scratchFor(DeviceContext &ctx, ScratchTag tag, const Tensor *owner, size_t bytes) {
  if (owner->id() >= (1u << 28))
    return Status::error("tensor id " + std::to_string(owner->id()) + " beyond the scratch key range");
  return ctx.persistentBuffer(uint32_t(tag) << 28 | owner->id(), bytes);
}

Status layoutError(const std::string &op, const std::string &what) {
  return Status::error(op + ": " + what +
                       " is not supported with channels-last storage on cuda; run with CASTOR_CUDA_LAYOUT=nchw");
}

// Whether t's storage order differs from the plan's row-major order (channels-last with C > 1
// and H*W > 1; [N,1,H,W] and [N,C,1,1] are the same bytes either way).
bool reordered(const DeviceContext &ctx, const Tensor *t) {
  if (!ctx.channelsLast(t))
    return false;
  return t->shape(1) != 1 && t->shape(2) * t->shape(3) != 1;
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

// x = [A, C, B] per channel (dim 1): channels-last [N*H*W, C, 1], else [N, C, prod(rest)].
struct ChannelGeometry {
  int64_t A, C, B;
};
ChannelGeometry channelGeometry(const DeviceContext &ctx, const Tensor &x) {
  const Shape s = shapeOf(x);
  if (ctx.channelsLast(&x))
    return {s[0] * s[2] * s[3], s[1], 1};
  return {s.empty() ? 1 : s[0], s.size() > 1 ? s[1] : 1, span(s, 2, s.size())};
}

bool overlap(const Tensor *a, const Tensor *b) {
  return a->offset() < b->offset() + b->bytes() && b->offset() < a->offset() + a->bytes();
}

// identity/reshape/flatten/cast: a copy (or conversion) when x and y have the same storage order,
// else a reorder through channels-last <-> row-major.
Expected<RunFn> buildCopy(DeviceContext &ctx, const std::string &op, const Tensor *x, const Tensor *y) {
  DeviceContext *c = &ctx;
  const bool rx = reordered(ctx, x), ry = reordered(ctx, y);
  if (countOf(*x) != countOf(*y))
    return Status::error(op + ": input and output element counts differ");
  if ((!rx && !ry) || (rx && ry && shapeOf(*x) == shapeOf(*y))) {
    if (x->dtype() == y->dtype())
      return RunFn([c, x, y]() {
        if (x->offset() == y->offset())
          return Status::ok();
        return cudaStatus(cudaMemcpyAsync(c->ptr(y), c->ptr(x), x->bytes(), cudaMemcpyDeviceToDevice, c->stream),
                          "copy");
      });
    return launch([c, x, y]() { return convert(c->ref(x), c->ref(y), countOf(*y), c->stream); });
  }
  if (overlap(x, y))
    return layoutError(op, "an in-place reshape between a channels-last tensor and a tensor of another shape "
                           "(the bytes must be reordered)");
  if (rx && ry && x->dtype() != y->dtype())
    return layoutError(op, "a cast that also reshapes a channels-last tensor");
  // One temporary: the converted input (x's order, y's dtype) or the row-major middle of a
  // channels-last -> channels-last reshape.
  const bool needTemp = x->dtype() != y->dtype() || (rx && ry);
  void *temp = nullptr;
  if (needTemp) {
    auto t = scratchFor(ctx, kTagReorder, y, y->bytes());
    if (!t)
      return t.status();
    temp = *t;
  }
  const int elem = int(plan::dtypeSize(y->dtype()));
  const Shape xs = shapeOf(*x), ys = shapeOf(*y);
  return RunFn([=]() -> Status {
    const void *src = c->ptr(x);
    if (x->dtype() != y->dtype()) {
      CASTOR_CUDA(convert(c->ref(x), Ref{temp, int(y->dtype())}, countOf(*x), c->stream));
      src = temp;
    }
    if (rx && ry) { // reshape: x channels-last -> row-major temp -> y channels-last
      CASTOR_CUDA(fromChannelsLast(src, temp, xs[0], xs[1], xs[2] * xs[3], elem, c->stream));
      CASTOR_CUDA(toChannelsLast(temp, c->ptr(y), ys[0], ys[1], ys[2] * ys[3], elem, c->stream));
    } else if (rx) {
      CASTOR_CUDA(fromChannelsLast(src, c->ptr(y), xs[0], xs[1], xs[2] * xs[3], elem, c->stream));
    } else {
      CASTOR_CUDA(toChannelsLast(src, c->ptr(y), ys[0], ys[1], ys[2] * ys[3], elem, c->stream));
    }
    return Status::ok();
  });
}

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
    auto scratch = scratchFor(ctx, kTagChannel, y, channelScratchBytes(A, C, B));
    if (!scratch)
      return scratch.status();
    void *buf = *scratch;
    return launch([=]() { return channelSum(c->ref(x), c->ref(y), A, C, B, scale, buf, c->stream); });
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

PoolGeometry poolGeometry(const plan::Pool2dParams &p, const Shape &xs, const Shape &ys, bool channelsLast) {
  const auto &a = p.shape;
  PoolGeometry g{};
  g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3], g.P = ys[2], g.Q = ys[3];
  g.kh = a.kernel[0], g.kw = a.kernel[1], g.sh = a.strides[0], g.sw = a.strides[1];
  g.padTop = a.pads[0], g.padLeft = a.pads[1], g.padBottom = a.pads[2], g.padRight = a.pads[3];
  g.dh = a.dilations[0], g.dw = a.dilations[1];
  g.includePad = p.countIncludePad;
  g.channelsLast = channelsLast;
  return g;
}

LossReduction lossReduction(shape::Reduction r) {
  return r == shape::Reduction::Mean ? LossReduction::Mean
         : r == shape::Reduction::Sum ? LossReduction::Sum
                                      : LossReduction::None;
}

constexpr double inf = std::numeric_limits<double>::infinity();

// A check that the kernel has at least nin inputs and nout outputs.
auto operandCheck(const std::string &op, const TensorList &in, const TensorList &out) {
  return [&op, &in, &out](size_t nin, size_t nout) -> Status {
    if (in.size() < nin || out.size() < nout)
      return Status::error(op + " needs at least " + std::to_string(nin) + " inputs and " + std::to_string(nout) +
                           " outputs");
    return Status::ok();
  };
}

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
  auto scratch = scratchFor(ctx, kTagChannel, db, channelScratchBytes(g.A, g.C, g.B));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  return launch([=]() { return channelSum(c->ref(dy), c->ref(db), g.A, g.C, g.B, 1.0, buf, s); });
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

// relu, sigmoid, clip
Expected<RunFn> buildUnary(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  double lo = -inf, hi = inf;
  UnaryOp u = op == "relu" ? UnaryOp::Relu : op == "sigmoid" ? UnaryOp::Sigmoid : UnaryOp::Clip;
  if (op == "clip") {
    auto p = plan::parseClip(k);
    if (!p)
      return p.status();
    lo = p->min ? *p->min : -inf, hi = p->max ? *p->max : inf;
  } else {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  }
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], out[0]}));
  const Tensor *x = in[0], *y = out[0];
  return launch([=]() { return unary(u, c->ref(x), c->ref(y), countOf(*y), lo, hi, s); });
}

// relu_backward, sigmoid_backward, clip_backward
Expected<RunFn> buildUnaryBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  double lo = -inf, hi = inf;
  BackwardOp b = op == "relu_backward"      ? BackwardOp::Relu
                 : op == "sigmoid_backward" ? BackwardOp::Sigmoid
                                            : BackwardOp::Clip;
  if (op == "clip_backward") {
    auto p = plan::parseClip(k);
    if (!p)
      return p.status();
    lo = p->min ? *p->min : -inf, hi = p->max ? *p->max : inf;
  } else {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  }
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], out[0]}));
  const Tensor *dy = in[0], *sv = in[1], *dx = out[0];
  return launch([=]() { return backward(b, c->ref(dy), c->ref(sv), c->ref(dx), countOf(*dx), lo, hi, s); });
}

// add, mul
Expected<RunFn> buildBinary(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  auto bc = physicalBroadcast(ctx, in[0], in[1], out[0]);
  if (!bc)
    return bc.status().withContext(op);
  const Broadcast b = simplifyBroadcast(*bc);
  const BinaryOp bo = op == "add" ? BinaryOp::Add : BinaryOp::Mul;
  const Tensor *x = in[0], *y = in[1], *z = out[0];
  return launch([=]() { return binary(bo, c->ref(x), c->ref(y), c->ref(z), b, countOf(*z), s); });
}

// identity, cast, reshape, flatten
Expected<RunFn> buildCopyOrCast(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  const std::string &op = k.op();
  const auto need = operandCheck(k.op(), in, out);
  if (op == "flatten") {
    auto axis = plan::parseAxis(k, 1);
    if (!axis)
      return axis.status();
  } else {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  }
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  return buildCopy(ctx, op, in[0], out[0]);
}

// fill
Expected<RunFn> buildFill(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseFill(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(0, 1));
  const Tensor *y = out[0];
  const double v = p->value;
  return launch([=]() { return fill(c->ref(y), countOf(*y), v, s); });
}

// dropout, dropout_backward
Expected<RunFn> buildDropout(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseDropout(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0], *it = in.size() > 1 ? in[1] : nullptr;
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {x, y}));
  DropoutGeometry g;
  if (reordered(ctx, y)) {
    g.channelsLast = true;
    g.N = y->shape(0), g.C = y->shape(1), g.H = y->shape(2), g.W = y->shape(3);
  }
  const plan::DropoutParams d = *p;
  return launch([=]() {
    return dropout(c->ref(x), c->ref(y), countOf(*y), it ? c->ints(it) : nullptr, d.ratio, d.seed, d.salt, g, s);
  });
}

// batch_norm_training
Expected<RunFn> buildBatchNormTraining(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                       const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(3, 3));
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], out[0]}));
  const ChannelGeometry g = channelGeometry(ctx, *in[0]);
  auto scratch = scratchFor(ctx, kTagChannel, out[0], batchNormScratchBytes(g.A, g.C, g.B));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  const auto i = in, o = out;
  const double eps = p->epsilon, momentum = p->momentum;
  const bool update = out.size() == 5 && in.size() == 5;
  return RunFn([=]() -> Status {
    Ref rm, rv;
    rm.p = nullptr, rv.p = nullptr;
    if (update) {
      // The statistics are updated in place in the outputs (copies first when the ids differ).
      for (int j : {3, 4})
        if (i[size_t(j)]->offset() != o[size_t(j)]->offset())
          CASTOR_CUDA(cudaMemcpyAsync(c->ptr(o[size_t(j)]), c->ptr(i[size_t(j)]), i[size_t(j)]->bytes(),
                                      cudaMemcpyDeviceToDevice, s));
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
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(5, 1));
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], out[0]}));
  const ChannelGeometry g = channelGeometry(ctx, *in[0]);
  auto scratch = scratchFor(ctx, kTagChannel, out[0], batchNormScratchBytes(g.A, g.C, g.B));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  const auto i = in;
  const Tensor *y = out[0];
  const double eps = p->epsilon;
  return launch([=]() {
    return batchNormInference(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(y), g.A,
                              g.C, g.B, eps, buf, s);
  });
}

// batch_norm_training_backward
Expected<RunFn> buildBatchNormTrainingBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                               const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseBatchNorm(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(5, 3));
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], out[0]}));
  const ChannelGeometry g = channelGeometry(ctx, *in[1]);
  auto scratch = scratchFor(ctx, kTagChannel, out[0], batchNormScratchBytes(g.A, g.C, g.B));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  const auto i = in, o = out;
  return launch([=]() {
    return batchNormBackward(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(o[0]),
                             c->ref(o[1]), c->ref(o[2]), g.A, g.C, g.B, buf, s);
  });
}

// batch_norm_running_update
Expected<RunFn> buildBatchNormRunningUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                            const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseBatchNormRunningUpdate(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(4, 2));
  const auto i = in;
  const plan::BatchNormRunningUpdateParams a = *p;
  return launch([=]() {
    return batchNormRunningUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), countOf(*i[0]),
                                  a.momentum, a.epsilon, a.count, s);
  });
}

// max_pool2d, avg_pool2d
Expected<RunFn> buildPool(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parsePool2d(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0];
  if (x->shape_size() != 4 || y->shape_size() != 4)
    return Status::error(op + " takes [N,C,H,W]");
  if (ctx.channelsLast(x) != ctx.channelsLast(y))
    return layoutError(op, "input and output in different layouts");
  const PoolGeometry g = poolGeometry(*p, shapeOf(*x), shapeOf(*y), ctx.channelsLast(x));
  const bool isMax = op == "max_pool2d";
  return launch([=]() { return pool2d(isMax, c->ref(x), c->ref(y), g, s); });
}

// max_pool2d_backward, avg_pool2d_backward
Expected<RunFn> buildPoolBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parsePool2d(k);
  if (!p)
    return p.status();
  const bool isMax = op == "max_pool2d_backward";
  CASTOR_RETURN_IF_ERROR(need(isMax ? 2 : 1, 1));
  const Tensor *dy = in[0], *x = isMax ? in[1] : nullptr, *dx = out[0];
  if (dy->shape_size() != 4 || dx->shape_size() != 4 || (x && x->shape_size() != 4))
    return Status::error(op + " takes [N,C,H,W]");
  if (ctx.channelsLast(dy) != ctx.channelsLast(dx) || (x && ctx.channelsLast(x) != ctx.channelsLast(dx)))
    return layoutError(op, "operands in different layouts");
  const PoolGeometry g = poolGeometry(*p, shapeOf(*dx), shapeOf(*dy), ctx.channelsLast(dx));
  return launch([=]() { return pool2dBackward(isMax, c->ref(dy), x ? c->ref(x) : Ref{}, c->ref(dx), g, s); });
}

// global_avg_pool, global_avg_pool_backward
Expected<RunFn> buildGlobalAvgPool(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const bool fwd = op == "global_avg_pool";
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

// softmax, softmax_backward
Expected<RunFn> buildSoftmax(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto axis = plan::parseAxis(k, -1);
  if (!axis)
    return axis.status();
  const bool fwd = op == "softmax";
  CASTOR_RETURN_IF_ERROR(need(fwd ? 1 : 2, 1));
  if (fwd)
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], out[0]}));
  else
    CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], out[0]}));
  const Shape xs = shapeOf(*out[0]);
  auto ax = shape::normalizeAxis(*axis, int64_t(xs.size()));
  if (!ax)
    return Status::error("axis out of range");
  // Storage shape and axis (all operands share the order).
  const Shape ps = reordered(ctx, out[0]) ? physicalShape(ctx, *out[0]) : xs;
  const size_t pax = size_t(reordered(ctx, out[0]) ? physicalAxis(ctx, *out[0], int(*ax)) : int(*ax));
  const int64_t outer = span(ps, 0, pax), n = ps[pax], inner = span(ps, pax + 1, ps.size());
  const auto i = in;
  const Tensor *y = out[0];
  return launch([=]() {
    return fwd ? softmax(c->ref(i[0]), c->ref(y), outer, n, inner, s)
               : softmaxBackward(c->ref(i[0]), c->ref(i[1]), c->ref(y), outer, n, inner, s);
  });
}

// softmax_cross_entropy
Expected<RunFn> buildSoftmaxCrossEntropy(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                         const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSoftmaxCrossEntropy(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  const Tensor *x = in[0], *labels = in[1], *loss = out[0], *probs = out.size() > 1 ? out[1] : nullptr;
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  auto scratch = scratchFor(ctx, kTagLoss, loss, lossScratchBytes(N));
  if (!scratch)
    return scratch.status();
  void *buf = *scratch;
  const double eps = p->labelSmoothing;
  const LossReduction red = lossReduction(p->reduction);
  return launch([=]() {
    return softmaxCrossEntropy(c->ref(x), c->ints(labels), c->ref(loss), probs ? c->ref(probs) : Ref{nullptr, kF32},
                               N, C, eps, red, buf, s);
  });
}

// softmax_cross_entropy_backward
Expected<RunFn> buildSoftmaxCrossEntropyBackward(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                                 const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSoftmaxCrossEntropy(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(3, 1));
  const Tensor *dl = in[0], *x = in[1], *labels = in[2], *dx = out[0];
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const LossReduction red = lossReduction(p->reduction);
  return launch(
      [=]() {
        return softmaxCrossEntropyBackward(c->ref(dl), c->ref(x), c->ints(labels), c->ref(dx), N, C, eps, red, s);
      });
}

// count_correct
Expected<RunFn> buildCountCorrect(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(2, 1));
  const Tensor *x = in[0], *labels = in[1], *y = out[0];
  if (x->shape_size() != 2)
    return Status::error(op + " takes logits [N,C]");
  const int64_t N = x->shape(0), C = x->shape(1);
  return launch([=]() { return countCorrect(c->ref(x), c->ints(labels), c->ints(y), N, C, s); });
}

// concat, split
Expected<RunFn> buildConcatOrSplit(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  auto axis = plan::parseAxis(k, 0);
  if (!axis)
    return axis.status();
  const bool isConcat = op == "concat";
  if (in.empty() || out.empty())
    return Status::error(op + " needs operands");
  const Tensor *whole = isConcat ? out.at(0) : in.at(0);
  const std::vector<const Tensor *> parts = isConcat ? in : out;
  const Shape ws = shapeOf(*whole);
  auto ax = shape::normalizeAxis(*axis, int64_t(ws.size()));
  if (!ax)
    return Status::error("axis out of range");
  for (const Tensor *t : parts) {
    if (t->dtype() != whole->dtype())
      return Status::error(op + " operands must share one dtype");
    if (ctx.channelsLast(t) != ctx.channelsLast(whole))
      return layoutError(op, "operands in different layouts");
  }
  // In storage order: channels-last maps the axis (C is innermost).
  const Shape ps = physicalShape(ctx, *whole);
  const size_t pax = size_t(physicalAxis(ctx, *whole, int(*ax)));
  const int logicalAxis = int(*ax);
  const int64_t outer = span(ps, 0, pax);
  const uint64_t innerBytes = uint64_t(span(ps, pax + 1, ps.size())) * plan::dtypeSize(whole->dtype());
  const uint64_t rowBytes = uint64_t(ps[pax]) * innerBytes;
  return RunFn([=]() -> Status {
    uint64_t at = 0;
    for (const Tensor *t : parts) {
      const uint64_t chunk = uint64_t(t->shape(logicalAxis)) * innerBytes;
      if (chunk > 0 && outer > 0) {
        if (isConcat)
          CASTOR_CUDA(cudaMemcpy2DAsync(c->ptr(whole) + at, rowBytes, c->ptr(t), chunk, chunk, size_t(outer),
                                        cudaMemcpyDeviceToDevice, s));
        else
          CASTOR_CUDA(cudaMemcpy2DAsync(c->ptr(t), chunk, c->ptr(whole) + at, rowBytes, chunk, size_t(outer),
                                        cudaMemcpyDeviceToDevice, s));
      }
      at += chunk;
    }
    return Status::ok();
  });
}

// sgd_update
Expected<RunFn> buildSgdUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseSgd(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(4, 2));
  const bool hasFlag = in.size() == 6 || (in.size() == 5 && in[4]->dtype() != plan::I64);
  const Tensor *step = in.size() >= 5 && in[4]->dtype() == plan::I64 ? in[4] : nullptr;
  if (p->momentum != 0 && !step)
    return Status::error("sgd with momentum needs the step counter as its 5th input");
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], in[2]}));
  const Tensor *found = hasFlag ? in.back() : nullptr;
  const auto i = in;
  const plan::SgdParams a = *p;
  return launch([=]() {
    return sgdUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), step ? c->ints(step) : nullptr,
                     found ? c->ref(found) : Ref{nullptr, kF32}, countOf(*i[0]), a.momentum, a.nesterov,
                     a.weightDecay, a.dampening, s);
  });
}

// adamw_update
Expected<RunFn> buildAdamwUpdate(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseAdamW(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(6, 3));
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, op, {in[0], in[1], in[2], in[3]}));
  const Tensor *found = in.size() == 7 ? in[6] : nullptr;
  const auto i = in;
  const plan::AdamWParams a = *p;
  return launch([=]() {
    return adamwUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ints(i[5]),
                       found ? c->ref(found) : Ref{nullptr, kF32}, countOf(*i[0]), a.beta1, a.beta2, a.eps,
                       a.weightDecay, s);
  });
}

// increment
Expected<RunFn> buildIncrement(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseIncrement(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *x = in[0], *y = out[0], *flag = in.size() > 1 ? in[1] : nullptr;
  const bool whenSet = p->whenSet;
  return launch(
      [=]() { return increment(c->ints(x), c->ints(y), flag ? c->ref(flag) : Ref{nullptr, kF32}, whenSet, s); });
}

// lr_schedule
Expected<RunFn> buildLrSchedule(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseLrSchedule(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  LrSchedule l;
  using Kind = plan::LrScheduleParams::Kind;
  l.kind = p->kind == Kind::Constant ? 0 : p->kind == Kind::Step ? 1 : 2;
  l.baseLr = p->baseLr, l.gamma = p->gamma, l.minLr = p->minLr;
  l.warmupSteps = p->warmupSteps, l.stepSize = p->stepSize, l.totalSteps = p->totalSteps;
  const Tensor *it = in[0], *lr = out[0];
  return launch([=]() { return lrSchedule(c->ints(it), c->ref(lr), l, s); });
}

// unscale_gradients, clip_grad_norm
Expected<RunFn> buildUnscaleGradients(DeviceContext &ctx, const Kernel &k, const TensorList &in,
                                      const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  const bool isUnscale = op == "unscale_gradients";
  double maxNorm = 0;
  if (isUnscale) {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    if (in.size() < 2 || out.size() != in.size())
      return Status::error("unscale_gradients takes n gradients and the scale, and produces n gradients and "
                           "found_inf");
  } else {
    auto p = plan::parseClipGradNorm(k);
    if (!p)
      return p.status();
    maxNorm = p->maxNorm;
    if (in.empty() || out.size() != in.size() + 1)
      return Status::error("clip_grad_norm takes n gradients and produces n gradients and total_norm");
  }
  // One table of every gradient (the arena does not move: pointers are final), uploaded now.
  const size_t n = isUnscale ? in.size() - 1 : in.size();
  std::vector<TensorEntry> entries;
  for (size_t j = 0; j < n; ++j) {
    const Tensor *g = in[j];
    if (!isFloat(g->dtype()))
      return Status::error(op + ": gradient '" + g->name() + "' is not a float tensor");
    if (countOf(*g) > int64_t(1) << 40)
      return Status::error(op + ": gradient too large");
    TensorEntry e;
    e.p = c->ptr(g), e.n = countOf(*g), e.dt = int32_t(g->dtype());
    entries.push_back(e);
  }
  const Tensor *result = out.back(); // found_inf or total_norm: written only by this kernel
  auto buffer = scratchFor(ctx, kTagMulti, result, multiTensorBytes(entries));
  if (!buffer)
    return buffer.status();
  MultiTensorTable table;
  CASTOR_CUDA(uploadMultiTensor(entries, *buffer, &table));
  if (isUnscale) {
    const Tensor *scale = in.back();
    return launch([=]() { return unscaleAll(table, c->ref(scale), c->ref(result), s); });
  }
  return launch([=]() { return clipAll(table, c->ref(result), maxNorm, s); });
}

// update_loss_scale
Expected<RunFn> buildUpdateLossScale(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  auto p = plan::parseUpdateLossScale(k);
  if (!p)
    return p.status();
  CASTOR_RETURN_IF_ERROR(need(3, 2));
  const Tensor *scale = in[0], *tracker = in[1], *found = in[2];
  const plan::UpdateLossScaleParams a = *p;
  return launch([=]() {
    return updateLossScale(c->ref(scale), c->ints(tracker), c->ref(found), a.growth, a.backoff, a.interval, s);
  });
}

// gradient_stats
Expected<RunFn> buildGradientStats(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const cudaStream_t s = ctx.stream;
  const auto need = operandCheck(k.op(), in, out);
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  CASTOR_RETURN_IF_ERROR(need(1, 1));
  const Tensor *g = in[0], *y = out[0];
  return launch([=]() { return gradientStats(c->ref(g), countOf(*g), c->ref(y), c->scratch, s); });
}

} // namespace

Expected<RunFn> buildOwnKernel(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  using Build = Expected<RunFn> (*)(DeviceContext &, const Kernel &, const TensorList &, const TensorList &);
  static const std::unordered_map<std::string, Build> builders = {
      {"conv2d_backward_bias", buildConv2dBackwardBias},
      {"reduce_sum_to", buildReduceSumTo},
      {"relu", buildUnary},
      {"sigmoid", buildUnary},
      {"clip", buildUnary},
      {"relu_backward", buildUnaryBackward},
      {"sigmoid_backward", buildUnaryBackward},
      {"clip_backward", buildUnaryBackward},
      {"add", buildBinary},
      {"mul", buildBinary},
      {"identity", buildCopyOrCast},
      {"cast", buildCopyOrCast},
      {"reshape", buildCopyOrCast},
      {"flatten", buildCopyOrCast},
      {"fill", buildFill},
      {"dropout", buildDropout},
      {"dropout_backward", buildDropout},
      {"batch_norm_training", buildBatchNormTraining},
      {"batch_norm_inference", buildBatchNormInference},
      {"batch_norm_training_backward", buildBatchNormTrainingBackward},
      {"batch_norm_running_update", buildBatchNormRunningUpdate},
      {"max_pool2d", buildPool},
      {"avg_pool2d", buildPool},
      {"max_pool2d_backward", buildPoolBackward},
      {"avg_pool2d_backward", buildPoolBackward},
      {"global_avg_pool", buildGlobalAvgPool},
      {"global_avg_pool_backward", buildGlobalAvgPool},
      {"softmax", buildSoftmax},
      {"softmax_backward", buildSoftmax},
      {"softmax_cross_entropy", buildSoftmaxCrossEntropy},
      {"softmax_cross_entropy_backward", buildSoftmaxCrossEntropyBackward},
      {"count_correct", buildCountCorrect},
      {"concat", buildConcatOrSplit},
      {"split", buildConcatOrSplit},
      {"sgd_update", buildSgdUpdate},
      {"adamw_update", buildAdamwUpdate},
      {"increment", buildIncrement},
      {"lr_schedule", buildLrSchedule},
      {"unscale_gradients", buildUnscaleGradients},
      {"clip_grad_norm", buildUnscaleGradients},
      {"update_loss_scale", buildUpdateLossScale},
      {"gradient_stats", buildGradientStats},
  };
  configureDevice(ctx.smCount);
  auto it = builders.find(k.op());
  if (it == builders.end())
    return Status::error("the cuda backend has no kernel '" + k.op() + "'");
  return it->second(ctx, k, in, out);
}

} // namespace castor::cuda
