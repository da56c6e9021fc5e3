// The interface every execution backend implements (the cpu reference and cuda).
//
// A backend owns one arena of plan.arena_bytes() bytes in which every tensor of the plan has its
// slot (Tensor.offset, Tensor.bytes). Typical use:
//
//   auto backend = castor::createCpuBackend();
//   CASTOR_RETURN_IF_ERROR(castor::plan::validatePlan(plan));   // the backend trusts the plan
//   CASTOR_RETURN_IF_ERROR(backend->load(plan));                // arena + kernel preparation
//   CASTOR_RETURN_IF_ERROR(backend->upload(inputId, data, bytes));
//   CASTOR_RETURN_IF_ERROR(backend->run());
//   CASTOR_RETURN_IF_ERROR(backend->download(outputId, out, bytes));
//
// No method throws. Data crosses the interface in the tensor's own dtype and byte size.
#pragma once

#include "castor/encoded_images.h"
#include "castor/pixel_input.h"
#include "castor/status.h"
#include "plan/op_registry.h"
#include "plan/plan.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace castor {
namespace dist {
class Communicator;
class NcclCommunicator;
}

// A fault planted by tests (CASTOR_PLANT_NONFINITE="K@R" or "K@R:inf"): in the R-th run()
// (1-based; a replay counts as the run it replays; "K@*": every run), right after kernel K, the
// first element of K's first floating-point output becomes NaN (or +inf).
struct PlantedNonFinite {
  int kernel = -1;
  int64_t run = 0; // 0: every run
  bool inf = false;
};

// What a replay found: the first kernel that left a non-finite value in a floating-point output
// (kernel -1 when every output stayed finite), that output and how many of its values are.
struct NonFiniteFound {
  int kernel = -1;
  uint32_t tensor = 0;
  int64_t count = 0;
};

// What a state check found: the first of the tensors asked about that holds a non-finite value
// (its index in the list, -1 when every value is finite) and how many of its values are.
struct NonFiniteTensor {
  int index = -1;
  int64_t count = 0;
};

struct BackendOptions {
  // Fill each activation's and input's slot with NaN (all-ones bytes) right after its last use,
  // so that a plan whose live tensors alias produces NaN instead of silently wrong numbers.
  // Also switched on by the environment variable CASTOR_POISON=1.
  bool poison = false;
  // Bit-identical results run after run on the same GPU (same cuDNN, plan, seed, data and tuning
  // cache file): the cuda backend keeps to deterministic cuDNN engines and algorithms and to
  // reductions summed in a fixed order, and tunes under cache keys of their own. Also switched
  // on by the environment variable CASTOR_DETERMINISTIC=1. The CPU backend is always
  // deterministic.
  bool deterministic = false;
  // The CPU backend only: when nonzero, the values each kernel writes to float tensors move as an
  // implementation that rounds differently would have stored them, drawn from this seed, the
  // kernel's index and the step (cpu/rounding_noise.h). The reference's own sensitivity to
  // rounding, the yardstick of agreement tests.
  uint64_t roundingNoiseSeed = 0;
  // Test fault injection; CASTOR_PLANT_NONFINITE sets it too (plantRequestedByEnvironment).
  std::optional<PlantedNonFinite> plantNonFinite;
  // The replicas of a data-parallel run, which the plan's all_reduce kernels reduce across
  // (runtime/dist/communicator.h; not owned, it outlives the backend). Null: this process is
  // the only replica, and all_reduce changes nothing. The CPU backend only so far.
  dist::Communicator *replicas = nullptr;
  // The CUDA backend's counterpart: the replicas' GPUs, reduced across by NCCL
  // (runtime/dist/nccl_communicator.h; not owned). Null: one replica.
  dist::NcclCommunicator *deviceReplicas = nullptr;
};

// How a backend runs one kernel of the loaded plan (castor-run bench's per-layer report). The
// strings are the backend's own and opaque to the caller; "" when it has nothing to say.
struct KernelChoice {
  // The way it runs the kernel where it has more than one: for the fused ops (plan/ops.md, "Fused
  // kernels") the cuda backend's "fused", "fused+add" (cuDNN's fused kernel, with the residual)
  // or "composed" (the group's kernels one after another), and for a data gradient with an
  // accumulated gradient "fused" (the add in the convolution's epilogue) or "composed"; the cpu
  // backend says "reference".
  std::string way;
  // The candidate a per-layer tuner chose for the kernel (the cuda backend's "ex",
  // "graph:<engine>", "cudnn:<engine>"); several, joined by ", ", when the kernel was built of
  // more than one tuned layer.
  std::string tuned;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Allocates the arena (zero-filled) and prepares every kernel of `plan`, refusing kernels the
  // backend does not implement. The plan should have passed validatePlan; load itself only
  // re-checks what would make it touch memory outside the arena. The plan is copied.
  virtual Status load(const plan::Plan &plan) = 0;

  // Copies a tensor's bytes in or out of its arena slot; `bytes` must equal Tensor.bytes. An
  // INPUT tensor keeps its uploaded value for every later run() until the next upload (a step
  // reuses its arena slot once it is read, so the backend keeps a copy).
  virtual Status upload(uint32_t tensorId, const void *data, size_t bytes) = 0;
  virtual Status download(uint32_t tensorId, void *data, size_t bytes) = 0;

  // 8-bit images into image input `t` (castor/pixel_input.h): pixels[N][H][W][C], converted by
  // `transform` to the tensor's dtype and layout. The default converts on the host and uploads;
  // a device backend uploads the bytes and converts where the step runs.
  virtual Status uploadPixels(const plan::Tensor &t, const uint8_t *pixels, const PixelTransform &transform);
  // The synthetic pixels of (seed, step) into image input `t`, converted as uploadPixels does.
  // The default makes them on the host; a device backend makes them where the step runs.
  virtual Status generatePixels(const plan::Tensor &t, uint64_t seed, int64_t step, const PixelTransform &transform);

  // Image files into image input `t` [N, C, H, W]: each decoded and resized by its plan
  // (castor/encoded_images.h) into 8-bit pixels, then converted as uploadPixels does, where the
  // step runs (the batch is the backend's: a caller moves it in). For a backend with a device
  // image decoder (decodesImages()); the default refuses. decodesImagesInHardware(): its decoder
  // is a hardware engine, faster than the host's threads (what --decoder auto picks).
  virtual bool decodesImages() const { return false; }
  virtual bool decodesImagesInHardware() const { return false; }
  virtual Status uploadEncodedImages(const plan::Tensor &t, EncodedImageBatch batch, const PixelTransform &transform) {
    return Status::error("the " + name() + " backend does not decode images (decode them on the host)");
  }

  // Runs the plan's kernel list once, in order. A device backend may return once the step is
  // enqueued: download() waits for it, and an error inside the step surfaces there.
  virtual Status run() = 0;

  // Measurement (castor-run bench). Device memory the backend allocated itself (arena,
  // workspaces, buffers), without the driver's context.
  virtual uint64_t allocatedBytes() const { return 0; }
  // allocatedBytes() by purpose ("arena", "inputs", "staging", "workspace", "persistent", ...).
  virtual std::vector<std::pair<std::string, uint64_t>> allocatedBytesByPurpose() const { return {}; }
  // run(), returning its duration in milliseconds (the cuda backend times it with events).
  virtual Expected<double> timedRun();
  // What one step puts on the device, once a step has been captured (the cuda backend's CUDA
  // graph): its kernel launches, memsets and copies; nullopt where nothing was captured.
  struct StepLaunches {
    uint64_t kernels = 0, memsets = 0, copies = 0, other = 0;
  };
  virtual std::optional<StepLaunches> launchesPerStep() const { return std::nullopt; }
  // Runs the plan once kernel by kernel, timing every kernel; milliseconds per category of
  // kernel ("conv", "batch_norm", ...), per op ("op:max_pool2d_backward", ...) and per kernel of
  // the plan ("kernel:12").
  virtual Expected<std::vector<std::pair<std::string, double>>> profileRun() {
    return Status::error("the " + name() + " backend cannot time kernels");
  }
  // How each kernel of the loaded plan runs: one entry per kernel, in plan order, or none when
  // the backend reports nothing (the default) or has no plan loaded.
  virtual std::vector<KernelChoice> kernelChoices() const { return {}; }

  // Diagnosis of a step that produced non-finite values: runs the last run() again, kernel by
  // kernel on the current inputs (upload the step's inputs again first; its planted fault
  // recurs), and stops after the first kernel that leaves a non-finite value in one of its
  // floating-point outputs. The state changes as a run up to that kernel would change it.
  virtual Expected<NonFiniteFound> replayToFirstNonFinite() {
    return Status::error("the " + name() + " backend cannot replay a step");
  }

  // The state check (train/state_check.h): whether `tensors` (of the loaded plan, by id: the
  // training state, i.e. parameters, optimizer moments, running statistics, counters) hold only
  // finite values after every step run so far. Integer tensors count as finite. A device backend
  // counts on the device in one launch over all of them and copies back a count per tensor, not
  // the tensors. The default downloads each tensor and counts on the host.
  virtual Expected<NonFiniteTensor> firstNonFinite(const std::vector<const plan::Tensor *> &tensors);
};

// The CPU reference backend: plain loops, fp64 accumulation, exact fp16/bf16 rounding,
// deterministic.
std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options = {});
// The ops the CPU backend has a kernel for (all of plan/ops.def; a runtime test checks it).
std::vector<plan::OpId> cpuBackendOps();

// Whether CASTOR_POISON is set to a value other than "" or "0".
bool poisonRequestedByEnvironment();
// The fault a backend plants (tests), shared by the backends: `options.plantNonFinite`, else
// CASTOR_PLANT_NONFINITE parsed, bound on load to its kernel's first floating-point output.
class NonFinitePlant {
public:
  explicit NonFinitePlant(const BackendOptions &options);
  // Whether a fault is asked for (a backend may run differently then, e.g. without a CUDA graph).
  bool requested() const { return plant_.has_value(); }
  // Binds the fault to `plan` (which must outlive it); an error names a malformed setting, or a
  // kernel that does not exist or has no floating-point output.
  Status bind(const plan::Plan &plan);
  // The tensor whose first element becomes the fault right after kernel `kernel` of run `run`
  // (1-based), else null; `bytes()` is that element, NaN or +inf in the tensor's dtype.
  const plan::Tensor *after(int kernel, int64_t run) const;
  const std::vector<uint8_t> &bytes() const { return bytes_; }

private:
  std::optional<PlantedNonFinite> plant_;
  Status error_;
  const plan::Tensor *tensor_ = nullptr;
  std::vector<uint8_t> bytes_;
};
// How many values of `bytes` (elements of `dtype`, any layout) are inf or NaN; 0 for integers.
int64_t countNonFinite(plan::DType dtype, const uint8_t *bytes, size_t size);

} // namespace castor
