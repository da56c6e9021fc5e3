// The state check: whether a session's training state (every parameter, optimizer moment,
// BatchNorm running statistic and loss-scaler field) holds only finite values. Run before each
// save, after each load and at the end of a run, so that a checkpoint is never written with a
// value it cannot train on, and a broken one is never trained from. One call of the backend's
// firstNonFinite over the state's tensors: on a device backend one launch and a count per tensor.
#pragma once

#include "castor/status.h"
#include "core/session.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::train {

// The tensors the state check covers, with the names a state file gives them (the parameter
// names, e.g. "layer1.0.bn1.running_var", "fc.weight.exp_avg"), in the plan's order. The
// compiler's constants (castor.constant.N) are left out: they are the plan's, not the run's,
// and may rightly hold an infinity (an attention mask).
struct StateTensors {
  std::vector<const plan::Tensor *> tensors;
  std::vector<std::string> names;
};
StateTensors stateTensors(const plan::Plan &plan);

// The first state tensor holding an inf or NaN.
struct NonFiniteState {
  std::string name;
  int64_t count = 0;    // its non-finite values
  int64_t elements = 0; // all its values
  // "a non-finite value in 'NAME' (K of N values)"
  std::string describe() const;
};

// Nothing when every value of the state is finite.
Expected<std::optional<NonFiniteState>> findNonFiniteState(Session &session);

} // namespace castor::train
