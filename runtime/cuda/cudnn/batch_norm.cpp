// Batch normalization (training forward, backward, inference): which way runs a layer.
//
// Data x and y in fp16, bf16 or fp32 (NHWC or NCHW) with scale, bias and statistics in fp32 —
// the kernels PyTorch AMP runs — go through cuDNN, where the per-layer tuner (tuning/tuner.h)
// weighs the legacy Ex API (cudnn/batch_norm_ex.cpp, candidate "ex") against every engine of the
// graph API (cudnn/batch_norm_graph.cpp, candidates "graph:<engine>") once per layer signature and
// GPU and keeps the faster in the tuning cache. All-f64 batch norms and training kernels that
// update running statistics themselves take the Ex API alone; dtype combinations cuDNN does
// not take (f16 statistics, ranks above 4) run the own kernels (kernels/reduce.cpp).
//
// A training forward (f16/bf16, NHWC, no running update) whose input comes from a convolution
// that offers its output's per-channel sums (DeviceContext::ConvStatsOffer,
// cudnn/convolution_stats.cpp) has one more candidate, "conv-stats": the own element-wise pass
// from those sums (kernels/batch_norm_relu.h) instead of a pass that reads x for them. Each
// candidate is then timed behind the convolution (the plain one, or the one computing the sums),
// under a key naming it, and the convolution runs with the sums when conv-stats wins
// (CASTOR_FUSED_BN=conv-stats forces it).
//
// CASTOR_BN_API=ex forces the Ex API, =graph the graph API (for comparisons; a layer the graph
// API cannot run falls back to the Ex API with a note on stderr).
#include "cuda/cudnn/batch_norm.h"
#include "cuda/cudnn/builders.h"
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/builders.h"

#include "plan/op_attrs.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

namespace castor::cuda {
namespace bn {
namespace {

using plan::Kernel;
using plan::Tensor;

enum class Api { Tuned, Ex, Graph };

Api forcedApi() {
  const char *v = std::getenv("CASTOR_BN_API");
  if (v && std::strcmp(v, "ex") == 0)
    return Api::Ex;
  if (v && std::strcmp(v, "graph") == 0)
    return Api::Graph;
  return Api::Tuned;
}

const char *passName(Pass p) {
  static constexpr const char *kNames[] = {"training", "backward", "inference"}; // Pass's order
  return kNames[int(p)];
}

bool lowOrSingle(plan::DType t) { return t == plan::F16 || t == plan::BF16 || t == plan::F32; }

// The chosen executable as the kernel's RunFn. ctx.workspace is allocated after every kernel is
// built: read it when running.
RunFn runFnOf(DeviceContext &ctx, tuning::Executable e) {
  ctx.requestWorkspace(e.workspaceBytes);
  DeviceContext *c = &ctx;
  auto run = std::move(e.run);
  return RunFn([c, run]() { return run(c->workspace); });
}

Expected<RunFn> exOnly(DeviceContext &ctx, const Problem &p) {
  auto e = buildEx(ctx, p);
  if (!e)
    return e.status();
  return runFnOf(ctx, std::move(*e));
}

// CASTOR_BN_API=graph: the fastest graph engine, else the Ex API.
Expected<RunFn> graphForced(DeviceContext &ctx, const Problem &p) {
  auto candidates = graphCandidates(ctx, p);
  std::string why;
  if (candidates) {
    // Its own cache key, so that a forced choice never stands in for the tuned one.
    auto choice = tuning::choose(ctx, signature(p) + "|api=graph", *candidates);
    if (choice)
      return runFnOf(ctx, std::move(choice->executable));
    why = choice.message();
  } else {
    why = candidates.message();
  }
  // The Ex backward reads the reserve space its forward filled: with a forward that ran the
  // graph API (its Ex reserve never allocated), it would read garbage.
  auto reserve = exReserveBytes(ctx, p);
  if (!reserve)
    return reserve.status();
  if (p.pass == Pass::Backward && *reserve > 0 && !ctx.persistent.count(p.in[3]->id()))
    return Status::error("cuDNN graph API: " + why +
                         "; the Ex API's backward needs the reserve space of an Ex forward, which did not run");
  std::fprintf(stderr, "castor: batch norm %s (%s): cuDNN graph API failed (%s); using the Ex API\n",
               p.label.c_str(), signature(p).c_str(), why.c_str());
  return exOnly(ctx, p);
}

// The offer of its output's sums by the convolution that computes this training forward's x, or
// null: f16/bf16 data stored NHWC, without running update, for the plan's own batch_norm_training
// kernel (not the batch norm inside the composed way of a fused batch-norm-ReLU, whose tuner
// decides the convolution's way itself: cudnn/batch_norm_relu.cpp).
const DeviceContext::ConvStatsOffer *statsOffer(const DeviceContext &ctx, const Problem &p) {
  if (p.pass != Pass::Training || p.runningUpdate || !p.nhwc || (p.dtype != plan::F16 && p.dtype != plan::BF16) ||
      !ctx.channelsLast(p.out[0]) || !ctx.plan)
    return nullptr;
  bool planKernel = false;
  for (const plan::Kernel &k : ctx.plan->kernels())
    planKernel = planKernel || (opOf(k) == OpId::BatchNormTraining && k.outputs_size() == 3 &&
                                k.inputs_size() >= 3 && k.inputs(0) == p.in[0]->id() &&
                                k.outputs(1) == p.out[1]->id());
  if (!planKernel)
    return nullptr;
  auto it = ctx.convStatsOffers.find(p.in[0]->id());
  return it == ctx.convStatsOffers.end() ? nullptr : &it->second;
}

// The own forward from the convolution's sums.
tuning::Executable forwardFromSums(DeviceContext &ctx, const Problem &p, const float *sums) {
  const Tensor *x = p.in[0], *scale = p.in[1], *bias = p.in[2], *y = p.out[0], *mean = p.out[1], *invStd = p.out[2];
  const int64_t rows = p.dims[0] * p.dims[2] * p.dims[3], C = p.dims[1];
  const double eps = p.epsilon;
  DeviceContext *c = &ctx; // captured by the run: the context outlives it
  tuning::Executable e;
  e.workspaceBytes = sizeof(float) * size_t(C);
  e.run = [=](void *ws) -> Status {
    auto f32 = [c](const Tensor *t) { return reinterpret_cast<float *>(c->ptr(t)); };
    return cudaStatus(bnForwardFromSums(c->ref(x), f32(scale), f32(bias), sums, c->ref(y), f32(mean), f32(invStd), rows,
                                        C, eps, ws, c->stream),
                      "the batch norm's forward from the convolution's sums");
  };
  return e;
}

// The candidates and the forward from the sums, each timed behind the convolution that offers
// them (the plain convolution, or for conv-stats the one computing the sums); the chosen forward
// alone is returned, and the convolution told whether to compute the sums.
Expected<RunFn> tunedAfterConvolution(DeviceContext &ctx, const Problem &p, std::vector<tuning::Candidate> candidates,
                                      const DeviceContext::ConvStatsOffer &offer) {
  if (forcedWay() == kConvStatsWay) {
    *offer.useStats = true;
    return runFnOf(ctx, forwardFromSums(ctx, p, offer.sums));
  }
  auto alone = std::make_shared<std::unordered_map<std::string, tuning::Executable>>();
  DeviceContext *c = &ctx;
  tuning::Candidate stats;
  stats.name = kConvStatsWay;
  const float *sums = offer.sums;
  stats.build = [c, p, sums]() -> Expected<tuning::Executable> { return forwardFromSums(*c, p, sums); };
  // Second, after the Ex API: within CASTOR_TUNING_MAX_CANDIDATES.
  candidates.insert(candidates.begin() + std::min<size_t>(1, candidates.size()), std::move(stats));
  for (tuning::Candidate &cand : candidates) {
    const bool withStats = cand.name == kConvStatsWay;
    std::function<Status(void *)> conv = withStats ? offer.withStats : offer.plain;
    const size_t convWorkspace = withStats ? offer.statsWorkspace : offer.plainWorkspace;
    cand.build = [build = std::move(cand.build), name = cand.name, alone, conv,
                  convWorkspace]() -> Expected<tuning::Executable> {
      auto e = build();
      if (!e)
        return e.status();
      (*alone)[name] = *e;
      tuning::Executable pair;
      pair.workspaceBytes = std::max(e->workspaceBytes, convWorkspace);
      pair.run = [conv, run = e->run](void *ws) -> Status {
        CASTOR_RETURN_IF_ERROR(conv(ws));
        return run(ws);
      };
      return pair;
    };
  }
  auto choice = tuning::choose(ctx, signature(p) + "|after=" + offer.signature, candidates);
  if (!choice)
    return choice.status();
  *offer.useStats = choice->name == kConvStatsWay;
  return runFnOf(ctx, alone->at(choice->name));
}

// Once per process: why layers with a reserve space are not tuned.
std::atomic<bool> reserveNoted{false};

// The Ex API and the graph's engines timed against each other.
Expected<RunFn> tuned(DeviceContext &ctx, const Problem &p) {
  // Where the Ex API keeps a reserve space from forward to backward, the forward and backward of
  // a layer must both run it, which two independent choices cannot promise: the Ex API alone.
  auto reserve = exReserveBytes(ctx, p);
  if (!reserve)
    return reserve.status();
  if (*reserve > 0 && !reserveNoted.exchange(true))
    std::fprintf(stderr,
                 "castor: cuDNN's Ex batch norm keeps a reserve space from forward to backward (%zu bytes for "
                 "%s): such layers run the Ex API untimed\n",
                 *reserve, signature(p).c_str());
  if (p.dtype == plan::F64 || p.runningUpdate || *reserve > 0)
    return exOnly(ctx, p);
  auto graph = graphCandidates(ctx, p);
  if (!graph) // no graph engine for this layer (e.g. a layout cuDNN's graph kernels lack)
    return exOnly(ctx, p);
  std::vector<tuning::Candidate> candidates;
  tuning::Candidate ex;
  ex.name = kExName;
  DeviceContext *c = &ctx;
  ex.build = [c, p]() { return buildEx(*c, p); };
  candidates.push_back(std::move(ex)); // first: always within CASTOR_TUNING_MAX_CANDIDATES
  for (tuning::Candidate &g : *graph)
    candidates.push_back(std::move(g));
  if (const DeviceContext::ConvStatsOffer *offer = statsOffer(ctx, p))
    return tunedAfterConvolution(ctx, p, std::move(candidates), *offer);
  auto choice = tuning::choose(ctx, signature(p), candidates);
  if (!choice)
    return choice.status();
  return runFnOf(ctx, std::move(choice->executable));
}

} // namespace

std::string forcedWay() {
  const char *v = std::getenv("CASTOR_FUSED_BN");
  return v ? v : "";
}

Expected<Problem> parse(const DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  auto a = plan::parseBatchNorm(k);
  if (!a)
    return a.status();
  if (a->sync)
    return Status::error(k.op() + ": synchronized batch norm (--sync-batch-norm) runs on the cpu backend so far");
  Problem p;
  p.in = in, p.out = out;
  p.epsilon = a->epsilon, p.momentum = a->momentum;
  p.label = k.name().empty() ? k.op() : k.name();
  const Tensor *x = nullptr;
  TensorList data, perChannel; // beside x
  if (opOf(k) == OpId::BatchNormTraining) {
    if (in.size() < 3 || out.size() < 3)
      return Status::error("batch_norm_training needs x, scale, bias and produces y, mean, inv_std");
    p.pass = Pass::Training;
    p.runningUpdate = out.size() == 5 && in.size() == 5;
    x = in[0], data = {out[0]}, perChannel = {in[1], in[2], out[1], out[2]};
    if (p.runningUpdate)
      perChannel.insert(perChannel.end(), {out[3], out[4]});
  } else if (opOf(k) == OpId::BatchNormTrainingBackward) {
    if (in.size() < 5 || out.size() < 3)
      return Status::error("batch_norm_training_backward needs dy, x, scale, mean, inv_std and produces dx, dscale, "
                           "dbias");
    p.pass = Pass::Backward;
    x = in[1], data = {in[0], out[0]}, perChannel = {in[2], in[3], in[4], out[1], out[2]};
  } else if (opOf(k) == OpId::BatchNormInference) {
    if (in.size() < 5 || out.empty())
      return Status::error("batch_norm_inference needs x, scale, bias, mean, var and produces y");
    p.pass = Pass::Inference;
    x = in[0], data = {out[0]}, perChannel = {in[1], in[2], in[3], in[4]};
  } else {
    return Status::error("no batch norm kernel '" + k.op() + "'");
  }
  // What cuDNN runs: data in f16/bf16/f32 with f32 per-channel tensors, or everything f64;
  // rank 2 to 4.
  p.dtype = x->dtype();
  p.paramDtype = p.dtype == plan::F64 ? plan::F64 : plan::F32;
  if (!(lowOrSingle(p.dtype) || p.dtype == plan::F64) || x->shape_size() < 2 || x->shape_size() > 4)
    return Status::error("unsupported dtypes"); // the caller falls back to the own kernels
  for (const Tensor *t : perChannel)
    if (t->dtype() != p.paramDtype)
      return Status::error("unsupported dtypes");
  for (const Tensor *t : data)
    if (t->dtype() != p.dtype)
      return Status::error("unsupported dtypes");
  if (p.pass == Pass::Backward &&
      (ctx.channelsLast(in[0]) != ctx.channelsLast(x) || ctx.channelsLast(out[0]) != ctx.channelsLast(x)))
    return Status::error("batch norm operands in different layouts");
  p.dims = shapeOf(*x);
  while (p.dims.size() < 4)
    p.dims.push_back(1); // [N,C] and [N,C,L] as [N,C,1,1] and [N,C,L,1]
  p.nhwc = ctx.channelsLast(x);
  return p;
}

std::string signature(const Problem &p) {
  return std::string("batch_norm.") + passName(p.pass) + "|x:" + plan::dtypeName(p.dtype) +
         "|stats:" + plan::dtypeName(p.paramDtype) + "|" + (p.nhwc ? "nhwc" : "nchw") + "=" + dimsList(p.dims) +
         (p.runningUpdate ? "|running" : "");
}

} // namespace bn

Expected<RunFn> buildBatchNorm(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                               const TensorList &out) {
  auto p = bn::parse(ctx, k, in, out);
  if (!p) {
    if (p.status().message() != "unsupported dtypes")
      return p.status();
    // Dtype combinations cuDNN does not take: the own kernels, which read any float dtype.
    switch (opOf(k)) {
    case plan::OpId::BatchNormTraining:
      return own::buildBatchNormTraining(ctx, k, in, out);
    case plan::OpId::BatchNormTrainingBackward:
      return own::buildBatchNormTrainingBackward(ctx, k, in, out);
    default:
      return own::buildBatchNormInference(ctx, k, in, out);
    }
  }
  switch (bn::forcedApi()) {
  case bn::Api::Ex:
    return bn::exOnly(ctx, *p);
  case bn::Api::Graph:
    return bn::graphForced(ctx, *p);
  case bn::Api::Tuned:
    break;
  }
  return bn::tuned(ctx, *p);
}

} // namespace castor::cuda
