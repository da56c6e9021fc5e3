// What every kernel builder of the CUDA backend sees: the stream, the library handles, the arena
// and the physical layout of each tensor. The backend (executor/cuda_backend.cpp) owns one DeviceContext
// for the lifetime of a loaded plan; builders turn one plan kernel into a RunFn that enqueues its
// work on `stream` and never synchronises (so that the whole step can be captured as a CUDA
// graph).
#pragma once

#include "castor/status.h"
#include "cuda/base/cuda_status.h"
#include "cuda/base/device_ref.h"
#include "plan/op_registry.h"
#include "plan/plan.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <unordered_set>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace castor::dist {
class NcclCommunicator;
}

namespace castor::cuda {

using RunFn = std::function<Status()>;
using Shape = std::vector<int64_t>;
using TensorList = std::vector<const plan::Tensor *>;

// Where the bytes of a tensor lie in the arena. The plan's tensors are row-major; when
// channelsLastEnabled (plans that convolve fp16/bf16 data, see executor/cuda_backend.cpp) the backend
// stores every rank-4 floating-point tensor not in `rowMajor` (plan/storage_order.h)
// channels-last (logical [N,C,H,W], physical [N,H,W,C]; a conv weight [K,C,R,S] becomes
// [K,R,S,C]), the layout cuDNN's tensor-core kernels want. upload/download convert, so the host
// always sees the plan's row-major layout.
enum class Layout { RowMajor, ChannelsLast };

struct DeviceContext {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublasLt = nullptr; // gemm and matmul (cublaslt/matmul.cpp)
  uint8_t *arena = nullptr;
  std::string deviceName;
  int smCount = 0;
  bool channelsLastEnabled = true;
  // Rank-4 tensors kept row-major in a channels-last plan (plan/storage_order.h).
  std::unordered_set<uint32_t> rowMajor;
  // BackendOptions::deterministic: builders keep to deterministic engines, algorithms and
  // reductions, and the tuner keys its choices apart (tuning/tuner.cpp).
  bool deterministic = false;
  // BackendOptions::deviceReplicas: the all_reduce kernels' NCCL communicator (null: one replica).
  dist::NcclCommunicator *replicas = nullptr;
  // Work a kernel left running on another stream (an all_reduce on the communication stream,
  // overlapping the rest of the backward): the event that marks its end, by the tensors it
  // writes. The backend makes the first later kernel that reads one of them wait for it
  // (joinPendingWork in executor/cuda_backend.cpp).
  std::unordered_map<uint32_t, cudaEvent_t> pendingWrites;
  // The stream the all_reduce kernels run on beside `stream` (made by the first; the backend
  // destroys it).
  cudaStream_t commStream = nullptr;

  // One workspace shared by every library call of the step: builders ask for what they need
  // (requestWorkspace) and read `workspace` when they run; the backend allocates it after every
  // kernel is built.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  size_t workspaceLimit = 0;
  void requestWorkspace(size_t bytes) { workspaceBytes = bytes > workspaceBytes ? bytes : workspaceBytes; }

  // Device memory outside the arena that lives as long as the plan (e.g. cuDNN's batch-norm
  // reserve space, which the forward kernel fills and the backward kernel reads), keyed by the
  // id of a tensor both kernels share; freed by the backend. Counted in peak memory.
  std::unordered_map<uint32_t, std::pair<void *, size_t>> persistent;
  size_t persistentBytes = 0;
  // The plan's workspace limit (0: none): the shared workspace and the persistent buffers
  // together stay within it, workspaceLimit being what persistent buffers leave of it.
  size_t besideArenaBudget = 0;
  // The part of that budget kept for persistent buffers (the plan's reserve_bytes): library
  // workspaces are held to the rest, so that a layer built early cannot take the room of the
  // reserve spaces of the layers after it.
  size_t persistentShare = 0;
  // Of that share, what large buffers (cuDNN's reserve spaces) leave for the own kernels' small
  // per-layer scratch: the 1 MiB the compiler adds to the reserve (StepLiveness.h).
  static constexpr size_t kSmallBufferShare = size_t(1) << 20;
  Expected<void *> persistentBuffer(uint32_t key, size_t bytes);
  // workspaceLimit from the budget, its persistent share and the persistent buffers so far.
  void updateWorkspaceLimit();
  // Frees the buffer of `key`, if any (a tuning candidate that lost).
  void releasePersistentBuffer(uint32_t key);

  // The plan being built and its tensors by id, for a builder that looks at another kernel (the
  // fused batch norm times its forward together with its backward).
  const plan::Plan *plan = nullptr;
  const std::unordered_map<uint32_t, const plan::Tensor *> *tensorsById = nullptr;

  // What a forward kernel's builder chose that the builder of its backward must follow, keyed by
  // the id of a tensor both share (the fused batch-norm-ReLU records its way, "fused", "fused+add"
  // or "composed", under its saved mean: cudnn/batch_norm_relu.cpp), and the ways the backend
  // reports (an accumulating data gradient's under its output: cudnn/convolution.cpp). Kernels
  // are built in plan order, forward first.
  std::unordered_map<uint32_t, std::string> layerChoices;

  // A forward convolution whose output a fused batch-norm-ReLU normalises can also compute that
  // output's per-channel sum and sum of squares in its epilogue (cudnn/convolution_stats.cpp). Its
  // builder leaves both ways here, under the output's id, and runs the plain one unless
  // `useStats` is set; the batch norm's builder, built later in plan order, times the pair each
  // way with its own ways (cudnn/batch_norm_relu.cpp) and sets it when the statistics from the
  // convolution win. The sums ([2][C] floats: sum, then sum of squares) live for the plan.
  struct ConvStatsOffer {
    std::function<Status(void *)> plain, withStats; // each run with a workspace
    size_t plainWorkspace = 0, statsWorkspace = 0;
    float *sums = nullptr;
    std::string signature; // the convolution's, for the pair's tuning key
    std::shared_ptr<bool> useStats;
  };
  std::unordered_map<uint32_t, ConvStatsOffer> convStatsOffers;

  // What the per-layer tuner chose for each kernel, for the backend's report (kernelChoices):
  // the backend sets buildingKernel to the plan index of the kernel it is building (-1
  // otherwise) and tuning::choose notes each choice under it; a kernel built of several tuned
  // layers (a composed fused kernel's batch norm beside its own) gets them joined by ", ".
  int buildingKernel = -1;
  std::unordered_map<int, std::string> tunedChoices;
  // Kernels an earlier kernel's RunFn already runs (consecutive optimizer updates batched into
  // one multi-tensor launch by the first of them): their own builders return a RunFn that does
  // nothing.
  std::unordered_set<int> coveredKernels;
  void noteTunedChoice(const std::string &candidate) {
    if (buildingKernel < 0)
      return;
    std::string &note = tunedChoices[buildingKernel];
    note += (note.empty() ? "" : ", ") + candidate;
  }

  // 64 doubles of device scratch for small reductions (gradient clipping, statistics).
  double *scratch = nullptr;

  // Tensors a builder made that live in the shared workspace, not the arena (a fused kernel's
  // scratch), at a byte offset in it. Until the workspace is allocated (while kernels are built and
  // tuned) such a tensor reads its own arena offset: that of the plan tensor it was copied from.
  std::unordered_map<const plan::Tensor *, size_t> workspaceTensors;

  uint8_t *ptr(const plan::Tensor *t) const {
    if (workspace && !workspaceTensors.empty()) {
      auto it = workspaceTensors.find(t);
      if (it != workspaceTensors.end())
        return static_cast<uint8_t *>(workspace) + it->second;
    }
    return arena + t->offset();
  }
  Ref ref(const plan::Tensor *t) const { return Ref{ptr(t), int(t->dtype())}; }
  int64_t *ints(const plan::Tensor *t) const { return reinterpret_cast<int64_t *>(ptr(t)); }

  // Copies `from` into `to`'s slot on the stream; nothing when both are the same slot (an
  // in-place update the planner tied to its input).
  Status copyUnlessSame(const plan::Tensor *from, const plan::Tensor *to) const;

  Layout layout(const plan::Tensor *t) const {
    const bool isFloat = t->dtype() == plan::F32 || t->dtype() == plan::F16 || t->dtype() == plan::BF16 ||
                         t->dtype() == plan::F64;
    return channelsLastEnabled && isFloat && t->shape_size() == 4 && !rowMajor.count(t->id()) ? Layout::ChannelsLast
                                                                                              : Layout::RowMajor;
  }
  bool channelsLast(const plan::Tensor *t) const { return layout(t) == Layout::ChannelsLast; }
};

// The logical (plan) shape, and the shape in storage order ([N,H,W,C] for channels-last).
Shape shapeOf(const plan::Tensor &t);
Shape physicalShape(const DeviceContext &ctx, const plan::Tensor &t);
// The storage-order position of logical axis `axis` of `t`.
int physicalAxis(const DeviceContext &ctx, const plan::Tensor &t, int axis);
int64_t countOf(const plan::Tensor &t);
// The dimensions joined by commas ("256,64,56,56"), as tuning keys and messages write them.
std::string dimsList(const Shape &s);
int64_t span(const Shape &s, size_t from, size_t to);
// Whether the arena slots of a and b share a byte.
bool overlap(const plan::Tensor *a, const plan::Tensor *b);
bool isFloat(plan::DType t);
// cuDNN's name of a float dtype (f32 for anything else).
cudnnDataType_t cudnnType(plan::DType t);

// A RunFn around a launch function returning a cudaError_t.
RunFn launch(std::function<cudaError_t()> f);

// The registry's id of a kernel's op. The executor builds only kernels whose op is in the
// registry (kernel_table.h), so builders call it freely.
inline plan::OpId opOf(const plan::Kernel &k) { return *plan::opFromName(k.op()); }

// A kernel builder: prepares everything a kernel needs (descriptors, tuned algorithms, scratch)
// and returns the function that enqueues it. It refuses, with a clear message, a kernel whose
// operands it cannot run (dtype, rank, layout). The builder of each op: kernel_table.h.
using Builder = Expected<RunFn> (*)(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                    const TensorList &out);

} // namespace castor::cuda
