// Compiled engines on disk (see tuning/compiled_plans.h).
#include "cuda/tuning/compiled_plans.h"

#include "castor/fnv1a.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <unistd.h>

namespace castor::cuda::tuning {

std::optional<CompiledPlanFile> compiledPlanFile(const std::string &cacheFile, const std::string &layerKey,
                                                 const std::string &candidate) {
  if (cacheFile.empty())
    return std::nullopt;
  const std::string stem = cacheFile.size() > 4 && cacheFile.compare(cacheFile.size() - 4, 4, ".txt") == 0
                               ? cacheFile.substr(0, cacheFile.size() - 4)
                               : cacheFile;
  const std::string dir = stem + ".plans"; // tuning-....txt -> tuning-....plans
  // Named by the key's hash; the key itself is the file's first line (a collision reads as a miss).
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.bin", static_cast<unsigned long long>(fnv1a64(layerKey + "\t" + candidate)));
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
