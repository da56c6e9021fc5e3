// The tuning cache on disk (see tuning/tuning_cache.h).
#include "cuda/tuning/tuning_cache.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace castor::cuda::tuning {
namespace {

namespace fs = std::filesystem;
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

// Entries of the file at `path` (none when it does not exist or cannot be read); lines that do
// not parse are skipped.
Entries readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parseCacheText(text.str());
}

// Writes `entries` to `path` through a temporary file renamed over it; false with `error` set
// when that fails.
bool writeFile(const std::string &path, const DeviceContext &ctx, const Entries &entries, std::string &error) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) {
    error = "cannot create " + fs::path(path).parent_path().string() + ": " + ec.message();
    return false;
  }
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) {
      error = "cannot write " + tmp;
      return false;
    }
    out << "# Castor tuning cache: the candidate (cuDNN engine or fused graph) chosen per layer signature.\n"
        << "# GPU " << ctx.deviceName << " (" << ctx.smCount << " SMs), cuDNN " << cudnnGetVersion() << ".\n"
        << "# <layer signature>\\t<candidate>\\t<median ms when timed>\n";
    for (const auto &[key, e] : entries) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.6g", e.ms);
      out << key << '\t' << e.candidate << '\t' << ms << '\n';
    }
    out.flush();
    if (!out) {
      error = "cannot write " + tmp;
      out.close();
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// The in-memory cache of this GPU, loaded from disk on first use. Call with `mutex` held.
CacheFile &fileOf(const DeviceContext &ctx, std::string &path) {
  path = cachePath(ctx);
  CacheFile &f = files[path.empty() ? "memory:" + deviceId(ctx) : path];
  if (!f.loaded) {
    f.loaded = true;
    if (!path.empty())
      f.entries = readFile(path);
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
  // Merge with what other processes wrote since we read the file; ours win on the same key.
  Entries merged = readFile(path);
  for (const auto &[key, e] : f.entries)
    merged[key] = e;
  std::string error;
  if (!writeFile(path, ctx, merged, error))
    warnOnce(error);
}

} // namespace castor::cuda::tuning
