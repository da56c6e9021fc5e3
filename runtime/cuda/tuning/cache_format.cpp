#include "cuda/tuning/cache_format.h"

#include <cstdlib>
#include <sstream>

namespace castor::cuda::tuning {

CacheEntries parseCacheText(const std::string &text) {
  CacheEntries entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (a == std::string::npos || b == std::string::npos || a == 0 || b == a + 1)
      continue;
    CacheEntry e;
    e.candidate = line.substr(a + 1, b - a - 1);
    const std::string ms = line.substr(b + 1);
    char *end = nullptr;
    e.ms = std::strtod(ms.c_str(), &end);
    if (end == ms.c_str())
      continue; // no number
    entries[line.substr(0, a)] = e;
  }
  return entries;
}

} // namespace castor::cuda::tuning
