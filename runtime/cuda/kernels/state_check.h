// The state check on the device (Backend::firstNonFinite): how many inf or NaN values each of
// a list of tensors holds, counted in one launch over all of them (the training state: every
// parameter, optimizer moment, running statistic and scaler field), so that checking the state
// before a save costs one kernel and a copy of one count per tensor, not the tensors.
#pragma once

#include "cuda/base/device_ref.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace castor::cuda {

// One tensor of the list: its device bytes as `count` elements of `ref.dt` (any layout: a
// count needs no order; integer dtypes hold no non-finite value and are skipped).
struct StateCheckEntry {
  Ref ref;
  int64_t count = 0;
};

// counts[i] = the non-finite elements of entries[i], for the `n` entries of the device array
// `entries`; `counts` (device, n values) is zeroed first. Enqueued on `s`.
cudaError_t countNonFiniteEach(const StateCheckEntry *entries, int n, unsigned long long *counts, cudaStream_t s);

} // namespace castor::cuda
