// The CPU reference backend.
//
// Every kernel reads its floating-point operands into double precision, computes in double
// (so every sum accumulates in fp64), and rounds once when it stores each result in the output's
// dtype (round to nearest even for f32, f16 and bf16). Each output is computed by one loop in a
// fixed order: results are deterministic. Kernels spread independent outputs (channels, planes,
// blocks of output channels, element chunks) over CASTOR_CPU_THREADS threads (default: the
// hardware concurrency); no sum is ever split between threads, so the bits do not depend on the
// thread count. The heavy loops (convolutions, gemm, matmul) are register-tiled in
// tiled_kernels.h, summing each output's terms in the same order as the plain loops.
#include "castor/backend.h"
#include "core/poison_schedule.h"
#include "cpu/cpu_internal.h"
#include "cpu/rounding_noise.h"
#include "plan/plan_validator.h"
#include "plan/storage_order.h"

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace castor {
namespace cpu {
namespace {

class CpuBackend final : public Backend, public Memory {
public:
  explicit CpuBackend(const BackendOptions &options)
      : poison_(options.poison || poisonRequestedByEnvironment()), noiseSeed_(options.roundingNoiseSeed),
        plant_(options), replicas_(options.replicas) {}

  std::string name() const override { return "cpu"; }

  // Every kernel, fused ones included, runs its reference definition.
  std::vector<KernelChoice> kernelChoices() const override {
    return std::vector<KernelChoice>(kernels_.size(), KernelChoice{"reference", ""});
  }

  Status load(const plan::Plan &p) override {
    plan_ = p;
    CASTOR_RETURN_IF_ERROR(plant_.bind(plan_));
    tensors_.clear();
    kernels_.clear();
    poisonAfter_.clear();
    for (const Tensor &t : plan_.tensors()) {
      if (std::string error = plan::slotError(t, plan_.arena_bytes()); !error.empty())
        return Status::error(error);
      tensors_[t.id()] = &t;
    }
    // A size the machine cannot hold is refused before anything is allocated (a hostile or
    // corrupt plan may claim terabytes; the zero-fill would touch every page of it).
    const uint64_t physical = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE));
    if (plan_.arena_bytes() > physical)
      return Status::error("the plan needs an arena of " + std::to_string(plan_.arena_bytes()) +
                           " bytes, more than this machine's " + std::to_string(physical) + " bytes of memory");
    try {
      arena_.assign(plan_.arena_bytes(), 0);
    } catch (const std::exception &) {
      return Status::error("cannot allocate an arena of " + std::to_string(plan_.arena_bytes()) + " bytes");
    }
    channelsLast = plan::channelsLastForViews(plan_);
    std::unordered_set<int> transposedViews;
    for (const plan::TransposedView &v : plan::transposedViews(plan_))
      transposedViews.insert(v.kernel);
    for (int i = 0; i < plan_.kernels_size(); ++i) {
      const Kernel &k = plan_.kernels(i);
      auto where = plan::describeKernel(plan_, i);
      if (transposedViews.count(i)) { // its result already is its operand's bytes
        kernels_.push_back(RunFn([]() { return Status::ok(); }));
        continue;
      }
      KernelContext ctx{*this, k, {}, {}, replicas_};
      for (uint32_t id : k.inputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        ctx.in.push_back(it->second);
      }
      for (uint32_t id : k.outputs()) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error(where + ": unknown tensor id " + std::to_string(id));
        ctx.out.push_back(it->second);
      }
      const auto op = plan::opFromName(k.op());
      const Builder *build = op ? cpuKernels().find(*op) : nullptr;
      if (!build)
        return Status::error(where + ": the cpu backend has no kernel '" + k.op() + "'");
      auto fn = (*build)(ctx);
      if (!fn)
        return fn.status().withContext(where);
      kernels_.push_back(stageChannelsLast(*this, ctx, std::move(*fn)));
    }
    if (poison_)
      poisonAfter_ = poisonSchedule(plan_);
    return Status::ok();
  }

  Status upload(uint32_t id, const void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    // An input is kept aside and copied into its slot when a step starts (the step reuses the
    // slot once the input is read, and the next step's input may arrive before this step's
    // outputs are read: its slot may hold one of them).
    if ((*t)->kind() == Tensor::INPUT)
      inputs_[id].assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + bytes);
    else if (channelsLast.count(id))
      plan::toChannelsLast(**t, static_cast<const uint8_t *>(data), arena_.data() + (*t)->offset());
    else
      std::memcpy(arena_.data() + (*t)->offset(), data, bytes);
    return Status::ok();
  }

  Status download(uint32_t id, void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    auto input = inputs_.find(id);
    if (channelsLast.count(id) && input == inputs_.end()) {
      plan::fromChannelsLast(**t, arena_.data() + (*t)->offset(), static_cast<uint8_t *>(data));
      return Status::ok();
    }
    std::memcpy(data, input != inputs_.end() ? input->second.data() : arena_.data() + (*t)->offset(), bytes);
    return Status::ok();
  }

  Status run() override {
    CASTOR_RETURN_IF_ERROR(execute(steps_, nullptr));
    ++steps_;
    return Status::ok();
  }

  // In place: the state lives in the arena (no copy of it).
  Expected<NonFiniteTensor> firstNonFinite(const std::vector<const Tensor *> &tensors) override {
    for (size_t i = 0; i < tensors.size(); ++i) {
      auto t = find(tensors[i]->id(), tensors[i]->bytes());
      if (!t)
        return t.status();
      if (int64_t n = countNonFinite((*t)->dtype(), arena_.data() + (*t)->offset(), (*t)->bytes()); n > 0)
        return NonFiniteTensor{int(i), n};
    }
    return NonFiniteTensor{};
  }

  Expected<NonFiniteFound> replayToFirstNonFinite() override {
    if (steps_ == 0)
      return Status::error("no step to replay: the plan has not run");
    NonFiniteFound found;
    CASTOR_RETURN_IF_ERROR(execute(steps_ - 1, &found));
    return found;
  }

private:
  // The kernels of run `runIndex` (0-based). With `found`, a replay: no poisoning, and it stops
  // after the first kernel that leaves a non-finite value in a floating-point output.
  Status execute(uint64_t runIndex, NonFiniteFound *found) {
    for (const auto &[id, bytes] : inputs_)
      std::memcpy(arena_.data() + tensors_.at(id)->offset(), bytes.data(), bytes.size());
    for (size_t i = 0; i < kernels_.size(); ++i) {
      Status s;
      try {
        s = kernels_[i]();
      } catch (const std::exception &e) {
        s = Status::error(e.what());
      }
      if (!s)
        return s.withContext(plan::describeKernel(plan_, int(i)));
      if (noiseSeed_ != 0)
        for (uint32_t id : plan_.kernels(int(i)).outputs())
          addRoundingNoise(*tensors_.at(id), arena_.data() + tensors_.at(id)->offset(), noiseSeed_,
                           (runIndex << 32) ^ i);
      if (const Tensor *t = plant_.after(int(i), int64_t(runIndex) + 1))
        std::memcpy(arena_.data() + t->offset(), plant_.bytes().data(), plant_.bytes().size());
      if (found) {
        for (uint32_t id : plan_.kernels(int(i)).outputs()) {
          const Tensor &t = *tensors_.at(id);
          if (int64_t n = countNonFinite(t.dtype(), arena_.data() + t.offset(), t.bytes()); n > 0) {
            *found = {int(i), id, n};
            return Status::ok();
          }
        }
      } else if (poison_) {
        for (const Tensor *t : poisonAfter_[i])
          std::memset(arena_.data() + t->offset(), 0xFF, t->bytes());
      }
    }
    return Status::ok();
  }

  Expected<const Tensor *> find(uint32_t id, size_t bytes) {
    auto it = tensors_.find(id);
    if (it == tensors_.end())
      return Status::error("no tensor with id " + std::to_string(id));
    if (it->second->bytes() != bytes)
      return Status::error("tensor " + std::to_string(id) + " '" + it->second->name() + "' holds " +
                           std::to_string(it->second->bytes()) + " bytes, got " + std::to_string(bytes));
    return it->second;
  }

  bool poison_;
  uint64_t noiseSeed_ = 0, steps_ = 0;
  NonFinitePlant plant_;
  dist::Communicator *replicas_ = nullptr;
  plan::Plan plan_;
  std::unordered_map<uint32_t, const Tensor *> tensors_;
  std::map<uint32_t, std::vector<uint8_t>> inputs_; // the last upload of each INPUT tensor
  std::vector<RunFn> kernels_;
  std::vector<std::vector<const Tensor *>> poisonAfter_;
};

} // namespace

// One table per op family (the files of cpu/); an op has one entry in one of them.
const KernelTable &cpuKernels() {
  static const KernelTable table = KernelTable(elementwiseKernels())
                                       .merge(reduceKernels())
                                       .merge(poolingKernels())
                                       .merge(lossKernels())
                                       .merge(optimizerKernels())
                                       .merge(batchNormKernels())
                                       .merge(convolutionKernels())
                                       .merge(matmulKernels())
                                       .merge(layoutKernels())
                                       .merge(layerNormKernels())
                                       .merge(attentionKernels())
                                       .merge(fusedKernels())
                                       .merge(fusedElementwiseKernels())
                                       .merge(replicaKernels());
  return table;
}

} // namespace cpu

std::vector<plan::OpId> cpuBackendOps() { return cpu::cpuKernels().implemented(); }

std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options) {
  return std::make_unique<cpu::CpuBackend>(options);
}

} // namespace castor
