// The values each mode option of the compiler takes, said once: the pass that reads a mode
// and CompileOptions::validate (castor compile, the registered pipelines) check it against
// the same list, each naming the option as its user spells it.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace castor::choices {

inline constexpr llvm::StringLiteral kPrecisions[] = {"fp32", "fp16", "bf16"};
// castor-autocast's: an fp32 step has no casts to insert.
inline constexpr llvm::StringLiteral kLowPrecisions[] = {"fp16", "bf16"};
inline constexpr llvm::StringLiteral kFuseModes[] = {"auto", "patterns", "none"};
inline constexpr llvm::StringLiteral kBatchNormForms[] = {"as-exported", "train", "frozen"};
inline constexpr llvm::StringLiteral kLossScaleModes[] = {"dynamic", "static", "guard", "none"};
inline constexpr llvm::StringLiteral kRecomputePolicies[] = {"none", "cheap", "auto"};
inline constexpr llvm::StringLiteral kOptimizers[] = {"sgd", "adamw", "none"};
inline constexpr llvm::StringLiteral kSchedules[] = {"constant", "step", "cosine"};
inline constexpr llvm::StringLiteral kTargets[] = {"cpu", "cuda"};

// Empty when `value` is one of `allowed`; else "<option> must be a, b or c".
inline std::string checkChoice(llvm::StringRef option, llvm::StringRef value,
                               llvm::ArrayRef<llvm::StringLiteral> allowed) {
  if (llvm::is_contained(allowed, value))
    return {};
  std::string message = option.str() + " must be ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0)
      message += i + 1 == allowed.size() ? " or " : ", ";
    message += allowed[i].str();
  }
  return message;
}

} // namespace castor::choices
