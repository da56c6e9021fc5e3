// Convolutions (forward, data gradient, filter gradient). Operands f16/bf16/f32 run through
// cuDNN's graph API (cudnn/convolution_graph.cpp): the engines cuDNN offers are timed once per layer
// signature and GPU, and the choice is kept on disk (tuning/tuner.h, tuning/tuning_cache.h). f64, and any
// convolution the graph API cannot run, takes cuDNN's legacy API (cudnn/convolution_legacy.cpp).
// Depthwise layers Castor's own kernels take race them against cuDNN's engines
// (kernels/depthwise_conv.cpp). CASTOR_CONV_API=legacy forces the legacy API everywhere (for
// comparisons). The legacy API's algorithms also race the graph API's engines as tuner candidates
// (cudnn/convolution_legacy_candidates.cpp; CASTOR_CONV_LEGACY=off|only).
#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/broadcast.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/tuning/tuner.h"

#include "plan/op_attrs.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace castor::cuda {
namespace conv {

using plan::Kernel;
using plan::Tensor;

namespace {

const char *passName(Pass p) {
  static constexpr const char *kNames[] = {"fprop", "dgrad", "wgrad"}; // Pass's order
  return kNames[int(p)];
}

bool legacyForced() {
  const char *v = std::getenv("CASTOR_CONV_API");
  return v && std::strcmp(v, "legacy") == 0;
}

} // namespace

std::vector<int64_t> strides(const Shape &d, bool channelsLast) {
  // d = [N, C, H, W]
  if (channelsLast)
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

Expected<Problem> parse(const DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  if (in.size() < 2 || out.empty())
    return Status::error(k.op() + " needs 2 inputs and 1 output");
  Problem p;
  p.label = k.name().empty() ? k.op() : k.name();
  if (opOf(k) == OpId::Conv2d) {
    p.pass = Pass::Forward;
    p.x = in[0], p.w = in[1], p.y = out[0];
    p.bias = in.size() > 2 ? in[2] : nullptr;
  } else if (opOf(k) == OpId::Conv2dBackwardData) { // (dy, w) -> dx
    p.pass = Pass::BackwardData;
    p.y = in[0], p.w = in[1], p.x = out[0];
    p.accumulate = in.size() > 2 ? in[2] : nullptr;
  } else if (opOf(k) == OpId::Conv2dBackwardFilter) { // (x, dy) -> dw
    p.pass = Pass::BackwardFilter;
    p.x = in[0], p.y = in[1], p.w = out[0];
  } else {
    return Status::error("no convolution kernel '" + k.op() + "'");
  }
  auto attrs = plan::parseConv2d(k);
  if (!attrs)
    return attrs.status();
  const auto &a = attrs->shape;
  p.dtype = p.x->dtype();
  if (p.w->dtype() != p.dtype || p.y->dtype() != p.dtype || !isFloat(p.dtype))
    return Status::error("convolution operands must share one float dtype (got " + plan::dtypeName(p.x->dtype()) +
                         ", " + plan::dtypeName(p.w->dtype()) + ", " + plan::dtypeName(p.y->dtype()) + ")");
  if (a.pads.size() != 4 || a.strides.size() != 2 || a.dilations.size() != 2)
    return Status::error("2-D convolution attributes expected (4 pads, 2 strides, 2 dilations)");
  if (a.pads[0] != a.pads[2] || a.pads[1] != a.pads[3])
    return Status::error("asymmetric convolution padding (pads [" + dimsList(a.pads) +
                         "]) is not supported by the cuda backend");
  p.xs = shapeOf(*p.x), p.ws = shapeOf(*p.w), p.ys = shapeOf(*p.y);
  if (p.xs.size() != 4 || p.ws.size() != 4 || p.ys.size() != 4)
    return Status::error("the cuda backend runs 2-D convolutions only (rank-4 operands)");
  p.padH = a.pads[0], p.padW = a.pads[1];
  p.strideH = a.strides[0], p.strideW = a.strides[1];
  p.dilationH = a.dilations[0], p.dilationW = a.dilations[1];
  p.groups = a.groups;
  if (p.groups < 1 || p.strideH < 1 || p.strideW < 1 || p.dilationH < 1 || p.dilationW < 1 || p.padH < 0 ||
      p.padW < 0)
    return Status::error("invalid convolution attributes");
  // The geometry must agree: C = (C/g) * g, K divisible by g, y's dims from x's.
  auto outDim = [](int64_t in, int64_t pad, int64_t dil, int64_t kernel, int64_t stride) {
    return (in + 2 * pad - dil * (kernel - 1) - 1) / stride + 1;
  };
  const int64_t P = outDim(p.xs[2], p.padH, p.dilationH, p.ws[2], p.strideH);
  const int64_t Q = outDim(p.xs[3], p.padW, p.dilationW, p.ws[3], p.strideW);
  if (p.xs[1] != p.ws[1] * p.groups || p.ws[0] % p.groups != 0 || p.ys[0] != p.xs[0] || p.ys[1] != p.ws[0] ||
      p.ys[2] != P || p.ys[3] != Q)
    return Status::error("convolution shapes disagree: x [" + dimsList(p.xs) + "], w [" + dimsList(p.ws) + "], y [" +
                         dimsList(p.ys) + "], groups " + std::to_string(p.groups) + " (expected y [" +
                         std::to_string(p.xs[0]) + "," + std::to_string(p.ws[0]) + "," + std::to_string(P) + "," +
                         std::to_string(Q) + "])");
  if (p.accumulate && (shapeOf(*p.accumulate) != p.xs || p.accumulate->dtype() != p.dtype))
    return Status::error("the accumulated gradient must have dx's shape and dtype");
  if (p.bias && countOf(*p.bias) != p.ys[1])
    return Status::error("convolution bias has " + std::to_string(countOf(*p.bias)) + " elements for " +
                         std::to_string(p.ys[1]) + " output channels");
  p.xNhwc = ctx.channelsLast(p.x), p.wNhwc = ctx.channelsLast(p.w), p.yNhwc = ctx.channelsLast(p.y);
  p.accumulateNhwc = p.accumulate && ctx.channelsLast(p.accumulate);
  return p;
}

std::string signature(const Problem &p) {
  auto layout = [](bool nhwc) { return nhwc ? "nhwc" : "nchw"; };
  return std::string("conv2d.") + passName(p.pass) + "|" + plan::dtypeName(p.dtype) + "|x:" + layout(p.xNhwc) + "=" +
         dimsList(p.xs) + "|w:" + layout(p.wNhwc) + "=" + dimsList(p.ws) + "|y:" + layout(p.yNhwc) + "=" + dimsList(p.ys) +
         "|pad=" + std::to_string(p.padH) + "," + std::to_string(p.padW) + "|stride=" + std::to_string(p.strideH) +
         "," + std::to_string(p.strideW) + "|dil=" + std::to_string(p.dilationH) + "," +
         std::to_string(p.dilationW) + "|groups=" + std::to_string(p.groups) + (p.accumulate ? "|accumulate" : "") +
         ownCandidatesTag(p) + legacyCandidatesTag(p) + engineSetTag(p);
}

namespace {

// target += addend with Castor's element-wise add, in place; `addendShape` is the addend as
// stored, broadcast over target as target is stored.
Expected<RunFn> addInPlace(DeviceContext &ctx, const Tensor *target, const Tensor *addend, const Shape &addendShape,
                           const char *what) {
  const Shape ts = physicalShape(ctx, *target);
  auto bc = makeBroadcast(ts, addendShape, ts);
  if (!bc)
    return bc.status();
  const Broadcast b = *bc;
  DeviceContext *c = &ctx;
  return RunFn([c, b, target, addend, what]() -> Status {
    return cudaStatus(binary(OpId::Add, c->ref(target), c->ref(addend), c->ref(target), b, countOf(*target), c->stream),
                      what);
  });
}

// `first`, then `second`.
RunFn sequence(RunFn first, RunFn second) {
  return RunFn([first, second]() -> Status {
    CASTOR_RETURN_IF_ERROR(first());
    return second();
  });
}

} // namespace

Expected<RunFn> biasAdd(DeviceContext &ctx, const Problem &p) {
  if (!p.bias)
    return Status::error("convolution " + p.label + " has no bias");
  // The bias [K] broadcast over y as y is stored: [N,K,P,Q] or, channels-last, [N,P,Q,K].
  const Shape bs = p.yNhwc ? Shape{1, 1, 1, p.ys[1]} : Shape{1, p.ys[1], 1, 1};
  return addInPlace(ctx, p.y, p.bias, bs, "conv2d bias");
}

Expected<RunFn> withBias(DeviceContext &ctx, const Problem &p, RunFn run) {
  if (!p.bias)
    return run;
  auto add = biasAdd(ctx, p);
  if (!add)
    return add.status();
  return sequence(std::move(run), std::move(*add));
}

namespace {

// The name of the candidate that runs the plain convolution, then the add.
constexpr const char *kUnfusedPrefix = "unfused:";

// The data gradient plus p.accumulate: the tuner weighs the plain convolution's chosen engine
// followed by the element-wise add (the unfused group, rounding as the reference does) against
// cuDNN's engines that add in the convolution's epilogue (rounding once), and, for a depthwise
// layer, Castor's kernel adding it in its epilogue (rounding once), and keeps the faster.
// Without the graph API (f64, CASTOR_CONV_API=legacy, no engine) the group runs unfused.
Expected<RunFn> buildAccumulating(DeviceContext &ctx, const Problem &p) {
  if (p.accumulateNhwc != p.xNhwc)
    return Status::error("convolution " + p.label + ": the accumulated gradient is stored in another layout than dx");
  auto add = addInPlace(ctx, p.x, p.accumulate, physicalShape(ctx, *p.accumulate), "conv2d_backward_data accumulate");
  if (!add)
    return add.status();
  Problem plain = p;
  plain.accumulate = nullptr;
  if (p.dtype == plan::F64 || legacyForced()) {
    auto run = buildLegacy(ctx, plain);
    if (!run)
      return run.status();
    ctx.layerChoices[p.x->id()] = "composed";
    return sequence(std::move(*run), *add);
  }
  // Castor's depthwise data gradient adds p.accumulate in its epilogue (rounding once).
  // CASTOR_CONV_LEGACY=only: a legacy algorithm, then the add, alone (unless those are forced).
  const bool legacyAlone = legacyCandidatesForced(p) && !depthwiseForced(p);
  std::vector<tuning::Candidate> candidates;
  if (!legacyAlone)
    candidates = depthwiseCandidates(ctx, p);
  if (depthwiseForced(p)) {
    auto choice = tuning::choose(ctx, signature(p), candidates);
    if (!choice)
      return choice.status();
    ctx.layerChoices[p.x->id()] = "fused";
    return runChoice(ctx, std::move(*choice));
  }
  auto plainChoice = chooseFrontend(ctx, plain);
  if (!plainChoice) {
    auto legacy = buildLegacy(ctx, plain);
    if (!legacy)
      return Status::error("cuDNN graph API: " + plainChoice.message() + "; legacy API: " + legacy.message());
    tuning::noteFallback();
    ctx.layerChoices[p.x->id()] = "composed";
    return sequence(std::move(*legacy), *add);
  }
  tuning::Executable unfused = plainChoice->executable;
  RunFn addRun = *add;
  tuning::Candidate separate;
  separate.name = kUnfusedPrefix + plainChoice->name;
  separate.build = [unfused, addRun]() -> Expected<tuning::Executable> {
    tuning::Executable e;
    e.workspaceBytes = unfused.workspaceBytes;
    auto conv = unfused.run;
    e.run = [conv, addRun](void *workspace) -> Status {
      CASTOR_RETURN_IF_ERROR(conv(workspace));
      return addRun();
    };
    return e;
  };
  candidates.push_back(std::move(separate));
  if (!legacyAlone)
    for (auto &c : accumulatingCandidates(ctx, p))
      candidates.push_back(std::move(c));
  auto choice = tuning::choose(ctx, signature(p), candidates, kCompiledFusedCandidates);
  if (!choice)
    return choice.status();
  // The way castor-run bench reports (KernelChoice::way); the candidate is in the tuning report.
  ctx.layerChoices[p.x->id()] = choice->name.rfind(kUnfusedPrefix, 0) == 0 ? "composed" : "fused";
  return runChoice(ctx, std::move(*choice));
}

} // namespace

} // namespace conv

std::vector<tuning::CompileJob> compileAheadConvolution(const DeviceContext &ctx, const plan::Kernel &k,
                                                       const TensorList &in, const TensorList &out) {
  auto p = conv::parse(ctx, k, in, out);
  // Only an accumulating data gradient's build compiles engines; a cached choice compiles at most
  // the one it names.
  if (!p || conv::legacyForced())
    return {};
  // A forward convolution that may compute its batch norm's statistics compiles the genstats graph's
  // engines (convolution_stats.cpp).
  if (conv::statsWanted(ctx, *p))
    return tuning::hasCachedChoice(ctx, conv::statsKey(*p))
               ? std::vector<tuning::CompileJob>{}
               : conv::statsCompileJobs(ctx, *p, tuning::compiledCandidateLimit(conv::kCompiledFusedCandidates));
  if (!p->accumulate || conv::legacyCandidatesForced(*p) || tuning::hasCachedChoice(ctx, conv::signature(*p)))
    return {};
  return conv::accumulatingCompileJobs(ctx, *p, tuning::compiledCandidateLimit(conv::kCompiledFusedCandidates));
}

Expected<RunFn> buildConvolution(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                 const TensorList &out) {
  auto p = conv::parse(ctx, k, in, out);
  if (!p)
    return p.status();
  if (p->accumulate)
    return conv::buildAccumulating(ctx, *p);
  if (p->dtype == plan::F64 || conv::legacyForced()) {
    auto run = conv::buildLegacy(ctx, *p);
    if (!run)
      return run.status();
    return conv::withBias(ctx, *p, std::move(*run));
  }
  if (conv::statsWanted(ctx, *p)) {
    auto plain = conv::chooseFrontend(ctx, *p);
    if (plain)
      return conv::offerStats(ctx, *p, std::move(*plain));
  }
  auto run = conv::buildFrontend(ctx, *p);
  if (run && conv::candidatesAddBias(*p))
    return run; // the chosen candidate adds the bias itself
  if (!run) {
    auto legacy = conv::buildLegacy(ctx, *p);
    if (!legacy)
      return Status::error("cuDNN graph API: " + run.message() + "; legacy API: " + legacy.message());
    std::fprintf(stderr, "castor: convolution %s (%s): cuDNN graph API failed (%s); using the legacy API\n",
                 p->label.c_str(), conv::signature(*p).c_str(), run.message().c_str());
    tuning::noteFallback();
    return conv::withBias(ctx, *p, std::move(*legacy));
  }
  return conv::withBias(ctx, *p, std::move(*run));
}

} // namespace castor::cuda
