// The names of the legacy API's algorithms as tuner candidates ("legacy:fwd_algo1",
// "legacy:bwd_data_algo0", "legacy:bwd_filter_algo3") and the CASTOR_CONV_LEGACY setting: host
// code only, so that the tuning cache's names are tested without a GPU
// (test/cuda/legacy_conv_names_tests.cpp).
#include "cuda/cudnn/convolution.h"

#include <cstdlib>
#include <cstring>

namespace castor::cuda::conv {
namespace {

constexpr const char *kLegacyPrefix = "legacy:";

// Pass's order; each with the number of algorithms cuDNN's legacy API has for it.
struct PassNaming {
  const char *stem;
  int count;
};
constexpr PassNaming kNaming[] = {{"fwd_algo", CUDNN_CONVOLUTION_FWD_ALGO_COUNT},
                                  {"bwd_data_algo", CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT},
                                  {"bwd_filter_algo", CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT}};

} // namespace

std::string legacyCandidateName(Pass pass, int algo) {
  return std::string(kLegacyPrefix) + kNaming[int(pass)].stem + std::to_string(algo);
}

std::optional<LegacyAlgorithm> parseLegacyCandidateName(const std::string &name) {
  const size_t prefix = std::strlen(kLegacyPrefix);
  if (name.compare(0, prefix, kLegacyPrefix) != 0)
    return std::nullopt;
  for (Pass pass : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter}) {
    const PassNaming &n = kNaming[int(pass)];
    const size_t stem = std::strlen(n.stem);
    if (name.compare(prefix, stem, n.stem) != 0)
      continue;
    // Decimal digits only, no sign, no leading zero: one name per algorithm.
    const std::string digits = name.substr(prefix + stem);
    if (digits.empty() || digits.size() > 2 || (digits.size() > 1 && digits[0] == '0') ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    const int algo = std::atoi(digits.c_str());
    if (algo >= n.count)
      return std::nullopt;
    return LegacyAlgorithm{pass, algo};
  }
  return std::nullopt;
}

// Off unless asked for: the race showed no gain where it was meant to (RegNetY-016's grouped weight
// gradient, H100, 2026-12-07) and is the leading suspect of a CUDA/CPU agreement failure of a bf16
// plan stored NCHW (an NCHW-only algorithm of the weight gradient); it stays available to measure.
LegacyMode parseLegacyMode(const char *text) {
  if (!text || !*text)
    return LegacyMode::Off;
  if (std::strcmp(text, "race") == 0 || std::strcmp(text, "1") == 0 || std::strcmp(text, "on") == 0)
    return LegacyMode::Race;
  if (std::strcmp(text, "only") == 0)
    return LegacyMode::Only;
  return LegacyMode::Off;
}

LegacyMode legacyMode() { return parseLegacyMode(std::getenv("CASTOR_CONV_LEGACY")); }

} // namespace castor::cuda::conv
