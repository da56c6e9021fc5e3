// The tuning cache on disk: which candidate the tuner (tuning/tuner.h) chose for a layer, per GPU
// and cuDNN version.
//
// One text file per (GPU name, SM count, cuDNN version from cudnnGetVersion()), in the directory
// $CASTOR_TUNING_CACHE (default $XDG_CACHE_HOME/castor, else ~/.cache/castor;
// CASTOR_TUNING_CACHE=off keeps the cache in memory only):
//   <dir>/tuning-<GPU name>-<SMs>sm-cudnn<version>.txt
// Lines: "<layer signature>\t<candidate name>\t<median ms>"; '#' starts a comment line.
//
// Keyed by layer signature, not by plan: the issue asked for (GPU, cuDNN version, plan hash), but
// a convolution's best engine depends on its signature (pass, dtype, layouts, dims, pads,
// strides, dilations, groups), not on the plan around it, so one entry serves every plan with
// that layer — ResNet-50 at another learning rate, another optimizer, or the same layer repeated
// within one plan — as TensorRT's timing cache does. The GPU and cuDNN version are in the file
// name, since engine names and timings mean nothing across them.
//
// Each record rewrites the whole file atomically (a temporary file of its own renamed over it),
// merged with what other processes wrote meanwhile under an advisory lock (flock on PATH.lock),
// so that runs sharing the cache keep each other's entries (cache_format.h). A file whose header
// names another GPU or cuDNN version is ignored, lines that are not entries are dropped, each
// with one warning naming the file, and the next write replaces them; a cache that cannot be
// read or written never fails a run (one warning on stderr per process).
#pragma once

#include "cuda/base/device_context.h"
#include "cuda/tuning/cache_format.h"

#include <optional>
#include <string>

namespace castor::cuda::tuning {

// The file of this GPU and cuDNN version, or "" when the disk cache is off.
std::string cachePath(const DeviceContext &ctx);

std::optional<CacheEntry> lookup(const DeviceContext &ctx, const std::string &layerKey);
// Records the entry in memory and rewrites the file.
void record(const DeviceContext &ctx, const std::string &layerKey, const CacheEntry &entry);

} // namespace castor::cuda::tuning
