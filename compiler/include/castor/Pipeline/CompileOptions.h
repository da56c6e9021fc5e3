// What the compile pipeline is asked to do: every option of `castor compile` that shapes the
// compiled step (declared once, in CompileOptions.def), and the one check of them all
// (validate). castor compile fills it from its flags, castor-opt's registered pipelines from
// their options; both declare them from the same table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace castor {

struct CompileOptions {
  // The members, their defaults and what each does: CompileOptions.def.
#define CASTOR_OPTION_MEMBER(T, MEMBER, FLAG, INIT, DESC) T MEMBER = INIT;
#define CASTOR_SHARED_OPTION CASTOR_OPTION_MEMBER
#define CASTOR_INFERENCE_OPTION CASTOR_OPTION_MEMBER
#define CASTOR_TRAIN_OPTION CASTOR_OPTION_MEMBER
#define CASTOR_PIPELINE_TRAIN_OPTION CASTOR_OPTION_MEMBER
#define CASTOR_TOOL_OPTION CASTOR_OPTION_MEMBER
#include "castor/Pipeline/CompileOptions.def"
#undef CASTOR_OPTION_MEMBER

  // Empty when the options are valid together; else the first problem, naming the flags of
  // castor compile (which the pipelines' options share).
  std::string validate() const;

  // Derived from valid options.
  bool mixedPrecision() const { return precision != "fp32"; }
  bool fuses() const { return fuse != "none"; }         // the pattern fusions
  bool generatesKernels() const { return fuse == "auto"; } // and castor-fuse-elementwise
  uint64_t workspaceBytes() const; // 0: auto
  struct LossScaling {
    std::string mode; // dynamic, static, guard or none
    double init;
  };
  // nullopt when lossScale is static:S without a number S.
  std::optional<LossScaling> lossScaling() const;
};

} // namespace castor
