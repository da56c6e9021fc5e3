// Kernels that Castor writes at load time (cuda/kernels/fused_elementwise_source.h), compiled by
// NVRTC into a CUBIN for the device's compute capability and loaded through the CUDA driver API.
//
// Compiling happens when a plan is loaded, never while a step is captured as a CUDA graph: the
// builder compiles and loads, and its RunFn only launches (cuLaunchKernel on the backend's
// stream, which a capture records like any launch).
//
// CUBINs are kept on disk beside the tuning cache (tuning/compiled_plans.h: the directory of the
// GPU's tuning file), keyed by the NVRTC version, the architecture and a hash of the source (the
// source itself is part of the key that the file's first line holds, so a hash collision reads
// as a miss); a second load of the same kernels compiles nothing. Within one process every source
// is compiled once.
//
// Neither NVRTC nor the driver library is linked: libnvrtc is opened when the first kernel is
// compiled, and the driver's entry points come from the CUDA runtime (cudaGetDriverEntryPoint-
// ByVersion), so that castor-run and the tests still start on a machine without a GPU driver;
// where NVRTC is missing, loading a plan with generated kernels fails naming the library.
#pragma once

#include "cuda/base/device_context.h"

#include <memory>
#include <string>

namespace castor::cuda {

struct LoadedKernel {
  std::shared_ptr<void> module; // the CUmodule, unloaded with its last kernel
  void *function = nullptr;     // the CUfunction
};

// The kernel `entry` of `source`, compiled (or read back from the cache) and loaded in the
// current context. Options: the architecture sm_XX of the current device, -default-device
// (the formulas' headers leave functions unannotated), C++17. On a compile error the message
// holds NVRTC's log.
Expected<LoadedKernel> loadGeneratedKernel(const DeviceContext &ctx, const std::string &source,
                                           const std::string &entry);

// cuLaunchKernel with `args` (one pointer per kernel parameter, to its value).
Status launchGenerated(const LoadedKernel &k, unsigned grid, unsigned block, cudaStream_t stream, void **args);

// Counts since the process started: sources compiled by NVRTC, CUBINs read from the disk cache,
// and sources found already compiled in this process.
struct GeneratedKernelCounts {
  int compiled = 0, fromDisk = 0, fromMemory = 0;
};
GeneratedKernelCounts generatedKernelCounts();

} // namespace castor::cuda
