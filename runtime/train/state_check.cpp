#include "train/state_check.h"

#include <map>

namespace castor::train {

namespace {
constexpr char kConstantPrefix[] = "castor.constant.";
}

StateTensors stateTensors(const plan::Plan &plan) {
  std::map<uint32_t, std::string> names;
  for (const plan::Parameter &p : plan.parameters())
    names[p.tensor()] = p.name();
  StateTensors state;
  for (const plan::Tensor &t : plan.tensors()) {
    if (t.kind() != plan::Tensor::PARAMETER && t.kind() != plan::Tensor::STATE)
      continue;
    auto it = names.find(t.id());
    const std::string name = it != names.end() ? it->second : t.name();
    if (name.rfind(kConstantPrefix, 0) == 0)
      continue;
    state.tensors.push_back(&t);
    state.names.push_back(name);
  }
  return state;
}

std::string NonFiniteState::describe() const {
  return "a non-finite value in '" + name + "' (" + std::to_string(count) + " of " + std::to_string(elements) +
         " values)";
}

Expected<std::optional<NonFiniteState>> findNonFiniteState(Session &session) {
  const StateTensors state = stateTensors(session.plan());
  auto found = session.backend().firstNonFinite(state.tensors);
  if (!found)
    return found.status();
  if (found->index < 0)
    return std::optional<NonFiniteState>{};
  const plan::Tensor &t = *state.tensors[size_t(found->index)];
  const auto elements = plan::elementCount(t);
  return std::optional<NonFiniteState>{
      NonFiniteState{state.names[size_t(found->index)], found->count, elements ? int64_t(*elements) : 0}};
}

} // namespace castor::train
