// What the convolution builders share (convolution.cpp, cudnn/convolution_graph.cpp, cudnn/convolution_legacy.cpp): one
// convolution described once, in forward terms, whichever pass the kernel computes.
#pragma once

#include "cuda/base/device_context.h"
#include "cuda/kernels/depthwise_conv.h"
#include "cuda/tuning/compile_ahead.h"
#include "cuda/tuning/tuner.h"

#include <optional>
#include <string>

namespace castor::cuda::conv {

enum class Pass { Forward, BackwardData, BackwardFilter };

// How many of a fused graph's runtime-compiled engines the tuner may build for one layer (the
// dgrad -> add and the conv_fprop -> genstats graphs run only through such engines). On the H200
// (ResNet-50 fp16, 8 dgrad + add signatures, 24 engines) their first compilation on a machine
// costs about 5 s, 0.9 s once the machine has compiled them before, nothing once their plans are
// on disk (tuning/compiled_plans.h).
constexpr size_t kCompiledFusedCandidates = 3;

// One convolution in forward terms: x [N,C,H,W] (*) w [K,C/g,R,S] -> y [N,K,P,Q]. For the data
// gradient x is dx (written) and y is dy (read); for the filter gradient w is dw (written).
struct Problem {
  Pass pass = Pass::Forward;
  const plan::Tensor *x = nullptr, *w = nullptr, *y = nullptr;
  const plan::Tensor *bias = nullptr; // forward only, optional: [K]
  const plan::Tensor *accumulate = nullptr; // data gradient only, optional: added to dx (x's shape)
  plan::DType dtype = plan::F32;
  Shape xs, ws, ys;                     // logical dims
  int64_t padH = 0, padW = 0;           // symmetric
  int64_t strideH = 1, strideW = 1;
  int64_t dilationH = 1, dilationW = 1;
  int64_t groups = 1;
  bool xNhwc = false, wNhwc = false, yNhwc = false; // channels-last storage, per operand
  bool accumulateNhwc = false;
  std::string label;                    // the kernel's name (or op) for messages
};

// Reads the kernel's attributes and operands and checks what every path needs (one float
// dtype, rank 4, symmetric pads, shapes that agree with the attributes).
Expected<Problem> parse(const DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                        const TensorList &out);

// The plan-independent signature of the convolution: pass, dtype, layouts, every dimension,
// pads, strides, dilations, groups, and which of Castor's own kernels race cuDNN's engines for it
// (ownCandidatesTag). Two layers with the same signature behave the same on one GPU, whatever
// plan they belong to.
std::string signature(const Problem &p);

// Element strides of a logical [N,C,H,W] tensor as it is stored (NCHW or channels-last).
std::vector<int64_t> strides(const Shape &dims, bool channelsLast);

// The cuDNN graph API (cudnn-frontend, cudnn/convolution_graph.cpp) with per-layer timing and the
// persistent tuning cache; fails (the caller falls back) when no engine runs the problem. Runs
// the convolution alone (p.accumulate is not read).
Expected<RunFn> buildFrontend(DeviceContext &ctx, const Problem &p);
Expected<tuning::Choice> chooseFrontend(DeviceContext &ctx, const Problem &p);
// The chosen candidate as the kernel's RunFn: its workspace requested, the shared workspace read
// when it runs (allocated after every kernel is built).
RunFn runChoice(DeviceContext &ctx, tuning::Choice choice);
// The engines of the data gradient with p.accumulate added in the convolution's epilogue
// (dgrad -> pointwise add in one cuDNN graph), as tuner candidates; empty where cuDNN has none.
std::vector<tuning::Candidate> accumulatingCandidates(DeviceContext &ctx, const Problem &p);
// The compilations accumulatingCandidates' first `count` runtime-compiled engines would start,
// as jobs to run ahead on worker threads (tuning/compile_ahead.h).
std::vector<tuning::CompileJob> accumulatingCompileJobs(const DeviceContext &ctx, const Problem &p, size_t count);
// The forward convolution with its output's per-channel sum and sum of squares computed in its
// epilogue (conv_fprop -> genstats in one cuDNN graph) into sums [2][C] f32, as tuner candidates;
// empty where cuDNN has none or the problem is not one it takes (f16/bf16, channels-last, no bias).
std::vector<tuning::Candidate> statsCandidates(DeviceContext &ctx, const Problem &p, float *sums);
std::vector<tuning::CompileJob> statsCompileJobs(const DeviceContext &ctx, const Problem &p, size_t count);
// Whether the plan normalises p's output with a fused batch-norm-ReLU or a plain batch norm's
// training forward that may take its statistics from the convolution (convolution_stats.cpp;
// CASTOR_CONV_STATS=0: never).
bool statsWanted(const DeviceContext &ctx, const Problem &p);
// The convolution offered both ways in ctx.convStatsOffers (plain: `plain`; with the statistics:
// cuDNN's fastest genstats engine), running the plain way until the batch norm's builder picks
// the other; just `plain` where no genstats engine runs.
Expected<RunFn> offerStats(DeviceContext &ctx, const Problem &p, tuning::Choice plain);
// The tuning key of the genstats candidates.
std::string statsKey(const Problem &p);

// Castor's own depthwise kernels (kernels/depthwise_conv.h) as tuner candidates
// (kernels/depthwise_conv.cpp). CASTOR_CONV_DEPTHWISE=0 never offers them, =only offers them
// alone wherever they take the layer.
// The geometry of p as the kernels see it, or why they do not take p (cuDNN alone runs it).
Expected<depthwise::Geometry> depthwiseGeometry(const Problem &p);
// Whether p's race includes them, and whether they run alone (CASTOR_CONV_DEPTHWISE=only).
bool depthwiseOffered(const Problem &p);
bool depthwiseForced(const Problem &p);
// What signature(p) adds for them: "" where they are not offered, else their version (and ",only"
// when forced), so that a choice cached before they raced (or of an older version, or of a forced
// run) is not taken for one of the race they are in; the file format stays the same.
std::string ownCandidatesTag(const Problem &p);
// Whether every candidate of p's race adds p's bias itself (the depthwise forward does it in its
// epilogue; the cuDNN engines racing it are timed with the bias add after them), so that
// buildConvolution does not add it again.
bool candidatesAddBias(const Problem &p);
// The kernels of p's pass (p's bias or accumulated gradient added in their epilogue): the tiles,
// named "castor:dwconv", "castor:dwconv+bias" or "castor:dwconv+add", and where they take the
// layer the row kernels, "castor:dwconv-rows" with the same suffixes; empty where not offered.
std::vector<tuning::Candidate> depthwiseCandidates(DeviceContext &ctx, const Problem &p);

// cuDNN's legacy convolution API, its heuristic's algorithm (cudnn/convolution_legacy.cpp); the only path
// for f64 and the fallback of the graph API.
Expected<RunFn> buildLegacy(DeviceContext &ctx, const Problem &p);

// The legacy API's algorithms as tuner candidates beside the graph API's engines
// (cudnn/convolution_legacy_candidates.cpp), as PyTorch's cudnn.benchmark finds them: each
// algorithm cuDNN reports running the problem within the workspace limit. CASTOR_CONV_LEGACY=off
// (or 0) never offers them, =only offers them alone (tests, comparisons); unset (race), they race
// the engines of every f16/bf16/f32 convolution whose operands share one layout.
enum class LegacyMode { Race, Off, Only };
LegacyMode parseLegacyMode(const char *text); // CASTOR_CONV_LEGACY's value (null: unset)
LegacyMode legacyMode();
// A legacy candidate's algorithm, as its name says.
struct LegacyAlgorithm {
  Pass pass = Pass::Forward;
  int algo = 0; // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
};
// "legacy:fwd_algo<n>", "legacy:bwd_data_algo<n>", "legacy:bwd_filter_algo<n>" (the tuning
// cache's names: convolution_legacy_names.cpp), and back; nullopt for any other name.
std::string legacyCandidateName(Pass pass, int algo);
std::optional<LegacyAlgorithm> parseLegacyCandidateName(const std::string &name);
// Whether p's race includes them, and whether they run alone (CASTOR_CONV_LEGACY=only).
bool legacyCandidatesOffered(const Problem &p);
bool legacyCandidatesForced(const Problem &p);
// What signature(p) adds for them: "" where not offered, else their version (and ",only" when
// forced), so that a choice cached before they raced is timed again; the file format stays.
std::string legacyCandidatesTag(const Problem &p);
// Whether the graph API's candidates of `p` include every engine cuDNN has for it (default knobs)
// beside the heuristics' configurations: CASTOR_CONV_ENGINES=all for every convolution, =grouped
// (the default) for grouped ones that are not depthwise, =heuristics for none (read once); never
// for fp32 (default knobs may mean TF32 that no note declares); and the
// signature's part that says so ("|engines=all" or nothing).
bool everyEngine(const Problem &p);
std::string engineSetTag(const Problem &p);
// The algorithms of p's pass that cuDNN reports running p (cudnnGet*Algorithm_v7: status
// success, workspace within ctx.workspaceLimit, deterministic under ctx.deterministic), in the
// heuristic's order, each once; p.bias and p.accumulate are not read (the callers add them).
std::vector<tuning::Candidate> legacyCandidates(DeviceContext &ctx, const Problem &p);
// The candidate of one algorithm (its name: legacyCandidateName), whether or not the heuristic
// lists it; its build fails where cuDNN does not run it.
tuning::Candidate legacyCandidate(DeviceContext &ctx, const Problem &p, int algo);

// `run`, then the bias [K] added over y (forward with bias only; else `run` itself).
Expected<RunFn> withBias(DeviceContext &ctx, const Problem &p, RunFn run);
// The bias [K] added over y in place (forward with bias only).
Expected<RunFn> biasAdd(DeviceContext &ctx, const Problem &p);

} // namespace castor::cuda::conv
