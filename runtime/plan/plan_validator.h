// Validation of a plan before any memory is touched.
//
// validatePlan checks, in order: the format version; every tensor (known dtype and kind,
// non-negative shape, byte size == element count x dtype size, offset aligned to
// kArenaAlignment, [offset, offset + bytes) inside the arena); every kernel (tensor ids exist,
// the op one of the registry's, ops.def; its operand count, dtypes, attributes and shapes, the latter
// through the shared rules of castor/shape_rules.h); that no kernel reads an activation before
// one writes it; the parameter table and the bindings; and that no two tensors that are live at
// the same time overlap in the arena. The first problem found is returned; it names the kernel
// or tensor concerned.
#pragma once

#include "castor/status.h"
#include "plan/op_registry.h"
#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace castor::plan {

Status validatePlan(const Plan &plan);

// The ops the validator has a rule for (every op of ops.def; a runtime test checks it).
std::vector<OpId> opsWithRules();

// When a tensor occupies its arena slot, as kernel indices (inclusive). -1 means "from before
// the first kernel" (inputs, parameters, state); kernels_size() means "until after the last"
// (outputs, parameters, state). An activation lives from the kernel that first writes it to the last kernel
// that reads it (or its writer, when nothing reads it).
struct LiveRange {
  int64_t begin = 0;
  int64_t end = 0;
};
// A view (Tensor.view_of) shares its source's live range, and both share the range of every
// other view of the same bytes.
std::unordered_map<uint32_t, LiveRange> computeLiveRanges(const Plan &plan);

// The tensors that views join into one buffer, each mapped to the buffer's owner (the tensor
// no view_of leads out of). Tensors outside every view group are absent.
std::unordered_map<uint32_t, uint32_t> viewRoots(const Plan &plan);

// "kernel #3 (conv2d 'layer1.0.conv1')"
std::string describeKernel(const Plan &plan, int index);

} // namespace castor::plan
