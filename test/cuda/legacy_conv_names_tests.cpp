// The host side of the legacy convolution algorithms as tuner candidates, without a GPU: their
// names ("legacy:bwd_filter_algo3") and the parse back from a tuning-cache entry, the
// CASTOR_CONV_LEGACY setting, the tag the layer signature gains where they race (so that choices
// cached before are timed again), and a tuning-cache text holding them, written and read back.
//
//   castor_legacy_conv_names_tests        (exit status 0 when everything passes)
#include "../common/expectations.h"
#include "cuda/cudnn/convolution.h"
#include "cuda/tuning/cache_format.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace castor;
using namespace castor::cuda;

namespace {

using test::expect;

const char *passName(conv::Pass p) {
  return p == conv::Pass::Forward ? "forward" : p == conv::Pass::BackwardData ? "data gradient" : "weight gradient";
}

void namesRoundTrip() {
  const std::pair<conv::Pass, int> counts[] = {{conv::Pass::Forward, CUDNN_CONVOLUTION_FWD_ALGO_COUNT},
                                               {conv::Pass::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT},
                                               {conv::Pass::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT}};
  for (auto [pass, count] : counts)
    for (int algo = 0; algo < count; ++algo) {
      const std::string name = conv::legacyCandidateName(pass, algo);
      auto back = conv::parseLegacyCandidateName(name);
      expect(back && back->pass == pass && back->algo == algo,
             std::string(passName(pass)) + " algorithm " + std::to_string(algo) + ": '" + name + "' parses back");
      expect(name.find_first_of("\t\n") == std::string::npos, name + " has no tab or newline (a cache field)");
    }
  expect(conv::legacyCandidateName(conv::Pass::BackwardFilter, 3) == "legacy:bwd_filter_algo3", "wgrad algo 3's name");
  expect(conv::legacyCandidateName(conv::Pass::Forward, 1) == "legacy:fwd_algo1", "fprop algo 1's name");
  expect(conv::legacyCandidateName(conv::Pass::BackwardData, 0) == "legacy:bwd_data_algo0", "dgrad algo 0's name");
  // Anything else is not a legacy candidate: the tuner then times the layer again.
  const char *others[] = {"",
                          "legacy:",
                          "legacy:fwd_algo",
                          "legacy:fwd_algo-1",
                          "legacy:fwd_algo01",
                          "legacy:fwd_algo1x",
                          "legacy:fwd_algo 1",
                          "legacy:fwd_algo8",
                          "legacy:bwd_data_algo6",
                          "legacy:bwd_filter_algo7",
                          "legacy:bwd_filter_algo100",
                          "legacy:wgrad_algo1",
                          "Legacy:fwd_algo1",
                          "unfused:legacy:bwd_data_algo1",
                          "cudnn:eng0_k2=1",
                          "castor:dwconv"};
  for (const char *name : others)
    expect(!conv::parseLegacyCandidateName(name), std::string("'") + name + "' is not a legacy candidate");
}

void modes() {
  expect(conv::parseLegacyMode(nullptr) == conv::LegacyMode::Off, "unset: off");
  expect(conv::parseLegacyMode("") == conv::LegacyMode::Off, "empty: off");
  expect(conv::parseLegacyMode("1") == conv::LegacyMode::Race, "1: race");
  expect(conv::parseLegacyMode("bogus") == conv::LegacyMode::Off, "unknown: off");
  expect(conv::parseLegacyMode("race") == conv::LegacyMode::Race, "race");
  expect(conv::parseLegacyMode("0") == conv::LegacyMode::Off, "0: off");
  expect(conv::parseLegacyMode("off") == conv::LegacyMode::Off, "off");
  expect(conv::parseLegacyMode("only") == conv::LegacyMode::Only, "only");
}

// RegNetY-1.6GF's stride-2 grouped 3x3 weight gradient (group width 24), channels-last f16.
conv::Problem regnetLayer() {
  conv::Problem p;
  p.pass = conv::Pass::BackwardFilter;
  p.dtype = plan::F16;
  p.xs = {128, 168, 56, 56}, p.ws = {168, 24, 3, 3}, p.ys = {128, 168, 28, 28};
  p.padH = p.padW = 1, p.strideH = p.strideW = 2, p.groups = 7;
  p.xNhwc = p.wNhwc = p.yNhwc = true;
  return p;
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

void signatures() {
  conv::Problem p = regnetLayer();
  setenv("CASTOR_CONV_LEGACY", "off", 1);
  const std::string off = conv::signature(p);
  unsetenv("CASTOR_CONV_LEGACY");
  const std::string unset = conv::signature(p);
  expect(unset == off && !conv::legacyCandidatesOffered(p), "unset: off, the same key");
  setenv("CASTOR_CONV_LEGACY", "only", 1);
  const std::string only = conv::signature(p);
  expect(conv::legacyCandidatesForced(p), "only: forced");
  setenv("CASTOR_CONV_LEGACY", "race", 1);
  const std::string race = conv::signature(p);
  expect(!contains(off, "|legacy"), "off: no tag in '" + off + "'");
  expect(contains(race, "|legacy=1") && !contains(race, ",only"), "race: tagged '" + race + "'");
  expect(contains(only, "|legacy=1,only"), "only: tagged '" + only + "'");
  expect(off != race && race != only && off != only, "three keys");
  expect(conv::legacyCandidatesOffered(p) && !conv::legacyCandidatesForced(p), "race: offered, not forced");
  // Not offered: f64 (the legacy API is its only path anyway) and operands in mixed layouts.
  conv::Problem f64 = p;
  f64.dtype = plan::F64;
  expect(!conv::legacyCandidatesOffered(f64) && conv::legacyCandidatesTag(f64).empty(), "f64: not offered");
  conv::Problem mixed = p;
  mixed.wNhwc = false;
  expect(!conv::legacyCandidatesOffered(mixed) && conv::legacyCandidatesTag(mixed).empty(), "mixed layouts: not offered");
  unsetenv("CASTOR_CONV_LEGACY");
}

void cacheRoundTrip() {
  setenv("CASTOR_CONV_LEGACY", "race", 1); // the keys of a run that races the legacy candidates
  const conv::Problem p = regnetLayer();
  conv::Problem dgrad = p;
  dgrad.pass = conv::Pass::BackwardData;
  dgrad.accumulate = reinterpret_cast<const plan::Tensor *>(&p); // only its presence is read
  tuning::CacheEntries entries;
  entries[conv::signature(p)] = tuning::CacheEntry{conv::legacyCandidateName(p.pass, 3), 0.125};
  entries[conv::signature(dgrad)] =
      tuning::CacheEntry{"unfused:" + conv::legacyCandidateName(conv::Pass::BackwardData, 1), 0.0625};
  // A choice cached before the legacy candidates raced: still read, under the untagged key.
  setenv("CASTOR_CONV_LEGACY", "off", 1);
  const std::string oldKey = conv::signature(p);
  setenv("CASTOR_CONV_LEGACY", "race", 1);
  entries[oldKey] = tuning::CacheEntry{"cudnn:eng1_k2=3", 0.5};
  const tuning::CacheIdentity id{"NVIDIA H100 80GB HBM3", 132, 91900};
  const std::string text = tuning::formatCacheText(id, entries);
  tuning::CacheTextReport report;
  const tuning::CacheEntries back = tuning::parseCacheText(text, &report);
  expect(report.malformedLines == 0, "no malformed lines");
  expect(report.identity && *report.identity == id, "identity read back");
  expect(back.size() == entries.size(), "every entry read back");
  for (const auto &[key, e] : entries) {
    auto it = back.find(key);
    expect(it != back.end() && it->second.candidate == e.candidate && it->second.ms == e.ms,
           "entry '" + key + "' -> '" + e.candidate + "' read back");
  }
  auto wgrad = back.find(conv::signature(p));
  if (wgrad != back.end()) {
    auto algo = conv::parseLegacyCandidateName(wgrad->second.candidate);
    expect(algo && algo->pass == conv::Pass::BackwardFilter && algo->algo == 3, "the cached name rebuilds algo 3");
  }
  expect(oldKey != conv::signature(p), "the old entry does not stand in for the race with the legacy candidates");
  unsetenv("CASTOR_CONV_LEGACY");
}

} // namespace

int main() {
  unsetenv("CASTOR_CONV_LEGACY");
  unsetenv("CASTOR_CONV_DEPTHWISE");
  namesRoundTrip();
  modes();
  signatures();
  cacheRoundTrip();
  return test::verdict();
}
