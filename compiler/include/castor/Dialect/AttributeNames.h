// The discardable attributes by which Castor's passes, the plan emitter and the tools pass
// facts along a function: set by one, read by another, so spelled once. (The names of the
// state and bindings they carry, which the runtime reads too, are castor/state_names.h.)
#pragma once

namespace castor::attr {

// Arguments and results of a step.
inline constexpr char kState[] = "castor.state";          // training state, by its name
inline constexpr char kName[] = "castor.name";            // an input or output binding
inline constexpr char kInit[] = "castor.init";            // a state's initialization (InitAttr)
inline constexpr char kInitValue[] = "castor.init_value"; // ... its value, for fill
inline constexpr char kTrainable[] = "castor.trainable";

// Plan-level form, on ops (castor-select-kernels, castor-plan-views, castor-plan-memory).
inline constexpr char kKernel[] = "castor.kernel";
inline constexpr char kView[] = "castor.view";
inline constexpr char kOffsets[] = "castor.offsets";
// ... and on the function.
inline constexpr char kInputOffsets[] = "castor.input_offsets";
inline constexpr char kArenaBytes[] = "castor.arena_bytes";
inline constexpr char kTensorBytes[] = "castor.tensor_bytes";
inline constexpr char kWorkspaceLimit[] = "castor.workspace_limit";

// castor-recompute: on the function, and on each copy it makes.
inline constexpr char kRecomputePolicy[] = "castor.recompute_policy";
inline constexpr char kRecomputedValues[] = "castor.recomputed_values";
inline constexpr char kRecomputeFlops[] = "castor.recompute_flops";
inline constexpr char kRecomputed[] = "castor.recomputed";
// castor-recompute-elementwise: on the function (its copies carry kRecomputed too).
inline constexpr char kRecomputedInGroups[] = "castor.recomputed_in_groups";
inline constexpr char kRecomputedInGroupsBytes[] = "castor.recomputed_in_groups_bytes"; // their sizes, summed

// On the module, from castor import.
inline constexpr char kBatch[] = "castor.batch";
inline constexpr char kInitSeed[] = "castor.init_seed";

} // namespace castor::attr
