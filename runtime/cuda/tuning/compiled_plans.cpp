// Compiled engines on disk (see tuning/compiled_plans.h).
#include "cuda/tuning/compiled_plans.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <unistd.h>

namespace castor::cuda::tuning {
namespace {

// FNV-1a, 64 bits: a file name for a key of any length (collisions are caught by the key kept in
// the file's first line).
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

} // namespace

std::optional<CompiledPlanFile> compiledPlanFile(const std::string &cacheFile, const std::string &layerKey,
                                                 const std::string &candidate) {
  if (cacheFile.empty())
    return std::nullopt;
  const std::string stem = cacheFile.size() > 4 && cacheFile.compare(cacheFile.size() - 4, 4, ".txt") == 0
                               ? cacheFile.substr(0, cacheFile.size() - 4)
                               : cacheFile;
  const std::string dir = stem + ".plans"; // tuning-....txt -> tuning-....plans
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.bin", static_cast<unsigned long long>(fnv1a(layerKey + "\t" + candidate)));
  return CompiledPlanFile{dir + "/" + name, layerKey + "\t" + candidate};
}

std::optional<std::vector<uint8_t>> loadCompiledPlan(const CompiledPlanFile &file) {
  const std::string &path = file.path, &key = file.key;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::string header;
  if (!std::getline(in, header) || header != key)
    return std::nullopt; // another key with the same hash, or a damaged file
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty())
    return std::nullopt;
  return bytes;
}

void storeCompiledPlan(const CompiledPlanFile &file, const std::vector<uint8_t> &bytes) {
  const std::string &path = file.path, &key = file.key;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << key << '\n';
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    std::filesystem::remove(tmp, ec);
}

} // namespace castor::cuda::tuning
