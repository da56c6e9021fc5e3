// The poison schedule of a plan (BackendOptions::poison, CASTOR_POISON=1), the same on every
// backend: after kernel i, the slots of the activations and inputs whose last use it is get NaN
// bytes, so that a later read of a slot the planner reused shows up as NaN.
#pragma once

#include "plan/plan.h"

#include <vector>

namespace castor {

// Entry i: the tensors to poison after kernel i (pointers into `plan`).
std::vector<std::vector<const plan::Tensor *>> poisonSchedule(const plan::Plan &plan);

} // namespace castor
