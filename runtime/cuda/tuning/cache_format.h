// The tuning cache's text format (tuning_cache.h), apart from the device so that it can be
// tested and fuzzed on any machine: lines "<layer signature>\t<candidate name>\t<median ms>",
// '#' starting a comment. Lines that do not parse are skipped: a damaged cache costs timings,
// never a run.
#pragma once

#include <map>
#include <string>

namespace castor::cuda::tuning {

struct CacheEntry {
  std::string candidate;
  double ms = 0;
};
using CacheEntries = std::map<std::string, CacheEntry>;

// The entries of a cache file's text.
CacheEntries parseCacheText(const std::string &text);

} // namespace castor::cuda::tuning
