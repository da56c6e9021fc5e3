// The tuning cache's text and file (cache_format.h).
#include "cuda/tuning/cache_format.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace castor::cuda::tuning {
namespace {

constexpr const char *kGpuPrefix = "# GPU ";

bool blank(const std::string &s, size_t from = 0) {
  for (size_t i = from; i < s.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(s[i])))
      return false;
  return true;
}

// The decimal number at s[at...] (digits only), advancing `at`; nullopt when there is none.
std::optional<int64_t> number(const std::string &s, size_t &at) {
  const size_t from = at;
  int64_t v = 0;
  while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at])) && at - from < 18)
    v = v * 10 + (s[at++] - '0');
  if (at == from || (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at]))))
    return std::nullopt;
  return v;
}

bool literal(const std::string &s, size_t &at, const char *text) {
  const size_t n = std::strlen(text);
  if (s.compare(at, n, text) != 0)
    return false;
  at += n;
  return true;
}

// The identity of a header line "# GPU <name> (<n> SMs), cuDNN <version>." (the name may hold
// " (" itself: the last one opens the count).
std::optional<CacheIdentity> headerIdentity(const std::string &line) {
  const size_t prefix = std::strlen(kGpuPrefix);
  if (line.compare(0, prefix, kGpuPrefix) != 0)
    return std::nullopt;
  const size_t open = line.rfind(" (");
  if (open == std::string::npos || open < prefix)
    return std::nullopt;
  CacheIdentity id;
  id.gpu = line.substr(prefix, open - prefix);
  size_t at = open + 2;
  auto sms = number(line, at);
  if (!sms || !literal(line, at, " SMs), cuDNN "))
    return std::nullopt;
  auto cudnn = number(line, at);
  if (!cudnn)
    return std::nullopt;
  if (at < line.size() && line[at] == '.')
    ++at;
  if (!blank(line, at))
    return std::nullopt;
  id.sms = *sms;
  id.cudnn = *cudnn;
  return id;
}

// Holds an exclusive flock on a lock file beside the cache (not on the cache itself, which
// rename replaces) for its lifetime.
class FileLock {
public:
  FileLock() = default;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;
  ~FileLock() {
    if (fd_ >= 0)
      ::close(fd_); // releases the lock
  }
  bool acquire(const std::string &path, std::string &error) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      error = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
    // A file system without flock (some network ones): unlocked, the replacement is still atomic.
    return true;
  }

private:
  int fd_ = -1;
};

bool writeAll(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

// `text` into a temporary file of this call's own (unique across processes and threads) renamed
// over `path`.
bool replaceFile(const std::string &path, const std::string &text, std::string &error) {
  std::string name = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    error = "cannot create a temporary file beside " + path + ": " + std::strerror(errno);
    return false;
  }
  // mkostemp makes the file 0600; the cache is shared as the file it replaces was.
  bool ok = writeAll(fd, text) && ::fchmod(fd, 0644) == 0;
  int savedErrno = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    savedErrno = errno;
  }
  if (!ok) {
    error = "cannot write " + name + ": " + std::strerror(savedErrno);
    ::unlink(name.c_str());
    return false;
  }
  if (std::rename(name.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + name + " to " + path + ": " + std::strerror(errno);
    ::unlink(name.c_str());
    return false;
  }
  return true;
}

} // namespace

std::string CacheIdentity::describe() const {
  return gpu + " (" + std::to_string(sms) + " SMs), cuDNN " + std::to_string(cudnn);
}

CacheEntries parseCacheText(const std::string &text, CacheTextReport *report) {
  CacheTextReport local;
  CacheTextReport &r = report ? *report : local;
  r = CacheTextReport{};
  CacheEntries entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (blank(line))
      continue;
    if (line[0] == '#') {
      if (!r.identity)
        r.identity = headerIdentity(line);
      continue;
    }
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos || a == 0 || b == a + 1) {
      ++r.malformedLines;
      continue;
    }
    CacheEntry e;
    e.candidate = line.substr(a + 1, b - a - 1);
    const std::string ms = line.substr(b + 1);
    char *end = nullptr;
    e.ms = std::strtod(ms.c_str(), &end);
    // No number, or more after it (a cut or spliced line).
    if (end == ms.c_str() || !blank(ms, size_t(end - ms.c_str()))) {
      ++r.malformedLines;
      continue;
    }
    entries[line.substr(0, a)] = e;
  }
  return entries;
}

std::string formatCacheText(const CacheIdentity &id, const CacheEntries &entries) {
  std::string text = "# Castor tuning cache: the candidate (cuDNN engine or fused graph) chosen per layer signature.\n";
  text += kGpuPrefix + id.describe() + ".\n";
  text += "# <layer signature>\\t<candidate>\\t<median ms when timed>\n";
  for (const auto &[key, e] : entries) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.6g", e.ms);
    text += key + '\t' + e.candidate + '\t' + ms + '\n';
  }
  return text;
}

CacheFileRead readCacheFile(const std::string &path, const CacheIdentity &id) {
  CacheFileRead r;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return r;
  std::stringstream text;
  text << in.rdbuf();
  CacheTextReport report;
  CacheEntries entries = parseCacheText(text.str(), &report);
  if (report.identity && *report.identity != id) {
    r.warning = path + " was written for " + report.identity->describe() + ", not " + id.describe() +
                ": its entries are ignored, and the file is rewritten when a layer is next tuned";
    return r;
  }
  r.entries = std::move(entries);
  const int64_t n = report.malformedLines;
  if (n == 1)
    r.warning = "1 line of " + path + " is not a tuning entry; it is dropped when the cache is next written";
  else if (n > 1)
    r.warning = std::to_string(n) + " lines of " + path +
                " are not tuning entries; they are dropped when the cache is next written";
  return r;
}

bool mergeIntoCacheFile(const std::string &path, const CacheIdentity &id, const CacheEntries &ours,
                        std::string &error) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      error = "cannot create " + dir.string() + ": " + ec.message();
      return false;
    }
  }
  FileLock lock;
  if (!lock.acquire(path + ".lock", error))
    return false;
  // What other processes wrote since this one read the file; ours win on the same key.
  CacheEntries merged = readCacheFile(path, id).entries;
  for (const auto &[key, e] : ours)
    merged[key] = e;
  return replaceFile(path, formatCacheText(id, merged), error);
}

} // namespace castor::cuda::tuning
