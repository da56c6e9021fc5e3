// The tuning cache on disk (see tuning/tuning_cache.h).
#include "cuda/tuning/tuning_cache.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace castor::cuda::tuning {
namespace {

using Entries = CacheEntries;

struct CacheFile {
  bool loaded = false;
  Entries entries;
};

std::mutex mutex;
// By cache path (or, with the disk cache off, by GPU and cuDNN version).
std::map<std::string, CacheFile> files;
bool warned = false;

void warnOnce(const std::string &message) {
  if (warned)
    return;
  warned = true;
  std::fprintf(stderr, "castor: tuning cache: %s (choices are kept for this process only)\n", message.c_str());
}

std::string sanitized(const std::string &s) {
  std::string r;
  for (char ch : s)
    r += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-') ? ch : '_';
  return r.empty() ? "unknown" : r;
}

// "NVIDIA_H200-132sm-cudnn91900"
std::string deviceId(const DeviceContext &ctx) {
  return sanitized(ctx.deviceName) + "-" + std::to_string(ctx.smCount) + "sm-cudnn" +
         std::to_string(static_cast<unsigned long long>(cudnnGetVersion()));
}

std::string cacheDirectory() {
  const char *dir = std::getenv("CASTOR_TUNING_CACHE");
  if (dir && *dir) {
    if (std::strcmp(dir, "off") == 0 || std::strcmp(dir, "0") == 0)
      return "";
    return dir;
  }
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/castor";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/castor";
  return "";
}

CacheIdentity identityOf(const DeviceContext &ctx) {
  return CacheIdentity{ctx.deviceName, ctx.smCount, static_cast<int64_t>(cudnnGetVersion())};
}

// The in-memory cache of this GPU, loaded from disk on first use: a file written for another GPU
// or cuDNN version is ignored, lines that are not entries are skipped, with one warning naming
// the file. Call with `mutex` held.
CacheFile &fileOf(const DeviceContext &ctx, std::string &path) {
  path = cachePath(ctx);
  CacheFile &f = files[path.empty() ? "memory:" + deviceId(ctx) : path];
  if (!f.loaded) {
    f.loaded = true;
    if (!path.empty()) {
      CacheFileRead read = readCacheFile(path, identityOf(ctx));
      f.entries = std::move(read.entries);
      if (!read.warning.empty())
        std::fprintf(stderr, "castor: tuning cache: %s\n", read.warning.c_str());
    }
  }
  return f;
}

} // namespace

std::string cachePath(const DeviceContext &ctx) {
  const std::string dir = cacheDirectory();
  if (dir.empty())
    return "";
  return dir + "/tuning-" + deviceId(ctx) + ".txt";
}

std::optional<CacheEntry> lookup(const DeviceContext &ctx, const std::string &layerKey) {
  std::lock_guard<std::mutex> lock(mutex);
  std::string path;
  CacheFile &f = fileOf(ctx, path);
  auto it = f.entries.find(layerKey);
  if (it == f.entries.end())
    return std::nullopt;
  return it->second;
}

void record(const DeviceContext &ctx, const std::string &layerKey, const CacheEntry &entry) {
  std::lock_guard<std::mutex> lock(mutex);
  std::string path;
  CacheFile &f = fileOf(ctx, path);
  f.entries[layerKey] = entry;
  if (path.empty())
    return;
  // Merged, under the file's lock, with what other processes wrote since we read it (ours win on
  // the same key); the whole file is rewritten, without what was foreign or malformed in it.
  std::string error;
  if (!mergeIntoCacheFile(path, identityOf(ctx), f.entries, error))
    warnOnce(error);
}

} // namespace castor::cuda::tuning
