// Helpers shared by the CUDA backend's kernel builders, and the table of which builder runs
// which plan op.
#include "cuda/executor/device_context.h"

#include <algorithm>

#include <unordered_map>

namespace castor::cuda {

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(e));
}
Status cudnnStatus(cudnnStatus_t e, const char *what) {
  if (e == CUDNN_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cudnnGetErrorString(e));
}
Status cublasStatus(cublasStatus_t e, const char *what) {
  if (e == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status::error(std::string(what) + ": " + cublasGetStatusName(e) + " (" + cublasGetStatusString(e) + ")");
}

Expected<void *> DeviceContext::persistentBuffer(uint32_t key, size_t bytes) {
  auto it = persistent.find(key);
  if (it != persistent.end()) {
    if (it->second.second < bytes)
      return Status::error("persistent buffer " + std::to_string(key) + " asked for with two sizes");
    return it->second.first;
  }
  // Persistent buffers and the shared workspace share the plan's budget beside the arena.
  if (besideArenaBudget && persistentBytes + bytes + workspaceBytes > besideArenaBudget)
    return Status::error("a persistent buffer of " + std::to_string(bytes) + " bytes would exceed the plan's workspace limit of " +
                         std::to_string(besideArenaBudget) + " bytes (" + std::to_string(persistentBytes) +
                         " in persistent buffers, " + std::to_string(workspaceBytes) + " of workspace)");
  void *p = nullptr;
  CASTOR_CUDA(cudaMalloc(&p, bytes > 0 ? bytes : 1));
  persistent[key] = {p, bytes};
  persistentBytes += bytes;
  updateWorkspaceLimit();
  return p;
}

void DeviceContext::releasePersistentBuffer(uint32_t key) {
  auto it = persistent.find(key);
  if (it == persistent.end())
    return;
  cudaFree(it->second.first);
  persistentBytes -= it->second.second;
  updateWorkspaceLimit();
  persistent.erase(it);
}

void DeviceContext::updateWorkspaceLimit() {
  if (besideArenaBudget) {
    const size_t kept = std::max(persistentShare, persistentBytes);
    workspaceLimit = besideArenaBudget > kept ? besideArenaBudget - kept : 0;
  }
}

Status DeviceContext::copyUnlessSame(const plan::Tensor *from, const plan::Tensor *to) const {
  if (from->offset() == to->offset())
    return Status::ok();
  return cudaStatus(cudaMemcpyAsync(ptr(to), ptr(from), from->bytes(), cudaMemcpyDeviceToDevice, stream), "copy");
}

Shape shapeOf(const plan::Tensor &t) { return Shape(t.shape().begin(), t.shape().end()); }

std::string dimsList(const Shape &s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r;
}

Shape physicalShape(const DeviceContext &ctx, const plan::Tensor &t) {
  Shape s = shapeOf(t);
  if (ctx.channelsLast(&t))
    return Shape{s[0], s[2], s[3], s[1]};
  return s;
}

int physicalAxis(const DeviceContext &ctx, const plan::Tensor &t, int axis) {
  if (!ctx.channelsLast(&t))
    return axis;
  static constexpr int kStorageAxis[4] = {0, 3, 1, 2}; // N->0, C->3, H->1, W->2
  return kStorageAxis[axis];
}

bool overlap(const plan::Tensor *a, const plan::Tensor *b) {
  return a->offset() < b->offset() + b->bytes() && b->offset() < a->offset() + a->bytes();
}

int64_t countOf(const plan::Tensor &t) { return *plan::elementCount(t); }

int64_t span(const Shape &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    n *= s[i];
  return n;
}

cudnnDataType_t cudnnType(plan::DType t) {
  switch (t) {
  case plan::F16:
    return CUDNN_DATA_HALF;
  case plan::BF16:
    return CUDNN_DATA_BFLOAT16;
  case plan::F64:
    return CUDNN_DATA_DOUBLE;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

bool isFloat(plan::DType t) { return t == plan::F32 || t == plan::F16 || t == plan::BF16 || t == plan::F64; }

// Element strides of `in` (right-aligned against `out`, 0 where it broadcasts).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t d = in.size() - 1 - i, o = out.size() - 1 - i;
    strides[o] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

Expected<Broadcast> makeBroadcast(const Shape &a, const Shape &b, const Shape &out) {
  Broadcast bc;
  if (a == out && b == out)
    return bc; // rank 0: same shapes, flat indices
  if (out.size() > size_t(kMaxRank))
    return Status::error("broadcasting over more than " + std::to_string(kMaxRank) + " dimensions");
  bc.rank = int(out.size());
  auto sa = broadcastStrides(a, out), sb = broadcastStrides(b, out);
  for (size_t d = 0; d < out.size(); ++d)
    bc.out[d] = out[d], bc.sa[d] = sa[d], bc.sb[d] = sb[d];
  return bc;
}

// Flat indices of the batch entries of `in` broadcast against `out` (matmul's batch dims).
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  const auto strides = broadcastStrides(in, out);
  const int64_t n = span(out, 0, out.size());
  std::vector<int64_t> map(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, at = 0;
    for (size_t d = out.size(); d-- > 0;) {
      at += (rest % out[d]) * strides[d];
      rest /= out[d];
    }
    map[size_t(i)] = at;
  }
  return map;
}


RunFn launch(std::function<cudaError_t()> f) {
  return [f]() { return cudaStatus(f(), "kernel launch"); };
}

} // namespace castor::cuda
