#include "train/state_identity.h"

#include "castor/state_names.h"
#include "data/shape_text.h"
#include "plan/sha256.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace castor::train {

namespace {

constexpr char kConstantPrefix[] = "castor.constant.";

struct Entry {
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  bool operator==(const Entry &o) const { return dtype == o.dtype && shape == o.shape; }
};
using Table = std::map<std::string, Entry>; // sorted by name: the hash does not depend on order

Table tableOf(const plan::Plan &plan) {
  std::map<uint32_t, std::string> names;
  for (const plan::Parameter &p : plan.parameters())
    names[p.tensor()] = p.name();
  Table table;
  for (const plan::Tensor &t : plan.tensors())
    if (t.kind() == plan::Tensor::PARAMETER || t.kind() == plan::Tensor::STATE) {
      auto it = names.find(t.id());
      table[it != names.end() ? it->second : t.name()] = {t.dtype(), {t.shape().begin(), t.shape().end()}};
    }
  return table;
}

Table tableOf(const weights::TensorFile &file) {
  Table table;
  for (const weights::NamedTensor &t : file.tensors)
    table[t.name] = {t.dtype, t.shape};
  return table;
}

bool isConstant(const std::string &name) { return name.rfind(kConstantPrefix, 0) == 0; }
bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool isOptimizerBuffer(const std::string &name) {
  return endsWith(name, names::kMomentumBufferSuffix) || endsWith(name, names::kExpAvgSuffix) ||
         endsWith(name, names::kExpAvgSqSuffix);
}

// What differs between the state's table and the plan's, in the terms of the flags that make
// it differ; the compiler's constants only when nothing else does.
std::string describeDifference(const Table &state, const Table &plan) {
  std::vector<std::string> onlyState, onlyPlan, changed;
  for (const auto &[name, e] : state) {
    auto it = plan.find(name);
    if (it == plan.end())
      onlyState.push_back(name);
    else if (!(it->second == e))
      changed.push_back(name);
  }
  for (const auto &[name, e] : plan)
    if (!state.count(name))
      onlyPlan.push_back(name);
  auto has = [](const std::vector<std::string> &v, const std::string &name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  if (has(onlyState, names::kLossScale))
    return "it has a dynamic loss scaler's state: the plan that saved it trained in fp16 or bf16, this one does "
           "not scale the loss";
  if (has(onlyPlan, names::kLossScale))
    return "this plan has a dynamic loss scaler (fp16 or bf16 training), the plan that saved the state had none";
  for (const std::string &name : changed) {
    if (isConstant(name))
      continue;
    const Entry &s = state.at(name), &p = plan.at(name);
    if (s.dtype != p.dtype) {
      const std::string copies = s.dtype == plan::F32 ? "fp32" : s.dtype == plan::F16 ? "fp16"
                                                               : s.dtype == plan::BF16 ? "bf16"
                                                                                       : plan::dtypeName(s.dtype);
      return "'" + name + "' is " + plan::dtypeName(s.dtype) + " in the state and " + plan::dtypeName(p.dtype) +
             " in this plan (" + copies + " master copies)";
    }
    return "'" + name + "' is " + data::shapeText(s.shape) + " in the state and " + data::shapeText(p.shape) +
           " in this plan";
  }
  for (const std::string &name : onlyState)
    if (isOptimizerBuffer(name))
      return "it holds the optimizer buffer '" + name + "', which this plan's optimizer does not keep (another "
             "--optimizer)";
  for (const std::string &name : onlyPlan)
    if (isOptimizerBuffer(name))
      return "it lacks this plan's optimizer buffer '" + name + "' (another --optimizer)";
  for (const std::string &name : onlyState)
    if (!isConstant(name))
      return "it holds '" + name + "', which this plan does not have";
  for (const std::string &name : onlyPlan)
    if (!isConstant(name))
      return "it lacks '" + name + "', which this plan has";
  return "the compiler's constants differ: the plan that saved it was compiled from another model or with other "
         "options";
}

} // namespace

std::string planStateIdentity(const plan::Plan &plan) {
  // SHA-256 over "name dtype shape\n" in name order.
  plan::Sha256 h;
  for (const auto &[name, e] : tableOf(plan)) {
    const std::string line = name + " " + std::to_string(int(e.dtype)) + " " + data::shapeText(e.shape) + "\n";
    h.update(line.data(), line.size());
  }
  return "sha256:" + plan::toHex(h.finish());
}

Status checkStateFitsPlan(const plan::Plan &plan, const weights::TensorFile &state, const std::string &path) {
  auto saved = state.metadata.find(kPlanIdentityKey);
  if (saved != state.metadata.end() && saved->second == planStateIdentity(plan))
    return Status::ok();
  // A state saved before the identity was recorded, or by another plan: the tables decide.
  const Table mine = tableOf(plan), theirs = tableOf(state);
  if (mine == theirs)
    return Status::ok();
  return Status::error(path + ": this state was saved by a plan with different parameters (" +
                       describeDifference(theirs, mine) +
                       "); compile with the same --precision, --loss-scale and --optimizer as the plan that saved it, "
                       "or start from its weights alone with --weights");
}

} // namespace castor::train
