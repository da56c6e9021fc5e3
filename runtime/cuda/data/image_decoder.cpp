#include "cuda/data/image_decoder.h"

#include "cuda/base/step_timeline.h"
#include "cuda/kernels/resample.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#ifdef CASTOR_HAVE_NVJPEG
#include <nvjpeg.h>
#endif

namespace castor::cuda {

struct BackgroundImageDecoder::Impl {
  std::mutex mutex;
  std::condition_variable changed;
  bool pending = false, stopping = false;
  Status outcome;
  EncodedImageBatch batch;
  uint8_t *out = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t outFree = nullptr, done = nullptr;
  std::thread worker;
};

BackgroundImageDecoder::BackgroundImageDecoder(std::unique_ptr<DeviceImageDecoder> decoder)
    : decoder_(std::move(decoder)), impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  int device = 0;
  cudaGetDevice(&device); // the caller's: the worker's CUDA calls go to the same GPU
  m.worker = std::thread([this, &m, device] {
    cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(m.mutex);
    for (;;) {
      m.changed.wait(lock, [&] { return m.stopping || m.pending; });
      if (m.stopping)
        return;
      lock.unlock();
      Status s = decoder_->run(m.batch, m.out, m.stream, m.outFree);
      if (s && cudaEventRecord(m.done, m.stream) != cudaSuccess)
        s = Status::error("decoding images on the device: cannot record its end");
      lock.lock();
      m.outcome = std::move(s);
      m.pending = false;
      m.changed.notify_all();
    }
  });
}

BackgroundImageDecoder::~BackgroundImageDecoder() {
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->changed.wait(lock, [&] { return !impl_->pending; });
    impl_->stopping = true;
  }
  impl_->changed.notify_all();
  impl_->worker.join();
}

Status BackgroundImageDecoder::submit(EncodedImageBatch batch, uint8_t *out, cudaStream_t stream, cudaEvent_t outFree,
                                      cudaEvent_t done) {
  CASTOR_RETURN_IF_ERROR(wait());
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->batch = std::move(batch);
    impl_->out = out;
    impl_->stream = stream;
    impl_->outFree = outFree;
    impl_->done = done;
    impl_->pending = true;
  }
  impl_->changed.notify_all();
  return Status::ok();
}

Status BackgroundImageDecoder::wait() {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->changed.wait(lock, [&] { return !impl_->pending; });
  Status outcome = std::move(impl_->outcome);
  impl_->outcome = Status::ok();
  return outcome;
}

#ifndef CASTOR_HAVE_NVJPEG

bool DeviceImageDecoder::built() { return false; }
Expected<std::unique_ptr<DeviceImageDecoder>> DeviceImageDecoder::create() {
  return Status::error("this build of the CUDA backend has no nvJPEG (scripts/setup.sh installs it from PyPI, "
                       "nvidia-nvjpeg); decode on the host (--decoder host)");
}

#else

namespace {

std::string cudaText(cudaError_t e) { return cudaGetErrorString(e); }

#define DECODER_CUDA(call)                                                                                          \
  do {                                                                                                             \
    cudaError_t e_ = (call);                                                                                       \
    if (e_ != cudaSuccess)                                                                                         \
      return Status::error(std::string("decoding images on the device: ") + #call + ": " + cudaText(e_));          \
  } while (0)

// A device or pinned buffer that grows (never shrinks); growing waits for the device.
struct Buffer {
  void *p = nullptr;
  size_t bytes = 0;
  bool pinned = false;
  ~Buffer() { release(); }
  void release() {
    if (p)
      pinned ? cudaFreeHost(p) : cudaFree(p);
    p = nullptr;
    bytes = 0;
  }
  cudaError_t reserve(size_t want) {
    if (want <= bytes)
      return cudaSuccess;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
      return e;
    release();
    want = want + want / 4 + 4096;
    e = pinned ? cudaMallocHost(&p, want) : cudaMalloc(&p, want);
    if (e == cudaSuccess)
      bytes = want;
    return e;
  }
  template <typename T> T *as() const { return static_cast<T *>(p); }
};

size_t aligned(size_t n) { return (n + 255) / 256 * 256; }

// The taps of one axis appended to the table: first, count, weights; the job's offsets.
void appendTaps(const ResampleTaps &taps, std::vector<int32_t> &table, ResampleJob &job) {
  job.first = int64_t(table.size());
  table.insert(table.end(), taps.first.begin(), taps.first.end());
  job.count = int64_t(table.size());
  table.insert(table.end(), taps.count.begin(), taps.count.end());
  job.weights = int64_t(table.size());
  table.insert(table.end(), taps.weights.begin(), taps.weights.end());
  job.stride = taps.stride;
}

class NvjpegDecoder final : public DeviceImageDecoder {
public:
  ~NvjpegDecoder() override {
    if (stream_)
      cudaStreamSynchronize(stream_);
    for (Slot &slot : slots_) {
      if (slot.hwState)
        nvjpegJpegStateDestroy(slot.hwState);
      if (slot.done)
        cudaEventDestroy(slot.done);
    }
    if (cudaState_)
      nvjpegJpegStateDestroy(cudaState_);
    if (hw_)
      nvjpegDestroy(hw_);
    if (cuda_)
      nvjpegDestroy(cuda_);
  }

  Status init() {
    cudaGetDevice(&device_);
    if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &hw_) == NVJPEG_STATUS_SUCCESS &&
        nvjpegJpegStateCreate(hw_, &slots_[0].hwState) == NVJPEG_STATUS_SUCCESS &&
        nvjpegJpegStateCreate(hw_, &slots_[1].hwState) == NVJPEG_STATUS_SUCCESS) {
      hardware_ = true;
    } else { // no hardware decoder on this GPU
      for (Slot &slot : slots_) {
        if (slot.hwState)
          nvjpegJpegStateDestroy(slot.hwState);
        slot.hwState = nullptr;
      }
      if (hw_)
        nvjpegDestroy(hw_);
      hw_ = nullptr;
    }
    for (Slot &slot : slots_) {
      if (cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming) != cudaSuccess)
        return Status::error("decoding images on the device: cannot create an event");
      slot.staging.pinned = slot.jobsHost.pinned = true;
    }
    if (nvjpegStatus_t st = nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &cuda_);
        st != NVJPEG_STATUS_SUCCESS)
      return Status::error("nvJPEG: cannot create a decoder (status " + std::to_string(int(st)) + ")");
    if (nvjpegStatus_t st = nvjpegJpegStateCreate(cuda_, &cudaState_); st != NVJPEG_STATUS_SUCCESS)
      return Status::error("nvJPEG: cannot create a decoder state (status " + std::to_string(int(st)) + ")");
    return Status::ok();
  }

  bool hardware() const override { return hardware_; }

  Status run(const EncodedImageBatch &batch, uint8_t *out, cudaStream_t stream, cudaEvent_t outFree) override {
    stream_ = stream;
    // Two sets of buffers in turn: this call's decoding overlaps the last call's, whose set the
    // call before it used (done long since, normally).
    Slot &slot = slots_[next_];
    next_ ^= 1;
    const auto called = std::chrono::steady_clock::now();
    DECODER_CUDA(cudaEventSynchronize(slot.done));
    timeline_.begin(stream);
    timeline_.host("host wait for a free slot", StepTimeline::msSince(called));
    Buffer &decoded = slot.decoded, &scratch = slot.scratch, &staging = slot.staging, &pixelsUp = slot.pixelsUp;
    Buffer &jobsHost = slot.jobsHost, &jobsDevice = slot.jobsDevice;
    const int n = int(batch.images.size()), channels = batch.channels;
    if (channels != 3)
      return Status::error("decoding images on the device: 3 channels only, not " + std::to_string(channels));
    const size_t outImage = size_t(batch.outWidth) * size_t(batch.outHeight) * size_t(channels);

    // Where each decoded image goes, and the bytes staged: the host's pixels first (one copy up
    // for all of them, resized from there), then the files (nvJPEG reads them from the host).
    std::vector<size_t> decodedAt(size_t(n), 0), stagedAt(size_t(n), 0);
    size_t decodedBytes = 0, stagedBytes = 0;
    for (int i = 0; i < n; ++i) {
      const EncodedImage &e = batch.images[size_t(i)];
      if (e.resize.empty || !e.jpeg.empty())
        continue;
      if (e.pixels.size() != size_t(e.width) * size_t(e.height) * size_t(channels))
        return Status::error(e.name + ": " + std::to_string(e.pixels.size()) + " bytes of pixels for " +
                             std::to_string(e.width) + " x " + std::to_string(e.height) + " x " +
                             std::to_string(channels));
      stagedAt[size_t(i)] = stagedBytes;
      stagedBytes += aligned(e.pixels.size());
    }
    const size_t pixelBytes = stagedBytes;
    for (int i = 0; i < n; ++i) {
      const EncodedImage &e = batch.images[size_t(i)];
      if (e.resize.empty || e.jpeg.empty())
        continue;
      decodedAt[size_t(i)] = decodedBytes;
      decodedBytes += aligned(size_t(e.width) * size_t(e.height) * size_t(channels));
      stagedAt[size_t(i)] = stagedBytes;
      stagedBytes += aligned(e.jpeg.size());
    }
    DECODER_CUDA(decoded.reserve(std::max<size_t>(decodedBytes, 1)));
    DECODER_CUDA(staging.reserve(std::max<size_t>(stagedBytes, 1)));
    DECODER_CUDA(pixelsUp.reserve(std::max<size_t>(pixelBytes, 1)));
    auto stage = [&](bool jpegs) {
      for (int i = 0; i < n; ++i) {
        const EncodedImage &e = batch.images[size_t(i)];
        if (!e.resize.empty && e.jpeg.empty() != jpegs) {
          const std::vector<uint8_t> &bytes = jpegs ? e.jpeg : e.pixels;
          std::memcpy(staging.as<uint8_t>() + stagedAt[size_t(i)], bytes.data(), bytes.size());
        }
      }
    };
    stage(/*jpegs=*/true);

    // Decode: baseline JPEGs on the hardware decoder in one batch, on a thread of its own (nvJPEG
    // returns from it only once the images are decoded), while this one stages and copies up the
    // host's pixels, decodes other JPEGs on nvJPEG's CUDA decoder one by one and plans the resize.
    std::vector<const unsigned char *> hwData;
    std::vector<size_t> hwLengths;
    std::vector<nvjpegImage_t> hwOut;
    std::vector<int> hwIndex, cudaDecoded;
    for (int i = 0; i < n; ++i) {
      const EncodedImage &e = batch.images[size_t(i)];
      if (e.resize.empty || e.jpeg.empty())
        continue;
      if (!(hardware_ && e.baseline)) { // the source read the frame type from the markers
        cudaDecoded.push_back(i);
        continue;
      }
      nvjpegImage_t image{};
      image.channel[0] = decoded.as<uint8_t>() + decodedAt[size_t(i)];
      image.pitch[0] = size_t(e.width) * 3;
      hwData.push_back(staging.as<unsigned char>() + stagedAt[size_t(i)]);
      hwLengths.push_back(e.jpeg.size());
      hwOut.push_back(image);
      hwIndex.push_back(i);
    }
    // The call's time, reported after the join; declared before the future, which it outlives.
    double hardwareMs = 0;
    std::future<nvjpegStatus_t> hardwareDecoded;
    if (!hwData.empty())
      hardwareDecoded = std::async(std::launch::async, [&, device = device_]() {
        const auto called = std::chrono::steady_clock::now();
        cudaSetDevice(device);
        nvjpegStatus_t st = NVJPEG_STATUS_SUCCESS;
        if (int(hwData.size()) != slot.hwBatch) {
          st = nvjpegDecodeBatchedInitialize(hw_, slot.hwState, int(hwData.size()), 1, NVJPEG_OUTPUT_RGBI);
          slot.hwBatch = st == NVJPEG_STATUS_SUCCESS ? int(hwData.size()) : -1;
        }
        if (st == NVJPEG_STATUS_SUCCESS)
          st = nvjpegDecodeBatched(hw_, slot.hwState, hwData.data(), hwLengths.data(), hwOut.data(), stream);
        hardwareMs = StepTimeline::msSince(called);
        return st;
      });
    stage(/*jpegs=*/false);
    if (pixelBytes > 0)
      DECODER_CUDA(cudaMemcpyAsync(pixelsUp.p, staging.p, pixelBytes, cudaMemcpyHostToDevice, stream));
    auto decodeOnCuda = [&](int i, const unsigned char *src, nvjpegImage_t &image, const std::string &why) {
      const EncodedImage &e = batch.images[size_t(i)];
      if (nvjpegStatus_t st = nvjpegDecode(cuda_, cudaState_, src, e.jpeg.size(), NVJPEG_OUTPUT_RGBI, &image, stream);
          st != NVJPEG_STATUS_SUCCESS)
        return Status::error(e.name + ": nvJPEG cannot decode it (status " + std::to_string(int(st)) + why +
                             "); --decoder host decodes it on the host");
      return Status::ok();
    };
    Status cudaDecoding = Status::ok();
    for (int i : cudaDecoded) {
      nvjpegImage_t image{};
      image.channel[0] = decoded.as<uint8_t>() + decodedAt[size_t(i)];
      image.pitch[0] = size_t(batch.images[size_t(i)].width) * 3;
      if (cudaDecoding = decodeOnCuda(i, staging.as<unsigned char>() + stagedAt[size_t(i)], image, ""); !cudaDecoding)
        break;
    }
    // Each image's decoded pixels on the device.
    auto pixelsOf = [&](int i) -> const uint8_t * {
      return batch.images[size_t(i)].jpeg.empty() ? pixelsUp.as<uint8_t>() + stagedAt[size_t(i)]
                                                  : decoded.as<uint8_t>() + decodedAt[size_t(i)];
    };

    // Resize: every image's first pass, then every second pass (through an 8-bit intermediate).
    std::vector<ResampleJob> first, second;
    // Jobs that write (first passes) or read (second passes) the scratch: their offsets into it,
    // set to pointers once its size is known.
    std::vector<std::pair<size_t, size_t>> firstIntoScratch, secondFromScratch;
    std::vector<int32_t> table;
    size_t scratchBytes = 0;
    int64_t maxOutputs = 0;
    const int64_t outRowBytes = int64_t(batch.outWidth) * channels;
    for (int i = 0; i < n; ++i) {
      const EncodedImage &e = batch.images[size_t(i)];
      const ImageResize &r = e.resize;
      if (r.empty)
        continue;
      const int64_t srcRowBytes = int64_t(e.width) * channels;
      const uint8_t *region = pixelsOf(i) + int64_t(r.top) * srcRowBytes + int64_t(r.left) * channels;
      uint8_t *dst = out + size_t(i) * outImage + size_t(r.rowOffset) * size_t(outRowBytes) +
                     size_t(r.colOffset) * size_t(channels);
      const int outCols = r.colEnd - r.colBegin, outRows = r.rowEnd - r.rowBegin;
      ResampleJob job;
      job.channels = channels;
      job.dstRowBytes = outRowBytes;
      job.dst = dst;
      job.rows = outRows;
      job.cols = outCols;
      job.flip = r.flip;
      const bool horizontal = r.resizesColumns(), vertical = r.resizesRows();
      ResampleTaps colTaps, rowTaps;
      if (horizontal)
        colTaps = pillowBilinearTaps(r.width, r.outWidth, r.colBegin, r.colEnd);
      if (vertical)
        rowTaps = pillowBilinearTaps(r.height, r.outHeight, r.rowBegin, r.rowEnd);
      if (!horizontal && !vertical) {
        job.axis = ResampleJob::Copy;
        job.src = region + int64_t(r.rowBegin) * srcRowBytes + int64_t(r.colBegin) * channels;
        job.srcRowBytes = srcRowBytes;
        first.push_back(job);
      } else if (!vertical) {
        job.axis = ResampleJob::Horizontal;
        job.src = region + int64_t(r.rowBegin) * srcRowBytes;
        job.srcRowBytes = srcRowBytes;
        appendTaps(colTaps, table, job);
        first.push_back(job);
      } else if (!horizontal) {
        job.axis = ResampleJob::Vertical;
        job.src = region + int64_t(r.colBegin) * channels;
        job.srcRowBytes = srcRowBytes;
        appendTaps(rowTaps, table, job);
        first.push_back(job);
      } else {
        // Both axes (Pillow's order, castor/image_resize.h): the intermediate holds the first
        // pass over what the kept outputs read.
        ResampleJob a = job, b = job;
        a.flip = 0;
        if (r.verticalFirst()) {
          const int colFirst = colTaps.first.front(), colLast = colTaps.first.back() + colTaps.count.back();
          a.axis = ResampleJob::Vertical;
          a.src = region + int64_t(colFirst) * channels;
          a.srcRowBytes = srcRowBytes;
          a.rows = outRows;
          a.cols = colLast - colFirst;
          appendTaps(rowTaps, table, a);
          b.axis = ResampleJob::Horizontal;
          b.shift = colFirst;
          appendTaps(colTaps, table, b);
        } else {
          const int rowFirst = rowTaps.first.front(), rowLast = rowTaps.first.back() + rowTaps.count.back();
          a.axis = ResampleJob::Horizontal;
          a.src = region + int64_t(rowFirst) * srcRowBytes;
          a.srcRowBytes = srcRowBytes;
          a.rows = rowLast - rowFirst;
          a.cols = outCols;
          appendTaps(colTaps, table, a);
          b.axis = ResampleJob::Vertical;
          b.shift = rowFirst;
          appendTaps(rowTaps, table, b);
        }
        a.dstRowBytes = int64_t(a.cols) * channels;
        b.srcRowBytes = a.dstRowBytes;
        firstIntoScratch.push_back({first.size(), scratchBytes});
        secondFromScratch.push_back({second.size(), scratchBytes});
        scratchBytes += aligned(size_t(a.rows) * size_t(a.dstRowBytes));
        first.push_back(a);
        second.push_back(b);
        maxOutputs = std::max(maxOutputs, int64_t(a.rows) * a.cols);
      }
      maxOutputs = std::max(maxOutputs, int64_t(outRows) * outCols);
    }
    if (hardwareDecoded.valid()) {
      const nvjpegStatus_t st = hardwareDecoded.get();
      timeline_.host("host in the hardware decoder's call", hardwareMs);
      if (st != NVJPEG_STATUS_SUCCESS) {
        // A file the hardware does not take after all (a sampling it lacks): the batch again on
        // the CUDA decoder, one by one.
        slot.hwBatch = -1;
        // Said once: a folder whose batches the hardware keeps refusing decodes at a fraction of
        // its speed, and the note says why.
        static std::once_flag noted;
        std::call_once(noted, [&] {
          std::fprintf(stderr,
                       "castor-run: the hardware JPEG decoder refused a batch (nvJPEG status %d); such a batch is "
                       "decoded again on nvJPEG's CUDA decoder, one image at a time\n",
                       int(st));
        });
        for (size_t k = 0; k < hwData.size() && cudaDecoding; ++k)
          cudaDecoding = decodeOnCuda(hwIndex[k], hwData[k], hwOut[k],
                                      ", the hardware decoder's " + std::to_string(int(st)));
      }
    }
    CASTOR_RETURN_IF_ERROR(cudaDecoding);
    timeline_.mark(stream);
    DECODER_CUDA(scratch.reserve(std::max<size_t>(scratchBytes, 1)));
    for (auto [job, offset] : firstIntoScratch)
      first[job].dst = scratch.as<uint8_t>() + offset;
    for (auto [job, offset] : secondFromScratch)
      second[job].src = scratch.as<uint8_t>() + offset;

    // Jobs and taps to the device in one copy; the padding (CenterCrop's, the batch's) is zeros.
    const size_t jobBytes = (first.size() + second.size()) * sizeof(ResampleJob);
    const size_t tableBytes = table.size() * sizeof(int32_t);
    DECODER_CUDA(jobsHost.reserve(jobBytes + tableBytes + 64));
    DECODER_CUDA(jobsDevice.reserve(jobBytes + tableBytes + 64));
    std::memcpy(jobsHost.as<uint8_t>(), first.data(), first.size() * sizeof(ResampleJob));
    std::memcpy(jobsHost.as<uint8_t>() + first.size() * sizeof(ResampleJob), second.data(),
                second.size() * sizeof(ResampleJob));
    std::memcpy(jobsHost.as<uint8_t>() + jobBytes, table.data(), tableBytes);
    DECODER_CUDA(cudaMemcpyAsync(jobsDevice.p, jobsHost.p, jobBytes + tableBytes, cudaMemcpyHostToDevice, stream));
    // `out` is written from here on, once its last reader is done.
    DECODER_CUDA(cudaStreamWaitEvent(stream, outFree));
    timeline_.mark(stream);
    DECODER_CUDA(cudaMemsetAsync(out, 0, size_t(n) * outImage, stream));
    const auto *jobs = jobsDevice.as<const ResampleJob>();
    const auto *taps = reinterpret_cast<const int32_t *>(jobsDevice.as<const uint8_t>() + jobBytes);
    DECODER_CUDA(runResampleJobs(jobs, int(first.size()), maxOutputs, taps, stream));
    DECODER_CUDA(runResampleJobs(jobs + first.size(), int(second.size()), maxOutputs, taps, stream));
    DECODER_CUDA(cudaEventRecord(slot.done, stream));
    timeline_.mark(stream);
    timeline_.host("host in run", StepTimeline::msSince(called));
    return Status::ok();
  }

private:
  nvjpegHandle_t hw_ = nullptr, cuda_ = nullptr;
  // What one call uses while the next one fills the other.
  struct Slot {
    Buffer decoded, scratch, staging, pixelsUp, jobsHost, jobsDevice;
    nvjpegJpegState_t hwState = nullptr;
    int hwBatch = -1;
    cudaEvent_t done = nullptr;
  };
  Slot slots_[2];
  int next_ = 0;
  nvjpegJpegState_t cudaState_ = nullptr;
  bool hardware_ = false;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  StepTimeline timeline_{"device decoding", {"decoding", "wait for the input buffer", "resize"}};
};

} // namespace

bool DeviceImageDecoder::built() { return true; }

Expected<std::unique_ptr<DeviceImageDecoder>> DeviceImageDecoder::create() {
  auto d = std::make_unique<NvjpegDecoder>();
  CASTOR_RETURN_IF_ERROR(d->init());
  return std::unique_ptr<DeviceImageDecoder>(std::move(d));
}

#endif

} // namespace castor::cuda
