// A plan's tensors by id and its bindings by name: the lookups that training, benchmarking,
// evaluation and inspection all make. The index points into the plan: it is valid while the
// plan lives and is not changed.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace castor::train {

class PlanIndex {
public:
  explicit PlanIndex(const plan::Plan &plan);

  const plan::Plan &plan() const { return plan_; }
  // nullptr when the plan has no such tensor or binding.
  const plan::Tensor *tensor(uint32_t id) const;
  const plan::Tensor *input(const std::string &name) const;
  const plan::Tensor *output(const std::string &name) const;

private:
  const plan::Plan &plan_;
  std::unordered_map<uint32_t, const plan::Tensor *> byId_;
};

inline std::vector<int64_t> shapeOf(const plan::Tensor &t) { return {t.shape().begin(), t.shape().end()}; }

} // namespace castor::train
