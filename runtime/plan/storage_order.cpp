#include "plan/storage_order.h"

#include "plan/op_registry.h"

#include <numeric>
#include <unordered_map>
#include <vector>

namespace castor::plan {
namespace {


bool isImageShaped(const Tensor &t) {
  const auto d = t.dtype();
  return t.shape_size() == 4 && (d == F32 || d == F16 || d == BF16 || d == F64);
}

// Kernels that address every operand through its own storage strides.
bool layoutFree(OpId op) {
  switch (op) {
  case OpId::Transpose:
  case OpId::Slice:
  case OpId::SliceBackward:
  case OpId::Reshape:
  case OpId::Flatten:
  case OpId::Identity:
  case OpId::Add:
  case OpId::Mul:
    return true;
  default:
    return false;
  }
}

// Kernels whose rank-4 operands must be row-major (attention's [B,H,S,D] are no images: cuDNN's
// SDPA takes them dense, head dimension innermost).
bool needsRowMajor(OpId op) {
  switch (op) {
  case OpId::Matmul:
  case OpId::Gemm:
  case OpId::LayerNorm:
  case OpId::LayerNormBackward:
  case OpId::Attention:
  case OpId::AttentionBackward:
    return true;
  default:
    return false;
  }
}

// Kernels that run faster on channels-last rank-4 operands (cuDNN's NHWC convolutions and batch
// norm, the pooling kernels).
bool prefersChannelsLast(OpId op) {
  switch (op) {
  case OpId::Conv2d:
  case OpId::Conv2dBackwardData:
  case OpId::Conv2dBackwardFilter:
  case OpId::Conv2dBackwardBias:
  case OpId::BatchNormTraining:
  case OpId::BatchNormInference:
  case OpId::BatchNormApply:
  case OpId::BatchNormTrainingBackward:
  case OpId::BatchNormReluTraining:
  case OpId::BatchNormReluTrainingBackward:
  case OpId::MaxPool2d:
  case OpId::MaxPool2dBackward:
  case OpId::AvgPool2d:
  case OpId::AvgPool2dBackward:
  case OpId::GlobalAvgPool:
  case OpId::GlobalAvgPoolBackward:
    return true;
  default:
    return false;
  }
}

// The view a kernel writes (a reshape, flatten or identity whose output has view_of), if any.
const Tensor *viewWrittenBy(const Kernel &k, const std::unordered_map<uint32_t, const Tensor *> &byId) {
  if (k.outputs_size() != 1)
    return nullptr;
  auto it = byId.find(k.outputs(0));
  if (it == byId.end() || !it->second->has_view_of() || !byId.count(it->second->view_of()))
    return nullptr;
  return it->second;
}

std::vector<int64_t> shapeOf(const Tensor &t) { return {t.shape().begin(), t.shape().end()}; }

struct Groups {
  std::vector<size_t> parent;
  size_t find(size_t i) {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

} // namespace

bool ordersDiffer(const Tensor &t) {
  return isImageShaped(t) && t.shape(1) != 1 && t.shape(2) * t.shape(3) != 1;
}

std::unordered_set<uint32_t> rowMajorTensors(const Plan &plan) {
  std::unordered_map<uint32_t, const Tensor *> byId;
  for (const auto &t : plan.tensors())
    byId.emplace(t.id(), &t);
  std::unordered_map<uint32_t, size_t> index;
  for (const auto &t : plan.tensors())
    if (isImageShaped(t))
      index.emplace(t.id(), index.size());
  Groups groups{std::vector<size_t>(index.size())};
  std::iota(groups.parent.begin(), groups.parent.end(), size_t(0));
  std::vector<size_t> pinned, wanted;
  for (const auto &k : plan.kernels()) {
    auto op = opFromName(k.op());
    std::vector<size_t> operands;
    for (const auto *ids : {&k.inputs(), &k.outputs()})
      for (uint32_t id : *ids)
        if (auto it = index.find(id); it != index.end())
          operands.push_back(it->second);
    if (operands.empty())
      continue;
    if (const auto *view = viewWrittenBy(k, byId)) {
      // Same shape: one order for both. Another shape: row-major wherever the orders differ.
      const Tensor &source = *byId.at(view->view_of());
      if (isImageShaped(*view) && isImageShaped(source) && shapeOf(*view) == shapeOf(source)) {
        groups.join(index.at(view->id()), index.at(source.id()));
        continue;
      }
      for (const Tensor *t : {view, &source})
        if (ordersDiffer(*t))
          pinned.push_back(index.at(t->id()));
      continue;
    }
    if (op && layoutFree(*op))
      continue;
    for (size_t i = 1; i < operands.size(); ++i)
      groups.join(operands[i], operands[0]);
    if (op && needsRowMajor(*op))
      pinned.push_back(operands[0]);
    if (op && prefersChannelsLast(*op))
      wanted.push_back(operands[0]);
  }
  std::unordered_set<size_t> channelsLastGroups;
  for (size_t i : wanted)
    channelsLastGroups.insert(groups.find(i));
  for (size_t i : pinned)
    channelsLastGroups.erase(groups.find(i));
  std::unordered_set<uint32_t> result;
  for (const auto &[id, i] : index)
    if (!channelsLastGroups.count(groups.find(i)))
      result.insert(id);
  return result;
}

} // namespace castor::plan
