// The tuning cache's text format and its file (tuning_cache.h), apart from the device so that
// they can be tested and fuzzed on any machine.
//
// Text: a header whose line "# GPU <name> (<n> SMs), cuDNN <version>." names what the entries
// were timed on, then lines "<layer signature>\t<candidate name>\t<median ms>"; '#' starts a
// comment. Lines that do not parse are counted and skipped: a damaged cache costs timings,
// never a run.
//
// File: every read-merge-write holds an advisory lock (flock on PATH.lock), so that processes
// sharing the cache never lose each other's entries, and replaces the file through a temporary
// file of its own (mkstemp) renamed over it, so that a reader sees the old file or the new one,
// never a mixture.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace castor::cuda::tuning {

struct CacheEntry {
  std::string candidate;
  double ms = 0;
};
using CacheEntries = std::map<std::string, CacheEntry>;

// What the entries were timed on: the GPU's name, its multiprocessors, cuDNN's version
// (cudnnGetVersion()). Engine names and timings mean nothing on another.
struct CacheIdentity {
  std::string gpu;
  int64_t sms = 0;
  int64_t cudnn = 0;
  bool operator==(const CacheIdentity &o) const { return gpu == o.gpu && sms == o.sms && cudnn == o.cudnn; }
  bool operator!=(const CacheIdentity &o) const { return !(*this == o); }
  // "NVIDIA H200 (132 SMs), cuDNN 91900", as the header writes it.
  std::string describe() const;
};

// What parseCacheText found beside the entries.
struct CacheTextReport {
  int64_t malformedLines = 0;            // neither empty, a comment, nor an entry
  std::optional<CacheIdentity> identity; // the header's, when it has one
};

// The entries of a cache file's text; what else it found in `report`, when given.
CacheEntries parseCacheText(const std::string &text, CacheTextReport *report = nullptr);

// The text of a cache file for `id` holding `entries` (which parseCacheText reads back).
std::string formatCacheText(const CacheIdentity &id, const CacheEntries &entries);

// The entries of the file at `path` that serve `id`: none when it does not exist or cannot be
// read, none when its header names another GPU or cuDNN version (foreign), the good ones when
// some lines are not entries. `warning` says why entries were left out ("" when none were).
struct CacheFileRead {
  CacheEntries entries;
  std::string warning;
};
CacheFileRead readCacheFile(const std::string &path, const CacheIdentity &id);

// Under the lock on `path`: reads the file as readCacheFile does (foreign or malformed content is
// dropped), adds `ours` (which win on the same key) and replaces the file with the result for
// `id`, creating its directory. False with `error` set when that fails.
bool mergeIntoCacheFile(const std::string &path, const CacheIdentity &id, const CacheEntries &ours,
                        std::string &error);

} // namespace castor::cuda::tuning
