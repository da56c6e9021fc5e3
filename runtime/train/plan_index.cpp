#include "train/plan_index.h"

namespace castor::train {
namespace {

const plan::Tensor *bound(const PlanIndex &index, const google::protobuf::RepeatedPtrField<plan::Binding> &list,
                          const std::string &name) {
  for (const plan::Binding &b : list)
    if (b.name() == name)
      return index.tensor(b.tensor());
  return nullptr;
}

} // namespace

PlanIndex::PlanIndex(const plan::Plan &plan) : plan_(plan) {
  for (const plan::Tensor &t : plan.tensors())
    byId_.emplace(t.id(), &t); // the first of duplicate ids, as a scan would find (the validator refuses them)
}

const plan::Tensor *PlanIndex::tensor(uint32_t id) const {
  auto it = byId_.find(id);
  return it == byId_.end() ? nullptr : it->second;
}

const plan::Tensor *PlanIndex::input(const std::string &name) const { return bound(*this, plan_.inputs(), name); }
const plan::Tensor *PlanIndex::output(const std::string &name) const { return bound(*this, plan_.outputs(), name); }

} // namespace castor::train
