// The legacy API's algorithms as candidates of the convolution tuner, beside the graph API's
// engines (convolution_graph.cpp): PyTorch's cudnn.benchmark times every legacy algorithm
// (cudnnFind*AlgorithmEx), and for some layers one of them beats every engine the graph API's
// heuristics offer (RegNet's grouped convolutions: issue 40). Castor's tuner times them itself,
// on the layer's real buffers, as it times the engines, and caches the winner by name
// ("legacy:bwd_filter_algo3": convolution_legacy_names.cpp).
//
// Same semantics as the graph path: the operands' layout, compute type FLOAT for f16/bf16/f32
// (the graph's compute and intermediate type), tensor-op math for f16/bf16 and FMA math for f32
// (no TF32), only deterministic algorithms under ctx.deterministic, the workspace through the
// tuner's Executable. The forward's bias and the data gradient's accumulated gradient are added
// by the callers after the convolution, as for the plain engines.
#include "cuda/cudnn/convolution_legacy.h"

#include <algorithm>

namespace castor::cuda::conv {
namespace {

// The version of the legacy candidates the tuning key names: raise it when a change should make
// every layer that cached a choice time them again.
constexpr const char *kTag = "|legacy=1";

// Algorithms of one pass, as many as cuDNN has (each reported once per math type at most).
constexpr int kMaxPerfs = 2 * std::max({int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT), int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT),
                                        int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT)});

// The algorithms of `perf` worth timing: status success, workspace within the limit, no tensor
// ops in f32, deterministic when asked; each algorithm once, in the heuristic's order.
template <typename Perf>
std::vector<int> usable(const Perf *perf, int returned, const DeviceContext &ctx, plan::DType dtype) {
  std::vector<int> algos;
  for (int i = 0; i < returned; ++i) {
    const Perf &r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > ctx.workspaceLimit)
      continue;
    if (dtype == plan::F32 && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH)
      continue;
    if (ctx.deterministic && r.determinism != CUDNN_DETERMINISTIC)
      continue;
    if (std::find(algos.begin(), algos.end(), int(r.algo)) == algos.end())
      algos.push_back(int(r.algo));
  }
  return algos;
}

// The algorithms cuDNN's heuristic lists as running p (empty when it lists none or fails).
std::vector<int> listedAlgorithms(const DeviceContext &ctx, const Problem &p, const LegacyDescriptors &d) {
  int returned = 0;
  if (p.pass == Pass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMaxPerfs];
    if (cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn, d.x, d.w, d.conv, d.y, kMaxPerfs, &returned, perf) !=
        CUDNN_STATUS_SUCCESS)
      return {};
    return usable(perf, returned, ctx, p.dtype);
  }
  if (p.pass == Pass::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxPerfs];
    if (cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn, d.w, d.y, d.conv, d.x, kMaxPerfs, &returned, perf) !=
        CUDNN_STATUS_SUCCESS)
      return {};
    return usable(perf, returned, ctx, p.dtype);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxPerfs];
  if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn, d.x, d.y, d.conv, d.w, kMaxPerfs, &returned, perf) !=
      CUDNN_STATUS_SUCCESS)
    return {};
  return usable(perf, returned, ctx, p.dtype);
}

// The candidate of `algo` on descriptors `d` (shared by a layer's candidates: their math type is
// the dtype's, set once).
tuning::Candidate candidateOf(DeviceContext &ctx, const Problem &p, std::shared_ptr<LegacyDescriptors> d, int algo) {
  tuning::Candidate candidate;
  candidate.name = legacyCandidateName(p.pass, algo);
  // Their number is capped by what cuDNN reports running (a few per layer), not by the tuner's
  // count of candidates: the engines before them must not crowd them out.
  candidate.counted = false;
  DeviceContext *c = &ctx;
  const plan::Tensor *x = p.x, *w = p.w, *y = p.y;
  const Pass pass = p.pass;
  candidate.build = [c, d, algo, x, w, y, pass]() -> Expected<tuning::Executable> {
    static const float one = 1.0f, zero = 0.0f;
    tuning::Executable e;
    size_t bytes = 0;
    if (pass == Pass::Forward) {
      const auto a = cudnnConvolutionFwdAlgo_t(algo);
      CASTOR_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, d->x, d->w, d->conv, d->y, a, &bytes));
      e.run = [c, d, a, x, w, y, bytes](void *ws) {
        return cudnnStatus(cudnnConvolutionForward(c->cudnn, &one, d->x, c->ptr(x), d->w, c->ptr(w), d->conv, a, ws,
                                                   bytes, &zero, d->y, c->ptr(y)),
                           "cudnnConvolutionForward");
      };
    } else if (pass == Pass::BackwardData) { // x is dx (written), y is dy
      const auto a = cudnnConvolutionBwdDataAlgo_t(algo);
      CASTOR_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, d->w, d->y, d->conv, d->x, a, &bytes));
      e.run = [c, d, a, x, w, y, bytes](void *ws) {
        return cudnnStatus(cudnnConvolutionBackwardData(c->cudnn, &one, d->w, c->ptr(w), d->y, c->ptr(y), d->conv, a,
                                                        ws, bytes, &zero, d->x, c->ptr(x)),
                           "cudnnConvolutionBackwardData");
      };
    } else { // w is dw (written)
      const auto a = cudnnConvolutionBwdFilterAlgo_t(algo);
      CASTOR_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(c->cudnn, d->x, d->y, d->conv, d->w, a, &bytes));
      e.run = [c, d, a, x, w, y, bytes](void *ws) {
        return cudnnStatus(cudnnConvolutionBackwardFilter(c->cudnn, &one, d->x, c->ptr(x), d->y, c->ptr(y), d->conv,
                                                          a, ws, bytes, &zero, d->w, c->ptr(w)),
                           "cudnnConvolutionBackwardFilter");
      };
    }
    e.workspaceBytes = bytes;
    return e;
  };
  return candidate;
}

} // namespace

bool legacyCandidatesOffered(const Problem &p) {
  return legacyMode() != LegacyMode::Off && (p.dtype == plan::F16 || p.dtype == plan::BF16 || p.dtype == plan::F32) &&
         p.xNhwc == p.wNhwc && p.xNhwc == p.yNhwc;
}

bool legacyCandidatesForced(const Problem &p) { return legacyMode() == LegacyMode::Only && legacyCandidatesOffered(p); }

std::string legacyCandidatesTag(const Problem &p) {
  if (!legacyCandidatesOffered(p))
    return "";
  // A race of the legacy algorithms alone is no race: its choice must never stand in for one.
  return legacyMode() == LegacyMode::Only ? std::string(kTag) + ",only" : kTag;
}

std::vector<tuning::Candidate> legacyCandidates(DeviceContext &ctx, const Problem &p) {
  if (!legacyCandidatesOffered(p))
    return {};
  auto d = legacyDescriptors(p);
  if (!d)
    return {};
  std::vector<tuning::Candidate> candidates;
  for (int algo : listedAlgorithms(ctx, p, **d))
    candidates.push_back(candidateOf(ctx, p, *d, algo));
  return candidates;
}

tuning::Candidate legacyCandidate(DeviceContext &ctx, const Problem &p, int algo) {
  auto d = legacyDescriptors(p);
  if (!d) {
    tuning::Candidate failing;
    failing.name = legacyCandidateName(p.pass, algo);
    failing.counted = false;
    const Status why = d.status();
    failing.build = [why]() -> Expected<tuning::Executable> { return why; };
    return failing;
  }
  return candidateOf(ctx, p, *d, algo);
}

} // namespace castor::cuda::conv
