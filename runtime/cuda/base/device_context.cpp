// What every kernel builder of the CUDA backend sees (device_context.h): the persistent buffers,
// the workspace budget, the tensors' shapes and layouts.
#include "cuda/base/device_context.h"

#include <algorithm>

#include <unordered_map>

namespace castor::cuda {

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

RunFn launch(std::function<cudaError_t()> f) {
  return [f]() { return cudaStatus(f(), "kernel launch"); };
}

} // namespace castor::cuda
