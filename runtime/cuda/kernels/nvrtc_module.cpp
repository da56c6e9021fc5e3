// NVRTC compilation, the CUBIN cache and the driver API calls of generated kernels (nvrtc_module.h).
#include "cuda/kernels/nvrtc_module.h"

#include "castor/fnv1a.h"
#include "cuda/tuning/compiled_plans.h"
#include "cuda/tuning/tuning_cache.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <fmt/core.h>

#include <map>
#include <mutex>
#include <vector>

namespace castor::cuda {
namespace {

// NVRTC's functions, from the library opened at the first use.
struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) logSize = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubinSize = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) errorString = nullptr;
  decltype(&nvrtcVersion) version = nullptr;
  std::string error; // why it is unavailable
  int major = 0, minor = 0;
};

const Nvrtc &nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc r;
    void *lib = nullptr;
    for (const char *name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      r.error = "NVRTC (libnvrtc.so.13) is not on the library path; generated kernels need it";
      return r;
    }
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (!fn && r.error.empty())
        r.error = std::string("NVRTC lacks ") + name;
    };
    sym(r.create, "nvrtcCreateProgram");
    sym(r.compile, "nvrtcCompileProgram");
    sym(r.logSize, "nvrtcGetProgramLogSize");
    sym(r.log, "nvrtcGetProgramLog");
    sym(r.cubinSize, "nvrtcGetCUBINSize");
    sym(r.cubin, "nvrtcGetCUBIN");
    sym(r.destroy, "nvrtcDestroyProgram");
    sym(r.errorString, "nvrtcGetErrorString");
    sym(r.version, "nvrtcVersion");
    if (r.error.empty())
      r.version(&r.major, &r.minor);
    return r;
  }();
  return n;
}

// The driver API's functions, through the CUDA runtime (no link to libcuda).
struct Driver {
  decltype(&cuModuleLoadData) load = nullptr;
  decltype(&cuModuleGetFunction) getFunction = nullptr;
  decltype(&cuModuleUnload) unload = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuGetErrorString) errorString = nullptr;
  std::string error;
};

const Driver &driver() {
  static const Driver d = [] {
    Driver r;
    auto sym = [&](auto &fn, const char *name) {
      void *p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
          found != cudaDriverEntryPointSuccess || !p) {
        if (r.error.empty())
          r.error = std::string("the CUDA driver lacks ") + name;
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    sym(r.load, "cuModuleLoadData");
    sym(r.getFunction, "cuModuleGetFunction");
    sym(r.unload, "cuModuleUnload");
    sym(r.launch, "cuLaunchKernel");
    sym(r.errorString, "cuGetErrorString");
    return r;
  }();
  return d;
}

Status driverStatus(CUresult r, const std::string &what) {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  const char *text = nullptr;
  if (driver().errorString)
    driver().errorString(r, &text);
  return Status::error(fmt::format("{}: CUDA driver error {} ({})", what, int(r), text ? text : "unknown"));
}

std::mutex gMutex;
GeneratedKernelCounts gCounts;
std::map<std::string, std::vector<uint8_t>> gCubins;           // by key, this process's
std::map<std::string, std::weak_ptr<void>> gModules;            // by key, while a kernel holds one

Expected<std::vector<uint8_t>> compile(const std::string &source, int arch) {
  const Nvrtc &n = nvrtc();
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = n.create(&program, source.c_str(), "castor_fused_elementwise.cu", 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return Status::error(std::string("nvrtcCreateProgram: ") + n.errorString(r));
  const std::string archOption = fmt::format("--gpu-architecture=sm_{}", arch);
  const char *options[] = {archOption.c_str(), "-default-device", "--std=c++17"};
  const nvrtcResult compiled = n.compile(program, 3, options);
  size_t logSize = 0;
  n.logSize(program, &logSize);
  std::string log(logSize, '\0');
  if (logSize > 1)
    n.log(program, log.data());
  std::vector<uint8_t> cubin;
  if (compiled == NVRTC_SUCCESS) {
    size_t size = 0;
    n.cubinSize(program, &size);
    cubin.resize(size);
    n.cubin(program, reinterpret_cast<char *>(cubin.data()));
  }
  n.destroy(&program);
  if (compiled != NVRTC_SUCCESS)
    return Status::error(fmt::format("NVRTC could not compile a generated kernel for sm_{} ({}):\n{}\nits source:\n{}",
                                     arch, n.errorString(compiled), log, source));
  return cubin;
}

} // namespace

Expected<LoadedKernel> loadGeneratedKernel(const DeviceContext &ctx, const std::string &source,
                                           const std::string &entry) {
  const Nvrtc &n = nvrtc();
  if (!n.error.empty())
    return Status::error(n.error);
  const Driver &d = driver();
  if (!d.error.empty())
    return Status::error(d.error);
  int device = 0, major = 0, minor = 0;
  CASTOR_CUDA(cudaGetDevice(&device));
  CASTOR_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CASTOR_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const int arch = major * 10 + minor;
  // One line: the file's header (compiled_plans.h); the hash and length stand for the source.
  const std::string key = fmt::format("nvrtc {}.{} sm_{} source {:016x} {}", n.major, n.minor, arch,
                                      fnv1a64(source), source.size());
  std::lock_guard<std::mutex> lock(gMutex);
  std::shared_ptr<void> module = gModules[key].lock();
  if (!module) {
    std::vector<uint8_t> cubin;
    if (auto it = gCubins.find(key); it != gCubins.end()) {
      cubin = it->second;
      ++gCounts.fromMemory;
    } else {
      const auto file = tuning::compiledPlanFile(tuning::cachePath(ctx), key, "cubin");
      if (auto stored = file ? tuning::loadCompiledPlan(*file) : std::nullopt) {
        cubin = std::move(*stored);
        ++gCounts.fromDisk;
      } else {
        auto built = compile(source, arch);
        if (!built)
          return built.status();
        cubin = std::move(*built);
        ++gCounts.compiled;
        if (file)
          tuning::storeCompiledPlan(*file, cubin);
      }
      gCubins[key] = cubin;
    }
    CUmodule m = nullptr;
    if (Status s = driverStatus(d.load(&m, cubin.data()), "loading a generated kernel (cuModuleLoadData)"); !s) {
      // A damaged cache file: compile afresh once.
      auto built = compile(source, arch);
      if (!built)
        return built.status();
      ++gCounts.compiled;
      gCubins[key] = *built;
      if (auto file = tuning::compiledPlanFile(tuning::cachePath(ctx), key, "cubin"))
        tuning::storeCompiledPlan(*file, *built);
      CASTOR_RETURN_IF_ERROR(driverStatus(d.load(&m, built->data()), "loading a generated kernel (cuModuleLoadData)"));
    }
    module = std::shared_ptr<void>(m, [](void *p) { driver().unload(static_cast<CUmodule>(p)); });
    gModules[key] = module;
  } else {
    ++gCounts.fromMemory;
  }
  CUfunction f = nullptr;
  CASTOR_RETURN_IF_ERROR(driverStatus(d.getFunction(&f, static_cast<CUmodule>(module.get()), entry.c_str()),
                                      "finding " + entry + " in its generated module"));
  return LoadedKernel{module, f};
}

Status launchGenerated(const LoadedKernel &k, unsigned grid, unsigned block, cudaStream_t stream, void **args) {
  return driverStatus(driver().launch(static_cast<CUfunction>(k.function), grid, 1, 1, block, 1, 1, 0,
                                      reinterpret_cast<CUstream>(stream), args, nullptr),
                      "launching a generated fused_elementwise kernel");
}

GeneratedKernelCounts generatedKernelCounts() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gCounts;
}

} // namespace castor::cuda
