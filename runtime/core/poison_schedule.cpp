#include "core/poison_schedule.h"

#include "plan/plan_validator.h"

namespace castor {

std::vector<std::vector<const plan::Tensor *>> poisonSchedule(const plan::Plan &plan) {
  std::vector<std::vector<const plan::Tensor *>> after(size_t(plan.kernels_size()));
  auto ranges = plan::computeLiveRanges(plan);
  for (const plan::Tensor &t : plan.tensors()) {
    if (t.kind() != plan::Tensor::ACTIVATION && t.kind() != plan::Tensor::INPUT)
      continue;
    int64_t end = ranges[t.id()].end;
    if (end >= 0 && end < plan.kernels_size())
      after[size_t(end)].push_back(&t);
  }
  return after;
}

} // namespace castor
