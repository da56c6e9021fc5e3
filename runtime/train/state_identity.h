// Which plan a training state belongs to. A state is the values of one plan's state tensors
// (parameters, optimizer moments, running statistics, counters, the loss scaler's fields); a
// plan compiled with another --precision, --loss-scale or --optimizer, or from another model,
// has other ones. The identity is a hash of the plan's state table (every state tensor's name,
// dtype and shape), saved with the state as "castor.plan"; a state whose table differs from
// the plan's is refused in the user's terms (what differs and which flag makes it so), before
// any tensor is loaded.
#pragma once

#include "castor/status.h"
#include "plan/plan.h"
#include "weights/safetensors.h"

#include <string>

namespace castor::train {

inline constexpr char kPlanIdentityKey[] = "castor.plan";

// "fnv1a64:<16 hex digits>" of the plan's state table.
std::string planStateIdentity(const plan::Plan &plan);

// Whether `state` (read from `path`) holds the state tensors of `plan`, each with its dtype and
// shape; else an error saying what differs, e.g. "PATH: this state was saved by a plan with
// different parameters (it has a dynamic loss scaler's state: the plan that saved it trained in
// fp16 or bf16); compile with the same --precision, --loss-scale and --optimizer as that plan,
// or start from its weights alone with --weights".
Status checkStateFitsPlan(const plan::Plan &plan, const weights::TensorFile &state, const std::string &path);

} // namespace castor::train
