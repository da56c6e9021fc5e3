// Compiled engines kept on disk beside the tuning cache (tuning/tuning_cache.h).
//
// cuDNN's runtime-fusion engines (a convolution with an add in its epilogue, say) compile their
// kernels when built: seconds per layer signature. The tuning cache remembers which engine won,
// but building it again on the next load would compile again. cudnn-frontend serializes such a
// built plan, compiled kernels included; the bytes are kept here, one file per (layer signature,
// candidate), in <cache dir>/tuning-<GPU>-<SMs>sm-cudnn<version>.plans/, so that a later load
// deserializes the plan instead of compiling it. Files are written atomically (a temporary
// file renamed over the target); a file that cannot be read, written or deserialized only costs
// the compilation, never the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::cuda::tuning {

// One compiled plan's file: its path (named by a hash of the key) and the key itself, kept in
// the file's first line so that a hash collision or a damaged file reads as a miss.
struct CompiledPlanFile {
  std::string path;
  std::string key;
};

// The file of (layer key, candidate) beside the tuning cache file `cacheFile`
// (tuning_cache.h's cachePath: one per GPU and cuDNN version); none when that is "" (the disk
// cache is off). Host code only, like cache_format.h, so that CI tests it without a GPU.
std::optional<CompiledPlanFile> compiledPlanFile(const std::string &cacheFile, const std::string &layerKey,
                                                 const std::string &candidate);

std::optional<std::vector<uint8_t>> loadCompiledPlan(const CompiledPlanFile &file);
void storeCompiledPlan(const CompiledPlanFile &file, const std::vector<uint8_t> &bytes);

} // namespace castor::cuda::tuning
