// The CUDA backend: one device arena, every kernel of the plan in order on one stream, the whole
// step captured once as a CUDA graph and replayed.
//
// Each plan kernel is turned into a RunFn by the builder of its family (base/device_context.h:
// conv.cpp, batch_norm.cpp, cublaslt/matmul.cpp (cuBLASLt), kernels/builders.cpp). In plans that convolve
// fp16/bf16 data, rank-4 float tensors are stored channels-last; upload and download convert, so
// the host sees the plan's row-major layout.
// Scalars that change during training never leave the device, so a step needs no host
// synchronisation and can be captured: the first run() executes eagerly (it loads every kernel
// module and lets the libraries settle), the second captures the step into a graph and launches
// it, later runs launch the graph.
//
// Inputs overlap the step: upload() copies an input into a pinned host buffer and starts its
// transfer on a second stream into a device buffer of its own; a step begins by copying its
// inputs from those buffers into the arena (outside the graph) and marks that, so the next
// batch's transfer starts while the rest of the step still runs. Images uploaded as 8-bit pixels
// (uploadPixels) cross as bytes and are normalised into the arena by one kernel; synthetic ones
// (generatePixels) are made there, with nothing crossing. run() returns once the step is
// enqueued; download() waits for it.
//
// Environment: CASTOR_CUDA_LAYOUT=nchw keeps every tensor row-major, =nhwc stores every rank-4
// float tensor channels-last; CASTOR_CUDA_GRAPH=0 launches
// kernel by kernel; CASTOR_CUDA_SYNC=1 synchronises after every kernel (debugging; no graph);
// CASTOR_DETERMINISTIC=1 is BackendOptions::deterministic; CASTOR_STEP_TIMELINE=1 reports where
// the steps' and the image decoding's time goes (step_timeline.h).

#include "castor/cuda_backend.h"
#include "core/poison_schedule.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/layout.h"
#include "cuda/kernels/pixels.h"
#include "cuda/kernels/state_check.h"

#include "cuda/cublaslt/cublaslt_library.h"
#include "cuda/tuning/compile_ahead.h"
#include "cuda/tuning/tuner.h"
#include "cuda/tuning/tuning_cache.h"
#include "cuda/base/device_context.h"
#include "cuda/data/image_decoder.h"
#include "cuda/base/step_timeline.h"
#include "cuda/executor/kernel_table.h"
#include "plan/storage_order.h"
#include "plan/op_attrs.h"
#include "plan/plan_validator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace castor {
namespace {

using plan::Kernel;
using plan::Tensor;
using cuda::RunFn;

bool envIs(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

// Where a load's time goes ("device 0.31 s, memory 0.02 s, ..."), for the cold start's report.
class LoadPhases {
public:
  void mark(const char *phase) {
    const auto now = std::chrono::steady_clock::now();
    char text[64];
    std::snprintf(text, sizeof text, "%s%s %.2f s", text_.empty() ? "" : ", ", phase,
                  std::chrono::duration<double>(now - last_).count());
    text_ += text;
    last_ = now;
  }
  std::string summary() const { return text_; }

private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::string text_;
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const BackendOptions &options)
      : poison_(options.poison || poisonRequestedByEnvironment()),
        syncEach_(std::getenv("CASTOR_CUDA_SYNC") && !envIs("CASTOR_CUDA_SYNC", "0")),
        useGraph_(!poison_ && !syncEach_ && !envIs("CASTOR_CUDA_GRAPH", "0")), plant_(options) {
    if (plant_.requested())
      useGraph_ = false; // the fault goes into one run only
    layout_ = envIs("CASTOR_CUDA_LAYOUT", "nchw")   ? LayoutChoice::RowMajor
              : envIs("CASTOR_CUDA_LAYOUT", "nhwc") ? LayoutChoice::ChannelsLast
                                                    : LayoutChoice::Auto;
    const char *det = std::getenv("CASTOR_DETERMINISTIC");
    ctx_.deterministic = options.deterministic || (det && *det && std::strcmp(det, "0") != 0);
    ctx_.replicas = options.deviceReplicas;
    timeline_.gapBetweenRows("idle between steps");
  }

  ~CudaBackend() override {
    decoder_.reset(); // it waits for its work on the copy stream
    kernels_.clear(); // descriptors die with their RunFns, before the handles
    if (graphExec_)
      cudaGraphExecDestroy(graphExec_);
    if (ctx_.cudnn)
      cudnnDestroy(ctx_.cudnn);
    if (ctx_.cublasLt)
      cuda::cublasLtApi().Destroy(ctx_.cublasLt);
    for (void *p : {static_cast<void *>(ctx_.arena), ctx_.workspace, static_cast<void *>(ctx_.scratch), staging_,
                    static_cast<void *>(stateCheckEntries_), static_cast<void *>(stateCheckCounts_)})
      if (p)
        cudaFree(p);
    for (auto &[key, buffer] : ctx_.persistent)
      cudaFree(buffer.first);
    for (cudaStream_t st : {ctx_.stream, copyStream_, decodeStream_})
      if (st)
        cudaStreamSynchronize(st);
    for (auto &[t, buffer] : inputBuffers_)
      cudaFree(buffer);
    for (void *p : pinnedInputs_)
      cudaFreeHost(p);
    for (cudaEvent_t e : {start_, stop_, inputsReady_, inputsConsumed_, imagesDecoded_})
      if (e)
        cudaEventDestroy(e);
    for (cudaStream_t st : {ctx_.stream, copyStream_, decodeStream_, ctx_.commStream})
      if (st)
        cudaStreamDestroy(st);
  }

  std::string name() const override { return "cuda"; }

  Status load(const plan::Plan &p) override {
    if (ctx_.arena)
      return Status::error("the cuda backend loads one plan per backend object");
    plan_ = p;
    CASTOR_RETURN_IF_ERROR(plant_.bind(plan_));
    LoadPhases phases;
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
      return Status::error(std::string("no usable CUDA device: ") +
                           (e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
    cudaDeviceProp prop{};
    CASTOR_CUDA(cudaGetDeviceProperties(&prop, 0));
    ctx_.deviceName = prop.name;
    ctx_.smCount = prop.multiProcessorCount;
    for (const Tensor &t : plan_.tensors()) {
      if (std::string error = plan::slotError(t, plan_.arena_bytes()); !error.empty())
        return Status::error(error);
      tensors_[t.id()] = &t;
    }
    // A plan's transposed views need their [N,C,H,W] sides channels-last whatever the layout
    // choice: in row-major mode those groups alone are (plan/storage_order.h).
    const bool preferChannelsLast = layout_ == LayoutChoice::ChannelsLast ||
                                    (layout_ == LayoutChoice::Auto && halfPrecisionConvolutions());
    ctx_.channelsLastEnabled = preferChannelsLast || !plan::transposedViews(plan_).empty();
    if (ctx_.channelsLastEnabled)
      ctx_.rowMajor = plan::rowMajorTensors(plan_, preferChannelsLast ? plan::OrderPreference::ConvolutionsChannelsLast
                                                                      : plan::OrderPreference::RowMajor);
    uint64_t stagingBytes = 0, inputBytes = 0;
    for (const Tensor &t : plan_.tensors()) {
      // Host transfers of channels-last tensors pass through the staging buffer; activations
      // are never transferred.
      if (ctx_.channelsLast(&t) && t.kind() != Tensor::INPUT && t.kind() != Tensor::ACTIVATION)
        stagingBytes = std::max<uint64_t>(stagingBytes, t.bytes());
      if (t.kind() == Tensor::INPUT)
        inputBytes += t.bytes();
    }
    size_t freeBytes = 0, totalBytes = 0;
    CASTOR_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
    const uint64_t reserve = uint64_t(256) << 20; // handles, library workspaces
    if (plan_.arena_bytes() + stagingBytes + inputBytes + reserve > freeBytes)
      return Status::error("the plan needs an arena of " + gib(plan_.arena_bytes()) + " but " + ctx_.deviceName +
                           " has " + gib(freeBytes) + " free of " + gib(totalBytes) +
                           " (compile with a smaller --batch, or recompute more)");
    // The step's stream first, the inputs' (transfers, image decoding) after: their kernels fill
    // the gaps the step leaves instead of slowing it.
    int leastPriority = 0, greatestPriority = 0;
    CASTOR_CUDA(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
    CASTOR_CUDA(cudaStreamCreateWithPriority(&ctx_.stream, cudaStreamNonBlocking, greatestPriority));
    CASTOR_CUDA(cudaStreamCreateWithPriority(&copyStream_, cudaStreamNonBlocking, leastPriority));
    CASTOR_CUDA(cudaStreamCreateWithPriority(&decodeStream_, cudaStreamNonBlocking, leastPriority));
    CASTOR_CUDA(cudaEventCreateWithFlags(&inputsReady_, cudaEventDisableTiming));
    CASTOR_CUDA(cudaEventCreateWithFlags(&imagesDecoded_, cudaEventDisableTiming));
    CASTOR_CUDA(cudaEventCreateWithFlags(&inputsConsumed_, cudaEventDisableTiming));
    phases.mark("device");
    for (const Tensor &t : plan_.tensors())
      if (t.kind() == Tensor::INPUT) {
        void *buffer = nullptr, *pinned = nullptr;
        CASTOR_CUDA(allocate(&buffer, std::max<uint64_t>(t.bytes(), 1)));
        CASTOR_CUDA(cudaMemsetAsync(buffer, 0, t.bytes(), ctx_.stream)); // an input never uploaded reads zeros
        inputBuffers_.push_back({&t, buffer});
        pixelSources_.emplace_back();
        CASTOR_CUDA(cudaMallocHost(&pinned, std::max<uint64_t>(t.bytes(), 1)));
        pinnedInputs_.push_back(pinned);
      }
    CASTOR_CUDA(allocate(&ctx_.arena, std::max<uint64_t>(plan_.arena_bytes(), 256)));
    CASTOR_CUDA(cudaMemsetAsync(ctx_.arena, 0, plan_.arena_bytes(), ctx_.stream));
    CASTOR_CUDA(allocate(&ctx_.scratch, 64 * sizeof(double)));
    if (stagingBytes > 0)
      CASTOR_CUDA(allocate(&staging_, stagingBytes));
    phases.mark("memory");
    CASTOR_CUDNN(cudnnCreate(&ctx_.cudnn));
    CASTOR_CUDNN(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    // gemm and matmul run through cuBLASLt (opened here, not linked: cublaslt_library.h), with the
    // shared workspace (ctx_.workspace, sized by what their algorithms ask for); nothing calls
    // cuBLAS itself. Its fp32 compute type never uses TF32 (matmul.cpp).
    CASTOR_RETURN_IF_ERROR(cuda::openCublasLt());
    CASTOR_CUBLAS(cuda::cublasLtApi().Create(&ctx_.cublasLt));
    CASTOR_CUDA(cudaMemGetInfo(&freeBytes, &totalBytes));
    ctx_.workspaceLimit = std::min<size_t>(size_t(1) << 30, freeBytes / 2);
    if (plan_.workspace_limit_bytes() > 0) { // part of the plan's predicted peak: keep to it
      ctx_.besideArenaBudget = size_t(plan_.workspace_limit_bytes());
      ctx_.persistentShare = std::min(size_t(plan_.reserve_bytes()), ctx_.besideArenaBudget);
      ctx_.updateWorkspaceLimit();
    }
    CASTOR_CUDA(cudaEventCreate(&start_));
    CASTOR_CUDA(cudaEventCreate(&stop_));
    cuda::configureDevice(ctx_.smCount); // the own kernels size their grids for this GPU

    // The tuner's choices are timed: only a cache file pins them from one run to the next.
    if (ctx_.deterministic && cuda::tuning::cachePath(ctx_).empty())
      std::fprintf(stderr, "castor: deterministic, but the tuning cache is off (CASTOR_TUNING_CACHE): each run times "
                           "its engines anew and may choose others, so another run may differ in its bits\n");
    ctx_.plan = &plan_;
    ctx_.tensorsById = &tensors_;
    phases.mark("libraries");
    startCompileAhead();
    for (int i = 0; i < plan_.kernels_size(); ++i) {
      const Kernel &k = plan_.kernels(i);
      const std::string where = plan::describeKernel(plan_, i) + " on cuda";
      cuda::TensorList in, out;
      if (Status st = operandsOf(k, in, out); !st)
        return st.withContext(where);
      const auto op = plan::opFromName(k.op());
      const cuda::Builder *build = op ? cuda::cudaKernels().find(*op) : nullptr;
      if (!build)
        return Status::error(where + ": the cuda backend has no kernel '" + k.op() + "'");
      ctx_.buildingKernel = i; // tuning::choose notes its choices under it (kernelChoices)
      // Work another stream still does on this kernel's operands: wait for it first.
      std::vector<cudaEvent_t> waits = takePendingWrites(in, out);
      auto fn = (*build)(ctx_, k, in, out);
      ctx_.buildingKernel = -1;
      if (!fn)
        return fn.status().withContext(where);
      kernels_.push_back(waitingFor(std::move(waits), std::move(*fn)));
      categories_.push_back(plan::opCategory(*op));
    }
    // Whatever no kernel read joins the step at its end, so that a step (or its CUDA graph)
    // never ends with work left on another stream.
    if (!kernels_.empty() && !ctx_.pendingWrites.empty()) {
      std::vector<cudaEvent_t> rest;
      for (const auto &[id, event] : ctx_.pendingWrites)
        rest.push_back(event);
      ctx_.pendingWrites.clear();
      kernels_.back() = [last = std::move(kernels_.back()), join = waitingFor(std::move(rest), RunFn(
                             []() { return Status::ok(); }))]() -> Status {
        CASTOR_RETURN_IF_ERROR(last());
        return join();
      };
    }
    const std::string ahead = finishCompileAhead();
    phases.mark("kernels");
    noteChoices();
    if (ctx_.workspaceBytes > 0)
      CASTOR_CUDA(allocate(&ctx_.workspace, ctx_.workspaceBytes));
    for (auto &[key, buffer] : ctx_.persistent)
      allocated_ += buffer.second;
    if (poison_)
      poisonAfter_ = poisonSchedule(plan_);
    CASTOR_CUDA(cudaStreamSynchronize(ctx_.stream));
    phases.mark("rest");
    if (std::string tuning = cuda::tuning::tuningSummary(); !tuning.empty())
      std::fprintf(stderr, "castor-run: cuda %s%s%s\n", tuning.c_str(), ahead.c_str(),
                   ctx_.deterministic ? "; deterministic engines and reductions" : "");
    std::fprintf(stderr, "castor-run: cuda load %s\n", phases.summary().c_str());
    return Status::ok();
  }

  Status upload(uint32_t id, const void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    if ((*t)->kind() == Tensor::INPUT) {
      const size_t i = inputIndex(*t);
      if (int64_t(i) == decodedInput_) // another input (the labels) goes up beside the decoding
        CASTOR_RETURN_IF_ERROR(stopDecodingInto());
      // Into the input's pinned host buffer once its last transfer is done, then on the copy
      // stream into the input's device buffer once the last step has copied that into the arena
      // (enqueueStep): the transfer overlaps the running step.
      CASTOR_CUDA(cudaEventSynchronize(inputsReady_));
      pixelSources_[i].kind = PixelSource::None;
      std::memcpy(pinnedInputs_[i], data, bytes);
      CASTOR_CUDA(cudaStreamWaitEvent(copyStream_, inputsConsumed_));
      CASTOR_CUDA(cudaMemcpyAsync(inputBuffers_[i].second, pinnedInputs_[i], bytes, cudaMemcpyHostToDevice, copyStream_));
      return cuda::cudaStatus(cudaEventRecord(inputsReady_, copyStream_), "uploading an input");
    }
    const bool reorder = ctx_.channelsLast(*t);
    CASTOR_CUDA(cudaMemcpyAsync(reorder ? staging_ : ctx_.ptr(*t), data, bytes, cudaMemcpyHostToDevice, ctx_.stream));
    if (reorder) {
      const cuda::Shape s = cuda::shapeOf(**t);
      CASTOR_CUDA(cuda::toChannelsLast(staging_, ctx_.ptr(*t), s[0], s[1], s[2] * s[3],
                                       int(plan::dtypeSize((*t)->dtype())), ctx_.stream));
    }
    return cuda::cudaStatus(cudaStreamSynchronize(ctx_.stream), "uploading a tensor");
  }

  // 8-bit pixels: uploaded as they are (a quarter of fp32's bytes) into the input's buffer; the
  // step converts them into the arena in one kernel (enqueueInputs).
  Status uploadPixels(const Tensor &input, const uint8_t *pixels, const PixelTransform &transform) override {
    auto px = pixelSourceFor(input, transform);
    if (!px)
      return px.status();
    const size_t i = inputIndex(px->tensor);
    if (int64_t(i) == decodedInput_)
      CASTOR_RETURN_IF_ERROR(stopDecodingInto());
    CASTOR_CUDA(cudaEventSynchronize(inputsReady_));
    std::memcpy(pinnedInputs_[i], pixels, px->shape.count());
    CASTOR_CUDA(cudaStreamWaitEvent(copyStream_, inputsConsumed_));
    CASTOR_CUDA(cudaMemcpyAsync(inputBuffers_[i].second, pinnedInputs_[i], px->shape.count(), cudaMemcpyHostToDevice,
                                copyStream_));
    px->kind = PixelSource::Pixels;
    pixelSources_[i] = *px;
    return cuda::cudaStatus(cudaEventRecord(inputsReady_, copyStream_), "uploading pixels");
  }

  // Image files: decoded (nvJPEG) and resized on the copy stream into the input's buffer as 8-bit
  // pixels, converted by the step as uploaded pixels are. The device decoder is made on first use.
  bool decodesImages() const override { return cuda::DeviceImageDecoder::built() && makeDecoder(); }
  // nvJPEG's CUDA decoder alone is slower than the host's threads; its hardware engine is not.
  bool decodesImagesInHardware() const override { return decodesImages() && decoder_->hardware(); }

  Status uploadEncodedImages(const Tensor &input, EncodedImageBatch batch, const PixelTransform &transform) override {
    auto px = pixelSourceFor(input, transform);
    if (!px)
      return px.status();
    if (px->shape.c != batch.channels || px->shape.h != batch.outHeight || px->shape.w != batch.outWidth ||
        px->shape.n != int64_t(batch.images.size()))
      return Status::error("input '" + input.name() + "' does not take this batch of images");
    CASTOR_RETURN_IF_ERROR(makeDecoder());
    // Handed to the decoder's thread: it writes the input's buffer on a stream of its own once
    // the step before has read it (inputsConsumed_), then records imagesDecoded_, which the next
    // step waits for once the decoder's thread has enqueued the work (settleDecoding). Other
    // inputs go up on the copy stream meanwhile.
    const size_t i = inputIndex(px->tensor);
    px->kind = PixelSource::Pixels;
    pixelSources_[i] = *px;
    decodedInput_ = int64_t(i);
    return decoder_->submit(std::move(batch), static_cast<uint8_t *>(inputBuffers_[i].second), decodeStream_,
                            inputsConsumed_, imagesDecoded_);
  }

  // Synthetic pixels: nothing crosses the bus; the step generates them in the arena.
  Status generatePixels(const Tensor &input, uint64_t seed, int64_t step, const PixelTransform &transform) override {
    auto px = pixelSourceFor(input, transform);
    if (!px)
      return px.status();
    px->kind = PixelSource::Synthetic;
    px->seed = seed;
    px->step = step;
    pixelSources_[inputIndex(px->tensor)] = *px;
    return Status::ok();
  }

  Status download(uint32_t id, void *data, size_t bytes) override {
    auto t = find(id, bytes);
    if (!t)
      return t.status();
    if ((*t)->kind() == Tensor::INPUT) {
      CASTOR_RETURN_IF_ERROR(settleDecoding());
      // The last upload, from the input's own buffer (in the plan's layout): a step reuses the
      // arena slot once it has read the input.
      CASTOR_CUDA(cudaStreamSynchronize(copyStream_));
      CASTOR_CUDA(cudaStreamSynchronize(decodeStream_));
      const size_t i = inputIndex(*t);
      const PixelSource &px = pixelSources_[i];
      if (px.kind != PixelSource::None) {
        // Its pixels, converted as the device does (castor/pixel_input.h).
        std::vector<uint8_t> pixels(px.shape.count());
        if (px.kind == PixelSource::Synthetic)
          syntheticPixels(px.seed, px.step, pixels.size(), pixels.data());
        else
          CASTOR_CUDA(cudaMemcpy(pixels.data(), inputBuffers_[i].second, pixels.size(), cudaMemcpyDeviceToHost));
        pixelsToTensor(pixels.data(), px.shape, px.transform, (*t)->dtype(), static_cast<uint8_t *>(data));
        return Status::ok();
      }
      return cuda::cudaStatus(cudaMemcpy(data, inputBuffers_[i].second, bytes, cudaMemcpyDeviceToHost),
                              "downloading an input");
    }
    const bool reorder = ctx_.channelsLast(*t);
    if (reorder) {
      const cuda::Shape s = cuda::shapeOf(**t);
      CASTOR_CUDA(cuda::fromChannelsLast(ctx_.ptr(*t), staging_, s[0], s[1], s[2] * s[3],
                                         int(plan::dtypeSize((*t)->dtype())), ctx_.stream));
    }
    CASTOR_CUDA(
        cudaMemcpyAsync(data, reorder ? staging_ : ctx_.ptr(*t), bytes, cudaMemcpyDeviceToHost, ctx_.stream));
    return cuda::cudaStatus(cudaStreamSynchronize(ctx_.stream), "downloading a tensor");
  }

  // Enqueues the step and returns: a failure inside a kernel surfaces at the next download (or
  // at once with CASTOR_CUDA_SYNC=1).
  Status run() override { return enqueueStep(); }

  Expected<NonFiniteFound> replayToFirstNonFinite() override {
    if (runs_ == 0)
      return Status::error("no step to replay: the plan has not run");
    CASTOR_RETURN_IF_ERROR(settleDecoding());
    CASTOR_RETURN_IF_ERROR(enqueueInputs());
    NonFiniteFound found;
    std::vector<uint8_t> host;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      if (Status s = kernels_[i](); !s)
        return s.withContext(plan::describeKernel(plan_, int(i)) + " on cuda");
      CASTOR_RETURN_IF_ERROR(plantAfter(i));
      CASTOR_CUDA(cudaStreamSynchronize(ctx_.stream));
      for (uint32_t id : plan_.kernels(int(i)).outputs()) {
        const Tensor *t = tensors_.at(id);
        // The bytes as stored (channels-last or not): a count needs no order.
        host.resize(t->bytes());
        CASTOR_CUDA(cudaMemcpy(host.data(), ctx_.ptr(t), t->bytes(), cudaMemcpyDeviceToHost));
        if (int64_t n = countNonFinite(t->dtype(), host.data(), host.size()); n > 0) {
          found = {int(i), id, n};
          return found;
        }
      }
    }
    return found;
  }

  // One launch over the listed tensors where the last step left them (the step's stream), one
  // count per tensor copied back. The list's device array is kept for the next check of the
  // same tensors (the state is the same list at every save).
  Expected<NonFiniteTensor> firstNonFinite(const std::vector<const Tensor *> &tensors) override {
    std::vector<uint32_t> ids;
    for (const Tensor *t : tensors) {
      auto found = find(t->id(), t->bytes());
      if (!found)
        return found.status();
      ids.push_back(t->id());
    }
    const int n = int(ids.size());
    if (ids != stateCheckIds_) {
      std::vector<cuda::StateCheckEntry> entries;
      for (uint32_t id : ids) {
        const Tensor *t = tensors_.at(id);
        const int64_t size = plan::dtypeSize(t->dtype());
        entries.push_back({ctx_.ref(t), size > 0 ? int64_t(t->bytes()) / size : 0});
      }
      CASTOR_CUDA(cudaStreamSynchronize(ctx_.stream)); // the old arrays may still be read
      for (void *p : {static_cast<void *>(stateCheckEntries_), static_cast<void *>(stateCheckCounts_)})
        if (p)
          cudaFree(p);
      stateCheckEntries_ = nullptr;
      stateCheckCounts_ = nullptr;
      stateCheckIds_.clear();
      CASTOR_CUDA(allocate(&stateCheckEntries_, std::max<size_t>(1, entries.size()) * sizeof(cuda::StateCheckEntry)));
      CASTOR_CUDA(allocate(&stateCheckCounts_, std::max<size_t>(1, entries.size()) * sizeof(unsigned long long)));
      CASTOR_CUDA(cudaMemcpyAsync(stateCheckEntries_, entries.data(), entries.size() * sizeof(cuda::StateCheckEntry),
                                  cudaMemcpyHostToDevice, ctx_.stream));
      stateCheckIds_ = ids;
    }
    std::vector<unsigned long long> counts(size_t(n), 0);
    CASTOR_CUDA(cuda::countNonFiniteEach(stateCheckEntries_, n, stateCheckCounts_, ctx_.stream));
    CASTOR_CUDA(cudaMemcpyAsync(counts.data(), stateCheckCounts_, counts.size() * sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, ctx_.stream));
    CASTOR_RETURN_IF_ERROR(cuda::cudaStatus(cudaStreamSynchronize(ctx_.stream), "checking the state for non-finite values"));
    for (int i = 0; i < n; ++i)
      if (counts[size_t(i)] > 0)
        return NonFiniteTensor{i, int64_t(counts[size_t(i)])};
    return NonFiniteTensor{};
  }

  uint64_t allocatedBytes() const override { return allocated_; }
  std::vector<std::pair<std::string, uint64_t>> allocatedBytesByPurpose() const override {
    uint64_t inputs = 0, staging = 0;
    for (const auto &[t, buffer] : inputBuffers_)
      inputs += std::max<uint64_t>(t->bytes(), 1);
    for (const Tensor &t : plan_.tensors())
      if (ctx_.channelsLast(&t) && t.kind() != Tensor::INPUT && t.kind() != Tensor::ACTIVATION)
        staging = std::max<uint64_t>(staging, t.bytes());
    const uint64_t arena = std::max<uint64_t>(plan_.arena_bytes(), 256);
    const uint64_t named = arena + inputs + staging + ctx_.workspaceBytes + ctx_.persistentBytes;
    return {{"arena", arena},
            {"inputs", inputs},
            {"staging", staging},
            {"workspace", ctx_.workspaceBytes},
            {"persistent", ctx_.persistentBytes},
            {"other", allocated_ > named ? allocated_ - named : 0}};
  }

  Expected<double> timedRun() override {
    CASTOR_CUDA(cudaEventRecord(start_, ctx_.stream));
    CASTOR_RETURN_IF_ERROR(enqueueStep());
    CASTOR_CUDA(cudaEventRecord(stop_, ctx_.stream));
    CASTOR_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    CASTOR_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms);
  }

  Expected<std::vector<std::pair<std::string, double>>> profileRun() override {
    // Kernel by kernel, one event pair each; the graph is not used, so launch gaps are not
    // counted in any category.
    std::vector<cudaEvent_t> events(2 * kernels_.size());
    for (cudaEvent_t &e : events)
      CASTOR_CUDA(cudaEventCreate(&e));
    Status s = enqueueInputs();
    for (size_t i = 0; i < kernels_.size() && s; ++i) {
      cudaEventRecord(events[2 * i], ctx_.stream);
      s = kernels_[i]().withContext(plan::describeKernel(plan_, int(i)) + " on cuda");
      cudaEventRecord(events[2 * i + 1], ctx_.stream);
    }
    if (s)
      s = cuda::cudaStatus(cudaStreamSynchronize(ctx_.stream), "profiling the plan on cuda");
    std::map<std::string, double> byCategory;
    // CASTOR_PROFILE_KERNELS=1 also lists every kernel's time on stderr, in plan order.
    const bool eachKernel = envIs("CASTOR_PROFILE_KERNELS", "1");
    for (size_t i = 0; i < kernels_.size() && s; ++i) {
      float ms = 0;
      s = cuda::cudaStatus(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "kernel timing");
      byCategory[std::string(plan::categoryName(categories_[i]))] += ms;
      byCategory["op:" + plan_.kernels(int(i)).op()] += ms;
      byCategory["kernel:" + std::to_string(i)] = ms;
      if (s && eachKernel)
        std::fprintf(stderr, "castor-run: kernel %zu %.4f ms %s\n", i, double(ms),
                     plan::describeKernel(plan_, int(i)).c_str());
    }
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    if (!s)
      return s;
    return std::vector<std::pair<std::string, double>>(byCategory.begin(), byCategory.end());
  }

  std::vector<KernelChoice> kernelChoices() const override { return choices_; }

private:
  // The kernel's input and output tensors.
  Status operandsOf(const Kernel &k, cuda::TensorList &in, cuda::TensorList &out) const {
    for (auto [ids, list] : {std::pair{&k.inputs(), &in}, std::pair{&k.outputs(), &out}})
      for (uint32_t id : *ids) {
        auto it = tensors_.find(id);
        if (it == tensors_.end())
          return Status::error("unknown tensor id " + std::to_string(id));
        list->push_back(it->second);
      }
    return Status::ok();
  }

  // The runtime compilations the kernels' builds would start (cuDNN's runtime-compiled engines
  // on an empty tuning cache), started on worker threads (tuning/compile_ahead.h) before the
  // kernels are built, so that they compile while the layers before theirs are built and timed,
  // and their builds read the plans back.
  void startCompileAhead() {
    std::vector<cuda::tuning::CompileJob> jobs;
    for (const Kernel &k : plan_.kernels()) {
      const auto op = plan::opFromName(k.op());
      const cuda::CompileAheadFn *jobsOf = op ? cuda::cudaCompileAhead().find(*op) : nullptr;
      cuda::TensorList in, out;
      if (!jobsOf || !operandsOf(k, in, out))
        continue; // the kernel's build reports what is wrong
      for (auto &job : (*jobsOf)(ctx_, k, in, out))
        jobs.push_back(std::move(job));
    }
    if (!jobs.empty())
      compileAhead_ = std::make_unique<cuda::tuning::CompileAhead>(std::move(jobs));
  }

  // "; 24 engines compiled ahead on 16 threads in 1.20 s" once the kernels are built, or "".
  std::string finishCompileAhead() {
    if (!compileAhead_)
      return "";
    const auto report = compileAhead_->finish();
    compileAhead_.reset();
    if (report.jobs == 0)
      return "";
    char text[128];
    std::snprintf(text, sizeof text, "; %zu engines compiled ahead on %zu threads in %.2f s", report.jobs,
                  report.threads, report.seconds);
    return text;
  }

  // What kernelChoices reports, once every kernel is built: the tuner's choices, and for the
  // fused batch-norm-ReLU kernels the way their forward's builder recorded in ctx_.layerChoices
  // under the saved mean (the forward's output 1, the backward's input 5).
  void noteChoices() {
    choices_.assign(size_t(plan_.kernels_size()), KernelChoice{});
    for (int i = 0; i < plan_.kernels_size(); ++i) {
      const Kernel &k = plan_.kernels(i);
      KernelChoice &c = choices_[size_t(i)];
      if (auto tuned = ctx_.tunedChoices.find(i); tuned != ctx_.tunedChoices.end())
        c.tuned = tuned->second;
      const auto op = plan::opFromName(k.op());
      // Where the builders recorded their way (ctx.layerChoices): a fused batch norm's under its
      // saved mean, an accumulating data gradient's under its output.
      std::optional<uint32_t> key;
      if (op == plan::OpId::BatchNormReluTraining && k.outputs_size() > 1)
        key = k.outputs(1);
      else if (op == plan::OpId::BatchNormReluTrainingBackward && k.inputs_size() > 5)
        key = k.inputs(5);
      else if (op == plan::OpId::Conv2dBackwardData && k.inputs_size() == 3)
        key = k.outputs(0);
      else if (op == plan::OpId::FusedElementwise && k.outputs_size() > 0)
        key = k.outputs(0); // "generated" (cuda/kernels/fused_elementwise.cpp)
      if (key)
        if (auto way = ctx_.layerChoices.find(*key); way != ctx_.layerChoices.end())
          c.way = way->second;
    }
  }

  template <typename T> cudaError_t allocate(T **p, size_t bytes) {
    cudaError_t e = cudaMalloc(reinterpret_cast<void **>(p), bytes);
    if (e == cudaSuccess)
      allocated_ += bytes;
    return e;
  }

  Expected<const Tensor *> find(uint32_t id, size_t bytes) {
    auto it = tensors_.find(id);
    if (it == tensors_.end())
      return Status::error("no tensor with id " + std::to_string(id));
    if (it->second->kind() == Tensor::ACTIVATION && ctx_.channelsLast(it->second))
      return Status::error("tensor '" + it->second->name() + "' is an activation stored channels-last: its value "
                           "is not kept after the step (CASTOR_CUDA_LAYOUT=nchw to read it)");
    if (it->second->bytes() != bytes)
      return Status::error("tensor " + std::to_string(id) + " '" + it->second->name() + "' holds " +
                           std::to_string(it->second->bytes()) + " bytes, got " + std::to_string(bytes));
    return it->second;
  }

  // Channels-last is the layout of the tensor-core path: chosen when the plan convolves fp16 or
  // bf16 data. fp32 convolutions (no TF32) and cuDNN's fp32 batch norm run faster on NCHW.
  bool halfPrecisionConvolutions() const {
    for (const Kernel &k : plan_.kernels())
      if (plan::opFromName(k.op()) == plan::OpId::Conv2d && k.inputs_size() > 0) {
        const plan::DType dt = tensors_.at(k.inputs(0))->dtype();
        if (dt == plan::F16 || dt == plan::BF16)
          return true;
      }
    return false;
  }

  // How an input's last upload reaches the arena: as bytes, or from 8-bit pixels.
  struct PixelSource {
    enum Kind { None, Pixels, Synthetic } kind = None;
    const Tensor *tensor = nullptr;
    PixelShape shape;
    PixelTransform transform;
    cuda::PixelConversion conv;
    uint64_t seed = 0; // Synthetic: of (seed, step)
    int64_t step = 0;
  };

  Expected<PixelSource> pixelSourceFor(const Tensor &input, const PixelTransform &transform) {
    auto t = find(input.id(), input.bytes());
    if (!t)
      return t.status();
    if ((*t)->kind() != Tensor::INPUT)
      return Status::error("pixels fill inputs only, not '" + (*t)->name() + "'");
    auto shape = pixelShapeOf(**t, transform);
    if (!shape)
      return shape.status();
    if (shape->c > cuda::kMaxPixelChannels)
      return Status::error("input '" + (*t)->name() + "': pixels of at most " +
                           std::to_string(cuda::kMaxPixelChannels) + " channels");
    PixelSource px;
    px.tensor = *t;
    px.shape = *shape;
    px.transform = transform;
    px.conv.n = shape->n, px.conv.c = shape->c, px.conv.h = shape->h, px.conv.w = shape->w;
    for (int64_t c = 0; c < shape->c; ++c) {
      px.conv.scale[c] = transform.scale[size_t(c)];
      px.conv.bias[c] = transform.bias[size_t(c)];
    }
    return px;
  }

  size_t inputIndex(const Tensor *t) const {
    size_t i = 0;
    while (inputBuffers_[i].first != t)
      ++i;
    return i;
  }

  // The inputs, once uploaded, from their buffers into their arena slots (reordered when
  // channels-last); then the buffers are free for the next upload.
  Status enqueueInputs() {
    CASTOR_CUDA(cudaStreamWaitEvent(ctx_.stream, inputsReady_));
    if (decodedInput_ >= 0)
      CASTOR_CUDA(cudaStreamWaitEvent(ctx_.stream, imagesDecoded_));
    for (size_t i = 0; i < inputBuffers_.size(); ++i) {
      const auto &[t, buffer] = inputBuffers_[i];
      const PixelSource &px = pixelSources_[i];
      if (px.kind != PixelSource::None) {
        cuda::PixelConversion conv = px.conv;
        conv.channelsLast = ctx_.channelsLast(t);
        const cuda::Ref out{ctx_.ptr(t), int(t->dtype())};
        CASTOR_CUDA(px.kind == PixelSource::Synthetic
                        ? cuda::syntheticPixelsToTensor(px.seed, px.step, kSyntheticPixelsTag, out, conv, ctx_.stream)
                        : cuda::pixelsToTensor(static_cast<const uint8_t *>(buffer), out, conv, ctx_.stream));
      } else if (ctx_.channelsLast(t)) {
        const cuda::Shape s = cuda::shapeOf(*t);
        CASTOR_CUDA(cuda::toChannelsLast(buffer, ctx_.ptr(t), s[0], s[1], s[2] * s[3],
                                         int(plan::dtypeSize(t->dtype())), ctx_.stream));
      } else {
        CASTOR_CUDA(cudaMemcpyAsync(ctx_.ptr(t), buffer, t->bytes(), cudaMemcpyDeviceToDevice, ctx_.stream));
      }
    }
    return cuda::cudaStatus(cudaEventRecord(inputsConsumed_, ctx_.stream), "recording the inputs' copy");
  }

  // Every kernel of the step, in order, on the stream (no synchronisation).
  Status enqueueKernels() {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      Status s = kernels_[i]();
      if (s && syncEach_)
        s = cuda::cudaStatus(cudaStreamSynchronize(ctx_.stream), "after the kernel");
      if (!s)
        return s.withContext(plan::describeKernel(plan_, int(i)) + " on cuda");
      CASTOR_RETURN_IF_ERROR(plantAfter(i));
      if (poison_)
        for (const Tensor *t : poisonAfter_[i])
          CASTOR_CUDA(cudaMemsetAsync(ctx_.ptr(t), 0xFF, t->bytes(), ctx_.stream));
    }
    return Status::ok();
  }

  // The planted fault (tests), after its kernel in its run.
  Status plantAfter(size_t kernel) {
    const Tensor *t = plant_.after(int(kernel), runs_);
    if (!t)
      return Status::ok();
    return cuda::cudaStatus(cudaMemcpyAsync(ctx_.ptr(t), plant_.bytes().data(), plant_.bytes().size(),
                                            cudaMemcpyHostToDevice, ctx_.stream),
                            "planting a non-finite value");
  }

  // One step: its inputs, then the kernels, eagerly the first time, then captured once and
  // replayed.
  // The device image decoder, made on first use (its error again on later calls).
  Status makeDecoder() const {
    if (!decoder_ && decoderError_) {
      auto made = cuda::DeviceImageDecoder::create();
      if (made)
        decoder_ = std::make_unique<cuda::BackgroundImageDecoder>(std::move(*made));
      else
        decoderError_ = made.status();
    }
    return decoder_ ? Status::ok() : decoderError_;
  }

  // A batch handed to the decoder's thread is enqueued on the copy stream before anything else
  // touches the inputs.
  Status settleDecoding() { return decoder_ ? decoder_->wait() : Status::ok(); }

  // The input the decoder filled is uploaded instead: the upload's copy goes after the
  // decoding's writes.
  Status stopDecodingInto() {
    CASTOR_RETURN_IF_ERROR(settleDecoding());
    decodedInput_ = -1;
    return cuda::cudaStatus(cudaStreamWaitEvent(copyStream_, imagesDecoded_), "ordering an upload after decoding");
  }

  Status enqueueStep() {
    ++runs_;
    const auto settling = std::chrono::steady_clock::now();
    CASTOR_RETURN_IF_ERROR(settleDecoding());
    timeline_.begin(ctx_.stream);
    timeline_.host("host wait for decoding enqueued", cuda::StepTimeline::msSince(settling));
    CASTOR_RETURN_IF_ERROR(enqueueInputs());
    timeline_.mark(ctx_.stream);
    Status s = enqueueGraphOrKernels();
    timeline_.mark(ctx_.stream);
    return s;
  }

  Status enqueueGraphOrKernels() {
    if (!useGraph_ || runs_ == 1)
      return enqueueKernels();
    if (!graphExec_) {
      cudaGraph_t graph = nullptr;
      CASTOR_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
      Status s = enqueueKernels();
      cudaError_t end = cudaStreamEndCapture(ctx_.stream, &graph);
      if (!s)
        return s.withContext("capturing the step as a CUDA graph (CASTOR_CUDA_GRAPH=0 runs without)");
      CASTOR_CUDA(end);
      launches_ = countLaunches(graph);
      cudaError_t inst = cudaGraphInstantiate(&graphExec_, graph, 0);
      cudaGraphDestroy(graph);
      CASTOR_CUDA(inst);
    }
    return cuda::cudaStatus(cudaGraphLaunch(graphExec_, ctx_.stream), "launching the step's CUDA graph");
  }

  // The nodes of the captured step by what they put on the device (child graphs counted through).
  static StepLaunches countLaunches(cudaGraph_t graph) {
    StepLaunches n;
    size_t count = 0;
    if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess)
      return n;
    std::vector<cudaGraphNode_t> nodes(count);
    if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess)
      return n;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      if (cudaGraphNodeGetType(node, &type) != cudaSuccess)
        continue;
      if (type == cudaGraphNodeTypeKernel)
        ++n.kernels;
      else if (type == cudaGraphNodeTypeMemset)
        ++n.memsets;
      else if (type == cudaGraphNodeTypeMemcpy)
        ++n.copies;
      else if (type == cudaGraphNodeTypeGraph) {
        cudaGraph_t child = nullptr;
        if (cudaGraphChildGraphNodeGetGraph(node, &child) == cudaSuccess) {
          StepLaunches c = countLaunches(child);
          n.kernels += c.kernels, n.memsets += c.memsets, n.copies += c.copies, n.other += c.other;
        }
      } else if (type != cudaGraphNodeTypeEmpty)
        ++n.other;
    }
    return n;
  }

  std::optional<StepLaunches> launchesPerStep() const override { return launches_; }

  enum class LayoutChoice { Auto, RowMajor, ChannelsLast };
  std::optional<StepLaunches> launches_;
  bool poison_, syncEach_, useGraph_;
  NonFinitePlant plant_;
  mutable std::unique_ptr<cuda::BackgroundImageDecoder> decoder_;
  std::unique_ptr<cuda::tuning::CompileAhead> compileAhead_; // while the kernels are built
  mutable Status decoderError_; // ok until making the decoder failed
  LayoutChoice layout_ = LayoutChoice::Auto;
  plan::Plan plan_;
  cuda::DeviceContext ctx_;
  std::unordered_map<uint32_t, const Tensor *> tensors_;
  std::vector<RunFn> kernels_;

  // The events of pending work on another stream that touches any of these tensors, taken out of
  // ctx_.pendingWrites (each is waited for once, by the first kernel that needs it).
  std::vector<cudaEvent_t> takePendingWrites(const cuda::TensorList &in, const cuda::TensorList &out) {
    std::vector<cudaEvent_t> waits;
    for (const cuda::TensorList *list : {&in, &out})
      for (const Tensor *t : *list)
        if (auto it = ctx_.pendingWrites.find(t->id()); it != ctx_.pendingWrites.end()) {
          if (std::find(waits.begin(), waits.end(), it->second) == waits.end())
            waits.push_back(it->second);
          ctx_.pendingWrites.erase(it);
        }
    return waits;
  }

  // `run`, after the step's stream waits for each event.
  RunFn waitingFor(std::vector<cudaEvent_t> events, RunFn run) {
    if (events.empty())
      return run;
    const cudaStream_t stream = ctx_.stream;
    return [events = std::move(events), run = std::move(run), stream]() -> Status {
      for (cudaEvent_t e : events)
        CASTOR_CUDA(cudaStreamWaitEvent(stream, e, 0));
      return run();
    };
  }
  std::vector<plan::OpCategory> categories_;
  std::vector<KernelChoice> choices_; // kernelChoices, one per kernel
  std::vector<std::vector<const Tensor *>> poisonAfter_;
  void *staging_ = nullptr;         // channels-last tensors pass through here on upload/download
  // The state check's list on the device (firstNonFinite), its counts, and the ids it lists.
  cuda::StateCheckEntry *stateCheckEntries_ = nullptr;
  unsigned long long *stateCheckCounts_ = nullptr;
  std::vector<uint32_t> stateCheckIds_;
  uint64_t allocated_ = 0;
  int64_t runs_ = 0;
  cudaGraphExec_t graphExec_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  // Inputs: each has a device buffer of its own that uploads fill on the copy stream from a
  // pinned host buffer (same index).
  std::vector<std::pair<const Tensor *, void *>> inputBuffers_;
  std::vector<void *> pinnedInputs_;
  std::vector<PixelSource> pixelSources_; // same index: inputs filled from pixels
  cudaStream_t copyStream_ = nullptr;
  cudaEvent_t inputsReady_ = nullptr, inputsConsumed_ = nullptr;
  // The device image decoder's stream, the end of its last batch, and the input it fills (-1: none).
  cudaStream_t decodeStream_ = nullptr;
  cudaEvent_t imagesDecoded_ = nullptr;
  int64_t decodedInput_ = -1;
  // Declared last: its events go before the streams.
  cuda::StepTimeline timeline_{"the steps", {"inputs wait and conversion", "step"}};
};

} // namespace

std::unique_ptr<Backend> createCudaBackend(const BackendOptions &options) {
  return std::make_unique<CudaBackend>(options);
}

} // namespace castor
