// The CUDA backend's own kernels (kernels.cu) for every plan op that no library call covers:
// element-wise ops, casts, pooling, reductions, the loss, the optimizers and the loss scaler.
#include "cuda/device_context.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <limits>

namespace castor::cuda {
namespace {

using plan::Kernel;
using plan::Tensor;

RunFn copyOrConvert(DeviceContext *c, const Tensor *x, const Tensor *y) {
  if (x->dtype() == y->dtype())
    return [c, x, y]() {
      if (x->offset() == y->offset())
        return Status::ok();
      return cudaStatus(cudaMemcpyAsync(c->ptr(y), c->ptr(x), x->bytes(), cudaMemcpyDeviceToDevice, c->stream), "copy");
    };
  return launch([c, x, y]() { return convert(c->ref(x), c->ref(y), countOf(*y), c->stream); });
}


PoolGeometry poolGeometry(const plan::Pool2dParams &p, const Shape &xs, const Shape &ys) {
  const auto &a = p.shape;
  PoolGeometry g{};
  g.NC = xs[0] * xs[1], g.H = xs[2], g.W = xs[3], g.P = ys[2], g.Q = ys[3];
  g.kh = a.kernel[0], g.kw = a.kernel[1], g.sh = a.strides[0], g.sw = a.strides[1];
  g.padTop = a.pads[0], g.padLeft = a.pads[1], g.padBottom = a.pads[2], g.padRight = a.pads[3];
  g.dh = a.dilations[0], g.dw = a.dilations[1];
  g.includePad = p.countIncludePad;
  return g;
}

LossReduction lossReduction(shape::Reduction r) {
  return r == shape::Reduction::Mean ? LossReduction::Mean
         : r == shape::Reduction::Sum ? LossReduction::Sum
                                      : LossReduction::None;
}

} // namespace

Expected<RunFn> buildOwnKernel(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFns: the context outlives them
  const std::string &op = k.op();
  const cudaStream_t s = ctx.stream;
  constexpr double inf = std::numeric_limits<double>::infinity();
  auto need = [&](size_t nin, size_t nout) -> Status {
    if (in.size() < nin || out.size() < nout)
      return Status::error(op + " needs at least " + std::to_string(nin) + " inputs and " + std::to_string(nout) +
                           " outputs");
    return Status::ok();
  };

  if (op == "conv2d_backward_bias") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Shape ds = shapeOf(*in[0]);
    const int64_t N = ds[0], K = ds[1], inner = span(ds, 2, ds.size());
    Reduction r;
    r.keptRank = 1, r.kept[0] = K, r.keptStride[0] = inner;
    r.redRank = 2, r.red[0] = N, r.redStride[0] = K * inner, r.red[1] = inner, r.redStride[1] = 1;
    r.outCount = K, r.redCount = N * inner;
    const Tensor *dy = in[0], *db = out[0];
    return launch([=]() { return reduceSum(c->ref(dy), c->ref(db), r, 1.0, s); });
  }
  if (op == "reduce_sum_to") {
    auto p = plan::parseReduceSumTo(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Shape xs = shapeOf(*in[0]), ys = shapeOf(*out[0]);
    if (xs.size() > size_t(kMaxRank) || ys.size() > xs.size())
      return Status::error("reduce_sum_to: unsupported ranks");
    Reduction r;
    int64_t stride = 1;
    std::vector<std::pair<int64_t, int64_t>> kept, red; // (size, x stride), innermost first
    for (size_t i = 0; i < xs.size(); ++i) {
      const size_t d = xs.size() - 1 - i;
      const int64_t yd = i < ys.size() ? ys[ys.size() - 1 - i] : 1;
      if (yd == xs[d])
        kept.push_back({xs[d], stride});
      else
        red.push_back({xs[d], stride});
      stride *= xs[d];
    }
    std::reverse(kept.begin(), kept.end());
    std::reverse(red.begin(), red.end());
    r.keptRank = int(kept.size()), r.redRank = int(red.size());
    for (size_t i = 0; i < kept.size(); ++i)
      r.kept[i] = kept[i].first, r.keptStride[i] = kept[i].second, r.outCount *= kept[i].first;
    for (size_t i = 0; i < red.size(); ++i)
      r.red[i] = red[i].first, r.redStride[i] = red[i].second, r.redCount *= red[i].first;
    const Tensor *x = in[0], *y = out[0];
    const double scale = p->scale;
    return launch([=]() { return reduceSum(c->ref(x), c->ref(y), r, scale, s); });
  }
  if (op == "relu" || op == "sigmoid" || op == "clip") {
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
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() { return unary(u, c->ref(x), c->ref(y), countOf(*y), lo, hi, s); });
  }
  if (op == "relu_backward" || op == "sigmoid_backward" || op == "clip_backward") {
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
    const Tensor *dy = in[0], *sv = in[1], *dx = out[0];
    return launch([=]() { return backward(b, c->ref(dy), c->ref(sv), c->ref(dx), countOf(*dx), lo, hi, s); });
  }
  if (op == "add" || op == "mul") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    auto bc = makeBroadcast(shapeOf(*in[0]), shapeOf(*in[1]), shapeOf(*out[0]));
    if (!bc)
      return bc.status();
    const Broadcast b = *bc;
    const BinaryOp bo = op == "add" ? BinaryOp::Add : BinaryOp::Mul;
    const Tensor *x = in[0], *y = in[1], *z = out[0];
    return launch([=]() { return binary(bo, c->ref(x), c->ref(y), c->ref(z), b, countOf(*z), s); });
  }
  if (op == "identity" || op == "cast" || op == "reshape" || op == "flatten") {
    if (op == "flatten") {
      auto axis = plan::parseAxis(k, 1);
      if (!axis)
        return axis.status();
    } else {
      CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    }
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    return copyOrConvert(c, in[0], out[0]);
  }
  if (op == "fill") {
    auto p = plan::parseFill(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(0, 1));
    const Tensor *y = out[0];
    const double v = p->value;
    return launch([=]() { return fill(c->ref(y), countOf(*y), v, s); });
  }
  if (op == "dropout" || op == "dropout_backward") {
    auto p = plan::parseDropout(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *x = in[0], *y = out[0], *it = in.size() > 1 ? in[1] : nullptr;
    const plan::DropoutParams d = *p;
    return launch([=]() {
      return dropout(c->ref(x), c->ref(y), countOf(*y), it ? c->ints(it) : nullptr, d.ratio, d.seed, d.salt, s);
    });
  }
  if (op == "batch_norm_training") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(3, 3));
    const Shape xs = shapeOf(*in[0]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in, o = out;
    const double eps = p->epsilon, momentum = p->momentum;
    const bool update = out.size() == 5 && in.size() == 5;
    return RunFn([=]() -> Status {
      Ref rm, rv;
      if (update) {
        // The statistics are updated in place in the outputs (copies first when the ids differ).
        for (int j : {3, 4})
          if (i[size_t(j)]->offset() != o[size_t(j)]->offset())
            CASTOR_CUDA(cudaMemcpyAsync(c->ptr(o[size_t(j)]), c->ptr(i[size_t(j)]), i[size_t(j)]->bytes(),
                                        cudaMemcpyDeviceToDevice, s));
        rm = c->ref(o[3]), rv = c->ref(o[4]);
        rm.dt = o[3]->dtype(), rv.dt = o[4]->dtype();
      }
      return cudaStatus(batchNormTraining(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(o[0]), c->ref(o[1]), c->ref(o[2]), rm,
                                                rv, N, C, inner, eps, momentum, s),
                        "batch_norm_training");
    });
  }

  if (op == "batch_norm_inference") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(5, 1));
    const Shape xs = shapeOf(*in[0]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in;
    const Tensor *y = out[0];
    const double eps = p->epsilon;
    return launch([=]() {
      return batchNormInference(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(y), N, C, inner, eps,
                                      s);
    });
  }

  if (op == "batch_norm_training_backward") {
    auto p = plan::parseBatchNorm(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(5, 3));
    const Shape xs = shapeOf(*in[1]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    const auto i = in, o = out;
    return launch([=]() {
      return batchNormBackward(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ref(o[0]), c->ref(o[1]),
                                     c->ref(o[2]), N, C, inner, s);
    });
  }
  if (op == "batch_norm_running_update") {
    auto p = plan::parseBatchNormRunningUpdate(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(4, 2));
    const auto i = in;
    const plan::BatchNormRunningUpdateParams a = *p;
    return launch([=]() {
      return batchNormRunningUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), countOf(*i[0]), a.momentum,
                                          a.epsilon, a.count, s);
    });
  }
  if (op == "max_pool2d" || op == "avg_pool2d") {
    auto p = plan::parsePool2d(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const PoolGeometry g = poolGeometry(*p, shapeOf(*in[0]), shapeOf(*out[0]));
    const bool isMax = op == "max_pool2d";
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() { return pool2d(isMax, c->ref(x), c->ref(y), g, s); });
  }
  if (op == "max_pool2d_backward" || op == "avg_pool2d_backward") {
    auto p = plan::parsePool2d(k);
    if (!p)
      return p.status();
    const bool isMax = op == "max_pool2d_backward";
    CASTOR_RETURN_IF_ERROR(need(isMax ? 2 : 1, 1));
    const PoolGeometry g = poolGeometry(*p, shapeOf(*out[0]), shapeOf(*in[0]));
    const Tensor *dy = in[0], *x = isMax ? in[1] : nullptr, *dx = out[0];
    return launch([=]() { return pool2dBackward(isMax, c->ref(dy), x ? c->ref(x) : Ref{}, c->ref(dx), g, s); });
  }
  if (op == "global_avg_pool" || op == "global_avg_pool_backward") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const bool fwd = op == "global_avg_pool";
    const Shape xs = shapeOf(fwd ? *in[0] : *out[0]);
    const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
    const Tensor *x = in[0], *y = out[0];
    return launch([=]() {
      return fwd ? globalAvgPool(c->ref(x), c->ref(y), NC, inner, s)
                 : globalAvgPoolBackward(c->ref(x), c->ref(y), NC, inner, s);
    });
  }
  if (op == "softmax" || op == "softmax_backward") {
    auto axis = plan::parseAxis(k, -1);
    if (!axis)
      return axis.status();
    const bool fwd = op == "softmax";
    CASTOR_RETURN_IF_ERROR(need(fwd ? 1 : 2, 1));
    const Shape xs = shapeOf(*out[0]);
    auto ax = shape::normalizeAxis(*axis, int64_t(xs.size()));
    if (!ax)
      return Status::error("axis out of range");
    const int64_t outer = span(xs, 0, size_t(*ax)), n = xs[size_t(*ax)], inner = span(xs, size_t(*ax) + 1, xs.size());
    const auto i = in;
    const Tensor *y = out[0];
    return launch([=]() {
      return fwd ? softmax(c->ref(i[0]), c->ref(y), outer, n, inner, s)
                 : softmaxBackward(c->ref(i[0]), c->ref(i[1]), c->ref(y), outer, n, inner, s);
    });
  }
  if (op == "softmax_cross_entropy") {
    auto p = plan::parseSoftmaxCrossEntropy(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    const Tensor *x = in[0], *labels = in[1], *loss = out[0], *probs = out.size() > 1 ? out[1] : nullptr;
    const int64_t N = x->shape(0), C = x->shape(1);
    const double eps = p->labelSmoothing;
    const LossReduction red = lossReduction(p->reduction);
    return launch([=]() {
      return softmaxCrossEntropy(c->ref(x), c->ints(labels), c->ref(loss), probs ? c->ref(probs) : Ref{}, N, C, eps,
                                       red, s);
    });
  }
  if (op == "softmax_cross_entropy_backward") {
    auto p = plan::parseSoftmaxCrossEntropy(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(3, 1));
    const Tensor *dl = in[0], *x = in[1], *labels = in[2], *dx = out[0];
    const int64_t N = x->shape(0), C = x->shape(1);
    const double eps = p->labelSmoothing;
    const LossReduction red = lossReduction(p->reduction);
    return launch(
        [=]() { return softmaxCrossEntropyBackward(c->ref(dl), c->ref(x), c->ints(labels), c->ref(dx), N, C, eps, red, s); });
  }
  if (op == "count_correct") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(2, 1));
    const Tensor *x = in[0], *labels = in[1], *y = out[0];
    const int64_t N = x->shape(0), C = x->shape(1);
    return launch([=]() { return countCorrect(c->ref(x), c->ints(labels), c->ints(y), N, C, s); });
  }
  if (op == "concat" || op == "split") {
    auto axis = plan::parseAxis(k, 0);
    if (!axis)
      return axis.status();
    const bool isConcat = op == "concat";
    const Tensor *whole = isConcat ? out.at(0) : in.at(0);
    const std::vector<const Tensor *> parts = isConcat ? in : out;
    const Shape ws = shapeOf(*whole);
    auto ax = shape::normalizeAxis(*axis, int64_t(ws.size()));
    if (!ax)
      return Status::error("axis out of range");
    for (const Tensor *t : parts)
      if (t->dtype() != whole->dtype())
        return Status::error(op + " operands must share one dtype");
    const int64_t outer = span(ws, 0, size_t(*ax));
    const uint64_t innerBytes = uint64_t(span(ws, size_t(*ax) + 1, ws.size())) * plan::dtypeSize(whole->dtype());
    const uint64_t rowBytes = uint64_t(ws[size_t(*ax)]) * innerBytes;
    return RunFn([=]() -> Status {
      uint64_t at = 0;
      for (const Tensor *t : parts) {
        const uint64_t chunk = uint64_t(t->shape(int(*ax))) * innerBytes;
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
  if (op == "sgd_update") {
    auto p = plan::parseSgd(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(4, 2));
    const bool hasFlag = in.size() == 6 || (in.size() == 5 && in[4]->dtype() != plan::I64);
    const Tensor *step = in.size() >= 5 && in[4]->dtype() == plan::I64 ? in[4] : nullptr;
    if (p->momentum != 0 && !step)
      return Status::error("sgd with momentum needs the step counter as its 5th input");
    const Tensor *found = hasFlag ? in.back() : nullptr;
    const auto i = in;
    const plan::SgdParams a = *p;
    return launch([=]() {
      return sgdUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), step ? c->ints(step) : nullptr,
                             found ? c->ref(found) : Ref{}, countOf(*i[0]), a.momentum, a.nesterov, a.weightDecay,
                             a.dampening, s);
    });
  }
  if (op == "adamw_update") {
    auto p = plan::parseAdamW(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(6, 3));
    const Tensor *found = in.size() == 7 ? in[6] : nullptr;
    const auto i = in;
    const plan::AdamWParams a = *p;
    return launch([=]() {
      return adamwUpdate(c->ref(i[0]), c->ref(i[1]), c->ref(i[2]), c->ref(i[3]), c->ref(i[4]), c->ints(i[5]),
                               found ? c->ref(found) : Ref{}, countOf(*i[0]), a.beta1, a.beta2, a.eps,
                               a.weightDecay, s);
    });
  }
  if (op == "increment") {
    auto p = plan::parseIncrement(k);
    if (!p)
      return p.status();
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *x = in[0], *y = out[0], *flag = in.size() > 1 ? in[1] : nullptr;
    const bool whenSet = p->whenSet;
    return launch([=]() { return increment(c->ints(x), c->ints(y), flag ? c->ref(flag) : Ref{}, whenSet, s); });
  }
  if (op == "lr_schedule") {
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
  if (op == "unscale_gradients") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    if (in.size() < 2 || out.size() != in.size())
      return Status::error("unscale_gradients takes n gradients and the scale, and produces n gradients and found_inf");
    const std::vector<const Tensor *> grads(in.begin(), in.end() - 1);
    const Tensor *scale = in.back(), *found = out.back();
    return RunFn([=]() -> Status {
      CASTOR_CUDA(clearFlag(c->ref(found), s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(unscale(c->ref(g), countOf(*g), c->ref(scale), c->ref(found), s));
      return Status::ok();
    });
  }
  if (op == "clip_grad_norm") {
    auto p = plan::parseClipGradNorm(k);
    if (!p)
      return p.status();
    if (in.empty() || out.size() != in.size() + 1)
      return Status::error("clip_grad_norm takes n gradients and produces n gradients and total_norm");
    const std::vector<const Tensor *> grads = in;
    const Tensor *total = out.back();
    const double maxNorm = p->maxNorm;
    return RunFn([=]() -> Status {
      CASTOR_CUDA(clipZero(c->scratch, s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(clipAccumulate(c->ref(g), countOf(*g), c->scratch, s));
      CASTOR_CUDA(clipFinish(c->scratch, c->ref(total), maxNorm, s));
      for (const Tensor *g : grads)
        CASTOR_CUDA(clipApply(c->ref(g), countOf(*g), c->scratch, s));
      return Status::ok();
    });
  }
  if (op == "update_loss_scale") {
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
  if (op == "gradient_stats") {
    CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
    CASTOR_RETURN_IF_ERROR(need(1, 1));
    const Tensor *g = in[0], *y = out[0];
    return launch([=]() { return gradientStats(c->ref(g), countOf(*g), c->ref(y), c->scratch, s); });
  }
  return Status::error("the cuda backend has no kernel '" + op + "'");
}

} // namespace castor::cuda
