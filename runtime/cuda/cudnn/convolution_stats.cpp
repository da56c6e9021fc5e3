// A forward convolution that also computes its output's per-channel statistics for the batch norm
// that normalises it. cuDNN fuses a genstats node into the convolution's epilogue (the sum and the
// sum of squares of y per channel, as y is written), which saves the batch norm's pass that reads
// y for them: about a third of a batch-norm-ReLU forward's traffic. The statistics cost the
// convolution some time (on the H200, 1.11-1.12x a plain convolution: ../shared/REFERENCES.md), so
// whether a layer takes them is measured: the convolution offers both ways
// (DeviceContext::ConvStatsOffer) and the fused batch norm's builder times the pair each way
// (cudnn/batch_norm_relu.cpp).
#include "cuda/cudnn/convolution.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace castor::cuda::conv {
namespace {

// Persistent buffers of the sums: a tag of their own beside the builders' scratch tags
// (kernels/builders.h).
constexpr uint32_t kTagConvStats = 0xE;

bool disabled() {
  const char *v = std::getenv("CASTOR_CONV_STATS");
  return v && std::strcmp(v, "0") == 0;
}

} // namespace

std::string statsKey(const Problem &p) { return "conv+genstats|" + signature(p); }

bool statsWanted(const DeviceContext &ctx, const Problem &p) {
  if (disabled() || !ctx.plan || p.pass != Pass::Forward || p.bias || p.accumulate || p.groups != 1 ||
      (p.dtype != plan::F16 && p.dtype != plan::BF16) || !p.yNhwc || !p.xNhwc)
    return false;
  // The fused batch-norm-ReLU's training forward, or the plain batch norm's without its own
  // running update (cudnn/batch_norm.cpp).
  for (const plan::Kernel &k : ctx.plan->kernels())
    if ((opOf(k) == plan::OpId::BatchNormReluTraining ||
         (opOf(k) == plan::OpId::BatchNormTraining && k.outputs_size() == 3)) &&
        k.inputs_size() >= 3 && k.inputs(0) == p.y->id())
      return true;
  return false;
}

Expected<RunFn> offerStats(DeviceContext &ctx, const Problem &p, tuning::Choice plain) {
  const int64_t C = p.ys[1];
  const uint32_t key = kTagConvStats << 28 | p.y->id();
  if (p.y->id() >= (1u << 28))
    return runChoice(ctx, std::move(plain));
  auto buffer = ctx.persistentBuffer(key, sizeof(float) * size_t(2 * C));
  if (!buffer)
    return runChoice(ctx, std::move(plain));
  float *sums = static_cast<float *>(*buffer);
  std::vector<tuning::Candidate> candidates = statsCandidates(ctx, p, sums);
  std::optional<tuning::Choice> stats;
  if (!candidates.empty()) {
    auto chosen = tuning::choose(ctx, statsKey(p), candidates, kCompiledFusedCandidates);
    if (chosen)
      stats = std::move(*chosen);
  }
  if (!stats) {
    ctx.releasePersistentBuffer(key);
    return runChoice(ctx, std::move(plain));
  }
  DeviceContext::ConvStatsOffer offer;
  offer.plain = plain.executable.run;
  offer.withStats = stats->executable.run;
  offer.plainWorkspace = plain.executable.workspaceBytes;
  offer.statsWorkspace = stats->executable.workspaceBytes;
  offer.sums = sums;
  offer.signature = signature(p);
  offer.useStats = std::make_shared<bool>(false);
  ctx.convStatsOffers[p.y->id()] = offer;
  ctx.requestWorkspace(std::max(offer.plainWorkspace, offer.statsWorkspace));
  DeviceContext *c = &ctx;
  auto useStats = offer.useStats;
  auto plainRun = offer.plain, statsRun = offer.withStats;
  // Decided before the step is captured: the branch is taken on the host.
  return RunFn([c, useStats, plainRun, statsRun]() { return *useStats ? statsRun(c->workspace) : plainRun(c->workspace); });
}

} // namespace castor::cuda::conv
