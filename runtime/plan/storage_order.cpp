#include "plan/storage_order.h"

#include "plan/op_attrs.h"
#include "plan/op_registry.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <numeric>
#include <unordered_map>
#include <vector>

namespace castor::plan {
namespace {


// Whether a rank-4 shape's two orders are different bytes, whatever its dtype.
bool geometryDiffers(const Tensor &t) {
  return t.shape_size() == 4 && t.shape(1) != 1 && t.shape(2) * t.shape(3) != 1;
}

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

// The transposed view kernel k writes, if it is one.
std::optional<TransposedView> transposedViewOf(const Kernel &k, int index,
                                               const std::unordered_map<uint32_t, const Tensor *> &byId) {
  if (opFromName(k.op()) != OpId::Transpose || k.inputs_size() != 1 || k.outputs_size() != 1)
    return std::nullopt;
  auto out = byId.find(k.outputs(0));
  if (out == byId.end() || !out->second->has_view_of() || out->second->view_of() != k.inputs(0) ||
      !byId.count(k.inputs(0)))
    return std::nullopt;
  auto params = parseTranspose(k);
  bool fromChannels = false;
  if (!params || !isChannelsLastPerm(params->perm, &fromChannels))
    return std::nullopt;
  return fromChannels ? TransposedView{index, k.inputs(0), k.outputs(0)}
                      : TransposedView{index, k.outputs(0), k.inputs(0)};
}

struct Orders {
  std::unordered_set<uint32_t> rowMajor;
  std::vector<int> conflicts;
};

Orders decideOrders(const Plan &plan, OrderPreference preference) {
  std::unordered_map<uint32_t, const Tensor *> byId;
  for (const auto &t : plan.tensors())
    byId.emplace(t.id(), &t);
  std::unordered_map<uint32_t, size_t> index;
  for (const auto &t : plan.tensors())
    if (isImageShaped(t))
      index.emplace(t.id(), index.size());
  Groups groups{std::vector<size_t>(index.size())};
  std::iota(groups.parent.begin(), groups.parent.end(), size_t(0));
  std::vector<size_t> pinned, wanted, required;
  std::vector<TransposedView> views;
  std::vector<int> conflicts;
  for (int ki = 0; ki < plan.kernels_size(); ++ki) {
    const Kernel &k = plan.kernels(ki);
    auto op = opFromName(k.op());
    if (auto view = transposedViewOf(k, ki, byId)) {
      const Tensor &cl = *byId.at(view->channelsLast), &rm = *byId.at(view->rowMajor);
      if (geometryDiffers(cl) && !isImageShaped(cl))
        conflicts.push_back(ki); // never stored channels-last
      if (ordersDiffer(cl))
        required.push_back(index.at(cl.id()));
      if (ordersDiffer(rm))
        pinned.push_back(index.at(rm.id()));
      views.push_back(*view);
      continue;
    }
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
  std::unordered_set<size_t> channelsLastGroups, pinnedGroups, requiredGroups;
  if (preference == OrderPreference::ConvolutionsChannelsLast)
    for (size_t i : wanted)
      channelsLastGroups.insert(groups.find(i));
  for (size_t i : pinned) {
    channelsLastGroups.erase(groups.find(i));
    pinnedGroups.insert(groups.find(i));
  }
  for (size_t i : required) {
    channelsLastGroups.insert(groups.find(i));
    requiredGroups.insert(groups.find(i));
  }
  // A group both required channels-last and pinned row-major: each view touching it conflicts.
  auto contested = [&](uint32_t id) {
    auto it = index.find(id);
    if (it == index.end())
      return false;
    size_t g = groups.find(it->second);
    return requiredGroups.count(g) && pinnedGroups.count(g);
  };
  for (const TransposedView &v : views)
    if (contested(v.channelsLast) || contested(v.rowMajor))
      conflicts.push_back(v.kernel);
  Orders orders;
  for (const auto &[id, i] : index)
    if (!channelsLastGroups.count(groups.find(i)))
      orders.rowMajor.insert(id);
  std::sort(conflicts.begin(), conflicts.end());
  conflicts.erase(std::unique(conflicts.begin(), conflicts.end()), conflicts.end());
  orders.conflicts = std::move(conflicts);
  return orders;
}

// Calls fn(rowMajorIndex, channelsLastIndex) for every element of a rank-4 tensor.
template <typename Fn>
void forEachElement(const Tensor &t, Fn fn) {
  const int64_t n = t.shape(0), c = t.shape(1), h = t.shape(2), w = t.shape(3);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw)
          fn(((in * c + ic) * h + ih) * w + iw, ((in * h + ih) * w + iw) * c + ic);
}

} // namespace

bool ordersDiffer(const Tensor &t) { return isImageShaped(t) && geometryDiffers(t); }

std::unordered_set<uint32_t> rowMajorTensors(const Plan &plan, OrderPreference preference) {
  return decideOrders(plan, preference).rowMajor;
}

bool isChannelsLastPerm(const std::vector<int64_t> &perm, bool *fromChannels) {
  const bool forward = perm == std::vector<int64_t>{0, 2, 3, 1};
  const bool backward = perm == std::vector<int64_t>{0, 3, 1, 2};
  if (fromChannels)
    *fromChannels = forward;
  return forward || backward;
}

std::vector<TransposedView> transposedViews(const Plan &plan) {
  std::unordered_map<uint32_t, const Tensor *> byId;
  for (const auto &t : plan.tensors())
    byId.emplace(t.id(), &t);
  std::vector<TransposedView> views;
  for (int i = 0; i < plan.kernels_size(); ++i)
    if (auto v = transposedViewOf(plan.kernels(i), i, byId))
      views.push_back(*v);
  return views;
}

std::vector<int> conflictingTransposedViews(const Plan &plan) {
  return decideOrders(plan, OrderPreference::RowMajor).conflicts;
}

std::unordered_set<uint32_t> channelsLastForViews(const Plan &plan) {
  std::unordered_set<uint32_t> result;
  for (const TransposedView &v : transposedViews(plan))
    result.insert(v.channelsLast);
  // Same-shape views share the bytes and so the order: close over view_of both ways.
  std::multimap<uint32_t, uint32_t> sameShape;
  std::unordered_map<uint32_t, const Tensor *> byId;
  for (const auto &t : plan.tensors())
    byId.emplace(t.id(), &t);
  for (const auto &t : plan.tensors())
    if (t.has_view_of() && byId.count(t.view_of()) && shapeOf(t) == shapeOf(*byId.at(t.view_of()))) {
      sameShape.emplace(t.id(), t.view_of());
      sameShape.emplace(t.view_of(), t.id());
    }
  std::vector<uint32_t> work(result.begin(), result.end());
  while (!work.empty()) {
    uint32_t id = work.back();
    work.pop_back();
    auto [b, e] = sameShape.equal_range(id);
    for (auto it = b; it != e; ++it)
      if (result.insert(it->second).second)
        work.push_back(it->second);
  }
  return result;
}

void toChannelsLast(const Tensor &t, const uint8_t *rowMajor, uint8_t *channelsLast) {
  const size_t elem = dtypeSize(t.dtype());
  forEachElement(t, [&](int64_t r, int64_t c) { std::memcpy(channelsLast + c * elem, rowMajor + r * elem, elem); });
}

void fromChannelsLast(const Tensor &t, const uint8_t *channelsLast, uint8_t *rowMajor) {
  const size_t elem = dtypeSize(t.dtype());
  forEachElement(t, [&](int64_t r, int64_t c) { std::memcpy(rowMajor + r * elem, channelsLast + c * elem, elem); });
}

} // namespace castor::plan
