// Convolutions whose input channels are not a multiple of 8 (a network's stem: C = 3), also
// offered to the tuner on operands padded with zero channels to 4 or 8. cuDNN's engines for such
// a layer can be far slower in one dtype than in another: on the H200, ResNet-50's 7x7 stem
// (C = 3, channels-last) takes 0.55 + 0.55 ms forward and filter gradient in fp16 and 3.06 + 5.15
// ms in bf16 with the best engine cuDNN's heuristics offer (docs/performance.md, 2026-12-03).
// Zero channels change nothing in the result: each output is the same sum with products of zero
// added; the filter gradient of the padding is computed and dropped.
//
// A padded candidate runs, on the step's stream: the padded input written into the shared
// workspace (zeros, then x's channels), for the forward the padded weight beside it, the engine of
// the padded problem, and for the filter gradient the C real channels copied from the padded
// gradient into dw. Its workspace is the engine's followed by the padded operands. Channels-last
// f16/bf16 forward and filter-gradient convolutions without groups only: the data gradient of
// such a layer (the stem's input needs none) keeps its own engines.
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/strided.h"

#include <cstdint>
#include <memory>
#include <string>

namespace castor::cuda::conv {
namespace {

// Channel counts the padded operands are rounded up to, each a family of candidates.
constexpr int64_t kPadMultiples[] = {4, 8};
// How many of p's own engines come first, and of each padded family after them, before the
// rest: the tuner builds at most CASTOR_TUNING_MAX_CANDIDATES (16) of the list.
constexpr size_t kOwnFirst = 8, kPaddedFirst = 4;

size_t alignUp(size_t n) { return (n + 255) / 256 * 256; }

// rows x `from` elements of `elemBytes` at src into rows x `to` at dst: the first min(from, to)
// of each row copied, the rest of dst's row zero when to > from.
Status moveChannels(const void *src, void *dst, int64_t rows, int64_t from, int64_t to, size_t elemBytes,
                    cudaStream_t s) {
  if (to > from)
    CASTOR_CUDA(cudaMemsetAsync(dst, 0, size_t(rows * to) * elemBytes, s));
  StridedMove m;
  m.rank = 2;
  m.dims[0] = rows, m.dims[1] = from < to ? from : to;
  m.srcStrides[0] = from, m.srcStrides[1] = 1;
  m.dstStrides[0] = to, m.dstStrides[1] = 1;
  return cudaStatus(stridedMove(src, dst, m, int(elemBytes), s), "convolution channel padding");
}

bool takesPadding(const Problem &p) {
  return (p.dtype == plan::F16 || p.dtype == plan::BF16) && p.xNhwc && p.wNhwc && p.groups == 1 && !p.accumulate &&
         (p.pass == Pass::Forward || p.pass == Pass::BackwardFilter) && p.xs[1] % 8 != 0;
}

// The engines of p padded to `padded` channels, each wrapped to pad before and copy back after.
std::vector<tuning::Candidate> paddedFamily(DeviceContext &ctx, const Problem &p, int64_t padded) {
  const int64_t C = p.xs[1];
  Problem q = p;
  q.xs[1] = padded, q.ws[1] = padded;
  const size_t elem = plan::dtypeSize(p.dtype);
  const int64_t rows = p.xs[0] * p.xs[2] * p.xs[3];  // x: [N*H*W, C] channels-last
  const int64_t wRows = p.ws[0] * p.ws[2] * p.ws[3]; // w: [K*R*S, C] channels-last
  const size_t xBytes = alignUp(size_t(rows * padded) * elem), wBytes = alignUp(size_t(wRows * padded) * elem);
  // Where this run's padded operands lie (the workspace the run is given), read by the engine's
  // variant pack when the run enqueues it.
  auto area = std::make_shared<uint8_t *>(nullptr);
  DeviceContext *c = &ctx;
  const plan::Tensor *y = p.y;
  std::vector<tuning::Candidate> family =
      engineCandidatesAt(ctx, q, "pad" + std::to_string(padded) + ":cudnn:", [c, area, y, xBytes]() {
        return OperandPointers{*area, *area + xBytes, c->ptr(y)};
      });
  const plan::Tensor *x = p.x, *w = p.w;
  const bool forward = p.pass == Pass::Forward;
  for (tuning::Candidate &candidate : family) {
    auto build = candidate.build;
    candidate.build = [=]() -> Expected<tuning::Executable> {
      auto engine = build();
      if (!engine)
        return engine.status();
      const size_t engineBytes = alignUp(engine->workspaceBytes);
      tuning::Executable e;
      e.workspaceBytes = engineBytes + xBytes + wBytes;
      auto run = engine->run;
      e.run = [=](void *workspace) -> Status {
        *area = static_cast<uint8_t *>(workspace) + engineBytes;
        CASTOR_RETURN_IF_ERROR(moveChannels(c->ptr(x), *area, rows, C, padded, elem, c->stream));
        if (forward)
          CASTOR_RETURN_IF_ERROR(moveChannels(c->ptr(w), *area + xBytes, wRows, C, padded, elem, c->stream));
        CASTOR_RETURN_IF_ERROR(run(workspace));
        if (!forward) // the filter gradient's real channels
          return moveChannels(*area + xBytes, c->ptr(w), wRows, padded, C, elem, c->stream);
        return Status::ok();
      };
      return e;
    };
  }
  return family;
}

// One family of candidates per padded channel count (C = 5, 6, 7 pad to 8 either way).
std::vector<std::vector<tuning::Candidate>> paddedFamilies(DeviceContext &ctx, const Problem &p) {
  std::vector<std::vector<tuning::Candidate>> families;
  if (!takesPadding(p))
    return families;
  int64_t last = 0;
  for (int64_t multiple : kPadMultiples) {
    const int64_t padded = (p.xs[1] + multiple - 1) / multiple * multiple;
    if (padded != last)
      families.push_back(paddedFamily(ctx, p, padded));
    last = padded;
  }
  return families;
}

} // namespace

std::vector<tuning::Candidate> paddedCandidates(DeviceContext &ctx, const Problem &p) {
  std::vector<tuning::Candidate> all;
  for (auto &family : paddedFamilies(ctx, p))
    for (tuning::Candidate &c : family)
      all.push_back(std::move(c));
  return all;
}

std::vector<tuning::Candidate> withPaddedCandidates(DeviceContext &ctx, const Problem &p,
                                                    std::vector<tuning::Candidate> candidates) {
  // Families in order: p's own engines, then each padding's.
  std::vector<std::vector<tuning::Candidate>> families{std::move(candidates)};
  for (auto &family : paddedFamilies(ctx, p))
    families.push_back(std::move(family));
  if (families.size() == 1)
    return std::move(families[0]);
  // The first of each family, then the rest of each.
  std::vector<tuning::Candidate> ordered;
  for (bool rest : {false, true})
    for (size_t f = 0; f < families.size(); ++f) {
      const size_t first = f == 0 ? kOwnFirst : kPaddedFirst;
      for (size_t i = rest ? first : 0; i < families[f].size() && (rest || i < first); ++i)
        ordered.push_back(std::move(families[f][i]));
    }
  return ordered;
}

} // namespace castor::cuda::conv
