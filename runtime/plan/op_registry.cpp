#include "plan/op_registry.h"

#include <unordered_map>

namespace castor::plan {
namespace {

struct OpInfo {
  std::string_view name;
  OpCategory category;
};

constexpr std::array<OpInfo, kOpCount> kOps = {{
#define CASTOR_OP(id, name, category) {name, OpCategory::category},
#include "plan/ops.def"
#undef CASTOR_OP
}};

} // namespace

std::optional<OpId> opFromName(std::string_view name) {
  static const std::unordered_map<std::string_view, OpId> byName = [] {
    std::unordered_map<std::string_view, OpId> m;
    for (size_t i = 0; i < kOpCount; ++i)
      m.emplace(kOps[i].name, OpId(i));
    return m;
  }();
  auto it = byName.find(name);
  if (it == byName.end())
    return std::nullopt;
  return it->second;
}

std::string_view opName(OpId op) { return kOps[size_t(op)].name; }

OpCategory opCategory(OpId op) { return kOps[size_t(op)].category; }

std::string_view categoryName(OpCategory category) {
  switch (category) {
  case OpCategory::Convolution: return "conv";
  case OpCategory::BatchNorm: return "batch_norm";
  case OpCategory::Matmul: return "matmul";
  case OpCategory::Elementwise: return "elementwise";
  case OpCategory::Optimizer: return "optimizer";
  case OpCategory::Scaler: return "scaler";
  case OpCategory::Communication: return "communication";
  case OpCategory::Other: return "other";
  }
  return "other";
}

bool isFusedOp(OpId op) {
  return op == OpId::BatchNormReluTraining || op == OpId::BatchNormReluTrainingBackward ||
         op == OpId::FusedElementwise;
}

std::vector<OpId> allOps() {
  std::vector<OpId> ops;
  for (size_t i = 0; i < kOpCount; ++i)
    ops.push_back(OpId(i));
  return ops;
}

} // namespace castor::plan
