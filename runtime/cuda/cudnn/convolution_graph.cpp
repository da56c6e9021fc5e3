// Convolutions through cuDNN's graph API (cudnn-frontend v1, namespace cudnn_frontend::graph):
// one graph per layer (conv_fprop, conv_dgrad or conv_wgrad; io in the operands' dtype,
// intermediate and compute FLOAT), its engine configurations from heuristics modes A and
// FALLBACK, each one a tuner candidate (tuning/tuner.h) named by its engine tag, racing the legacy
// API's algorithms (convolution_legacy_candidates.cpp). The frontend's
// headers come through cudnn/cudnn_graph.h, which cudnn/batch_norm_graph.cpp shares.
//
// A data gradient with an accumulated gradient (castor-fuse-gradient-add) also offers the graph
// dgrad -> pointwise add, its engines named "cudnn+add:<tag>" (convolution.cpp weighs them
// against the plain engine and a separate add); a forward convolution whose output a fused
// batch-norm-ReLU normalises, the graph conv_fprop -> genstats, "cudnn+stats:<tag>"
// (convolution_stats.cpp).
//
// Numerics: engines noted DOWN_CONVERT_INPUTS are never used; for fp32 operands neither are
// TENSOR_CORE engines (so fp32 means no TF32) nor REDUCED_PRECISION_REDUCTION ones; f16/bf16 may
// use the latter (see reducedPrecisionReductionAllowed). Under ctx.deterministic neither are
// engines noted NONDETERMINISTIC.
#include "cuda/cudnn/convolution.h"
#include "cuda/tuning/tuner.h"
#include "cuda/cudnn/cudnn_graph.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <unordered_map>

namespace castor::cuda::conv {
namespace {

namespace fe = cudnn_frontend;
using frontend::feStatus;
using frontend::feType;
using ConvGraph = frontend::PlanGraph;

// Tensor uids of the graph (the variant pack maps them to arena pointers); kUidAcc is the
// accumulated gradient of a data gradient with the add in its epilogue.
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3, kUidAcc = 4, kUidSum = 5, kUidSquares = 6;

fe::graph::Tensor_attributes tensorAttrs(const char *name, int64_t uid, const Shape &dims, bool nhwc,
                                         fe::DataType_t type) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim(dims)
      .set_stride(strides(dims, nhwc))
      .set_data_type(type);
}

// f16/bf16 convolutions may use engines noted REDUCED_PRECISION_REDUCTION, as the legacy API's
// tensor-op math and PyTorch's cudnn.benchmark do: measured on the H200 (ResNet-50 fp16 NHWC,
// batch 256), barring them made the convolutions 12% slower than the legacy API's heuristic
// (15.5 against 14.2 ms a step), allowing them 2% faster (13.9 ms).
// CASTOR_CONV_REDUCED_REDUCTION=0 bars them.
bool reducedPrecisionReductionAllowed() {
  const char *v = std::getenv("CASTOR_CONV_REDUCED_REDUCTION");
  return !(v && std::strcmp(v, "0") == 0);
}

// What of the device context decides a layer's graph and its engine filters: copied, so that a
// compile-ahead worker reads nothing the loading thread may change.
struct GraphSettings {
  bool deterministic = false;
  size_t workspaceLimit = 0;
};

GraphSettings settingsOf(const DeviceContext &ctx) { return GraphSettings{ctx.deterministic, ctx.workspaceLimit}; }

// Adds a configuration of every engine of `g` with its default knobs; engines that do not take
// the graph are skipped (their creation fails before anything is queued).
void addEveryEngine(ConvGraph &g) {
  int64_t count = 0;
  if (g.get_engine_count(count).is_bad())
    return;
  for (int64_t id = 0; id < count; ++id) {
    try {
      (void)g.create_execution_plan(id, {});
    } catch (const std::exception &) {
    }
  }
}

// The layer's graph, lowered to cuDNN with `handle` (ctx's, or a compile-ahead worker's) and
// with its engine configurations queried (none built). With `accumulating`, the data gradient's
// graph adds p.accumulate in its epilogue (in FLOAT, rounded once into dx); with `stats`, the
// forward's also sums y and its squares per channel (FLOAT [1, C, 1, 1] each).
Expected<std::shared_ptr<ConvGraph>> makeGraph(const GraphSettings &ctx, cudnnHandle_t handle, const Problem &p,
                                               bool accumulating = false, bool stats = false) {
  auto g = std::make_shared<ConvGraph>();
  const fe::DataType_t type = feType(p.dtype);
  g->set_io_data_type(type)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> padding{p.padH, p.padW}, stride{p.strideH, p.strideW},
      dilation{p.dilationH, p.dilationW};
  // Groups are implied by the dims: x has C channels, w has C/g.
  if (p.pass == Pass::Forward) {
    auto X = g->tensor(tensorAttrs("x", kUidX, p.xs, p.xNhwc, type));
    auto W = g->tensor(tensorAttrs("w", kUidW, p.ws, p.wNhwc, type));
    auto Y = g->conv_fprop(
        X, W, fe::graph::Conv_fprop_attributes().set_name("fprop").set_padding(padding).set_stride(stride).set_dilation(
                  dilation));
    Y->set_output(true).set_uid(kUidY).set_dim(p.ys).set_stride(strides(p.ys, p.yNhwc)).set_data_type(type);
    if (stats) {
      auto sums = g->genstats(Y, fe::graph::Genstats_attributes().set_name("genstats"));
      sums[0]->set_output(true).set_uid(kUidSum).set_data_type(fe::DataType_t::FLOAT);
      sums[1]->set_output(true).set_uid(kUidSquares).set_data_type(fe::DataType_t::FLOAT);
    }
  } else if (p.pass == Pass::BackwardData) {
    auto DY = g->tensor(tensorAttrs("dy", kUidY, p.ys, p.yNhwc, type));
    auto W = g->tensor(tensorAttrs("w", kUidW, p.ws, p.wNhwc, type));
    auto DX = g->conv_dgrad(
        DY, W, fe::graph::Conv_dgrad_attributes().set_name("dgrad").set_padding(padding).set_stride(stride).set_dilation(
                   dilation));
    if (accumulating) {
      auto ACC = g->tensor(tensorAttrs("acc", kUidAcc, p.xs, p.accumulateNhwc, type));
      DX->set_dim(p.xs).set_stride(strides(p.xs, p.xNhwc));
      DX = g->pointwise(DX, ACC, fe::graph::Pointwise_attributes().set_name("accumulate").set_mode(
                                     fe::PointwiseMode_t::ADD));
    }
    DX->set_output(true).set_uid(kUidX).set_dim(p.xs).set_stride(strides(p.xs, p.xNhwc)).set_data_type(type);
  } else {
    auto DY = g->tensor(tensorAttrs("dy", kUidY, p.ys, p.yNhwc, type));
    auto X = g->tensor(tensorAttrs("x", kUidX, p.xs, p.xNhwc, type));
    auto DW = g->conv_wgrad(
        DY, X, fe::graph::Conv_wgrad_attributes().set_name("wgrad").set_padding(padding).set_stride(stride).set_dilation(
                   dilation));
    DW->set_output(true).set_uid(kUidW).set_dim(p.ws).set_stride(strides(p.ws, p.wNhwc)).set_data_type(type);
  }
  CASTOR_RETURN_IF_ERROR(feStatus(g->validate(), "validate"));
  CASTOR_RETURN_IF_ERROR(feStatus(g->build_operation_graph(handle), "build_operation_graph"));
  CASTOR_RETURN_IF_ERROR(
      feStatus(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans"));
  if (everyEngine(p))
    addEveryEngine(*g);
  // Filters apply to the configurations just queried (so they come after the query).
  std::vector<fe::NumericalNote_t> barred{fe::NumericalNote_t::DOWN_CONVERT_INPUTS};
  if (p.dtype == plan::F32 || !reducedPrecisionReductionAllowed())
    barred.push_back(fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION);
  if (p.dtype == plan::F32)
    barred.push_back(fe::NumericalNote_t::TENSOR_CORE); // no TF32
  if (ctx.deterministic)
    barred.push_back(fe::NumericalNote_t::NONDETERMINISTIC); // e.g. wgrad engines that split K with atomics
  g->deselect_numeric_notes(barred);
  g->deselect_workspace_greater_than(int64_t(ctx.workspaceLimit));
  return g;
}

// Every engine configuration of the graph, in the heuristics' order, as a tuner candidate.
std::vector<tuning::Candidate> candidatesOf(DeviceContext &ctx, const Problem &p, const std::shared_ptr<ConvGraph> &g,
                                            const std::string &prefix = "cudnn:", float *sums = nullptr) {
  DeviceContext *c = &ctx;
  const plan::Tensor *x = p.x, *w = p.w, *y = p.y, *acc = p.accumulate;
  const int64_t C = p.ys[1];
  return frontend::engineCandidates(
      ctx, g, prefix,
      [c, x, w, y, acc, sums, C]() {
        std::unordered_map<int64_t, void *> pack{{kUidX, c->ptr(x)}, {kUidW, c->ptr(w)}, {kUidY, c->ptr(y)}};
        if (acc)
          pack.emplace(kUidAcc, c->ptr(acc));
        if (sums) {
          pack.emplace(kUidSum, sums);
          pack.emplace(kUidSquares, sums + C);
        }
        return pack;
      },
      signature(p));
}

bool statsTaken(const Problem &p) {
  return p.pass == Pass::Forward && !p.accumulate && !p.bias && (p.dtype == plan::F16 || p.dtype == plan::BF16) &&
         p.yNhwc && p.xNhwc;
}

} // namespace

// Grouped convolutions by default: on RegNetY-016 (group width 24, H100, 2026-12-07) cuDNN's
// heuristics offered only engines that took 121 ms a step for the weight gradients and 26 for
// the data gradients; every engine raced brought them to 32 and 10 ms (767 -> 2,079 img/s) for
// no longer a load. For other convolutions every engine changed nothing (ResNet-50,
// EfficientNet-B0, ConvNeXt-T within 0.2%) and cost up to 1.8 s of loading.
bool everyEngine(const Problem &p) {
  static const std::string mode = [] {
    const char *v = std::getenv("CASTOR_CONV_ENGINES");
    return std::string(v && *v ? v : "grouped");
  }();
  // Not for fp32: an engine with its default knobs may compute in TF32 without the TENSOR_CORE
  // note the filter reads (grouped 3x3 forward and data gradient, NHWC, H100: errors of 2.6e-4
  // against 1.5e-7 for the heuristics' engines), and fp32 means no TF32.
  if (p.dtype == plan::F32)
    return false;
  if (mode == "all")
    return true;
  const int64_t channels = p.xs.size() > 1 ? p.xs[1] : 0;
  return mode == "grouped" && p.groups > 1 && p.groups != channels;
}

std::string engineSetTag(const Problem &p) { return everyEngine(p) ? "|engines=all" : ""; }

std::vector<tuning::Candidate> accumulatingCandidates(DeviceContext &ctx, const Problem &p) {
  if (p.pass != Pass::BackwardData || !p.accumulate || (p.dtype != plan::F16 && p.dtype != plan::BF16))
    return {};
  try {
    auto g = makeGraph(settingsOf(ctx), ctx.cudnn, p, /*accumulating=*/true);
    if (!g)
      return {};
    return candidatesOf(ctx, p, *g, "cudnn+add:");
  } catch (const std::exception &) {
    return {}; // no engine fuses the add: the group runs unfused
  }
}

std::vector<tuning::CompileJob> accumulatingCompileJobs(const DeviceContext &ctx, const Problem &p, size_t count) {
  if (p.pass != Pass::BackwardData || !p.accumulate || (p.dtype != plan::F16 && p.dtype != plan::BF16))
    return {};
  // The graph is made from copies: the problem's dims and layouts (its tensors are not read).
  const GraphSettings settings = settingsOf(ctx);
  return frontend::compileAheadJobs(tuning::cachePath(ctx), signature(p), "cudnn+add:", count,
                                    [settings, p](cudnnHandle_t handle) { return makeGraph(settings, handle, p, true); });
}

std::vector<tuning::Candidate> statsCandidates(DeviceContext &ctx, const Problem &p, float *sums) {
  if (!statsTaken(p))
    return {};
  try {
    auto g = makeGraph(settingsOf(ctx), ctx.cudnn, p, /*accumulating=*/false, /*stats=*/true);
    if (!g)
      return {};
    return candidatesOf(ctx, p, *g, "cudnn+stats:", sums);
  } catch (const std::exception &) {
    return {}; // no engine computes the statistics: the batch norm reads y for them
  }
}

std::vector<tuning::CompileJob> statsCompileJobs(const DeviceContext &ctx, const Problem &p, size_t count) {
  if (!statsTaken(p))
    return {};
  const GraphSettings settings = settingsOf(ctx);
  return frontend::compileAheadJobs(tuning::cachePath(ctx), signature(p), "cudnn+stats:", count,
                                    [settings, p](cudnnHandle_t handle) { return makeGraph(settings, handle, p, false, true); });
}

RunFn runChoice(DeviceContext &ctx, tuning::Choice choice) {
  ctx.requestWorkspace(choice.executable.workspaceBytes);
  DeviceContext *c = &ctx;
  auto run = std::move(choice.executable.run);
  return RunFn([c, run]() { return run(c->workspace); });
}

Expected<RunFn> buildFrontend(DeviceContext &ctx, const Problem &p) {
  auto choice = chooseFrontend(ctx, p);
  if (!choice)
    return choice.status();
  return runChoice(ctx, std::move(*choice));
}

namespace {

// The engine candidates (and legacy algorithms), each followed by the bias add (so that they race
// a candidate that adds the bias in its epilogue on equal terms); with `skipOwn`, Castor's own
// kernels ("castor:" candidates, which add it themselves) are left as they are.
Status addBiasAfter(DeviceContext &ctx, const Problem &p, std::vector<tuning::Candidate> &candidates,
                    bool skipOwn = false) {
  auto add = biasAdd(ctx, p);
  if (!add)
    return add.status();
  const RunFn addRun = *add;
  for (tuning::Candidate &c : candidates) {
    if (skipOwn && c.name.rfind("castor:", 0) == 0)
      continue;
    auto build = std::move(c.build);
    c.build = [build, addRun]() -> Expected<tuning::Executable> {
      auto e = build();
      if (!e)
        return e;
      auto run = std::move(e->run);
      e->run = [run, addRun](void *workspace) -> Status {
        CASTOR_RETURN_IF_ERROR(run(workspace));
        return addRun();
      };
      return e;
    };
  }
  return Status::ok();
}

// cuDNN's engines for p, or why there are none.
Expected<std::vector<tuning::Candidate>> engineCandidatesFor(DeviceContext &ctx, const Problem &p) {
  std::vector<tuning::Candidate> candidates;
  try {
    auto g = makeGraph(settingsOf(ctx), ctx.cudnn, p);
    if (!g)
      return g.status();
    candidates = candidatesOf(ctx, p, *g);
  } catch (const std::exception &ex) {
    return Status::error(std::string("cuDNN graph: ") + ex.what());
  }
  if (candidates.empty())
    return Status::error("cuDNN's heuristics offer no engine");
  return candidates;
}

} // namespace

Expected<tuning::Choice> chooseFrontend(DeviceContext &ctx, const Problem &p) {
  if (p.dtype != plan::F16 && p.dtype != plan::BF16 && p.dtype != plan::F32)
    return Status::error("the cuDNN graph API path runs f16, bf16 and f32 convolutions");
  // Castor's own kernels first: the tuner builds the first CASTOR_TUNING_MAX_CANDIDATES only.
  // CASTOR_CONV_LEGACY=only leaves them out, unless they are forced too.
  const bool legacyAlone = legacyCandidatesForced(p) && !depthwiseForced(p);
  std::vector<tuning::Candidate> candidates;
  if (!legacyAlone)
    candidates = depthwiseCandidates(ctx, p);
  if (depthwiseForced(p))
    return tuning::choose(ctx, signature(p), candidates);
  Expected<std::vector<tuning::Candidate>> engines = std::vector<tuning::Candidate>{};
  if (!legacyAlone)
    engines = engineCandidatesFor(ctx, p);
  // The legacy API's algorithms race the engines (convolution_legacy_candidates.cpp); the tuner
  // does not count them toward its limit, so they come last.
  std::vector<tuning::Candidate> legacy = legacyCandidates(ctx, p);
  if (engines) {
    for (tuning::Candidate &c : *engines)
      candidates.push_back(std::move(c));
  }
  for (tuning::Candidate &c : legacy)
    candidates.push_back(std::move(c));
  if (candidates.empty())
    return engines ? Status::error("neither cuDNN's heuristics nor its legacy API offer an algorithm")
                   : engines.status();
  if (candidatesAddBias(p))
    CASTOR_RETURN_IF_ERROR(addBiasAfter(ctx, p, candidates, /*skipOwn=*/true));
  auto choice = tuning::choose(ctx, signature(p), candidates);
  // A layer the graph API could not run, run by a legacy algorithm: the summary's fallback count.
  if (choice && !engines && parseLegacyCandidateName(choice->name))
    tuning::noteFallback();
  return choice;
}

} // namespace castor::cuda::conv
