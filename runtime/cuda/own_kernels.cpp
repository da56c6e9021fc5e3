// The CUDA backend's own kernels (elementwise.cu, reduce.cu, pooling.cu, loss.cu, optimizer.cu)
// for every plan op that no library call covers: element-wise ops, casts, pooling, reductions,
// the loss, the optimizers and the loss scaler. This file holds the helpers the builders share
// and the table of builders; the builders are in own_elementwise.cpp, own_reductions.cpp,
// own_loss.cpp and own_optimizer.cpp.
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
#include "cuda/own_kernels.h"

#include <unordered_map>

namespace castor::cuda {
namespace own {

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

} // namespace own

using namespace own;

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
