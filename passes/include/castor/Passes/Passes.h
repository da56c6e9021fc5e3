// Castor's passes, declared in Passes.td.
#pragma once

#include "castor/Dialect/CastorDialect.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace castor {

#define GEN_PASS_DECL
#include "castor/Passes/Passes.h.inc"

// Patterns of castor-cast-cleanup, for pipelines that combine them with others.
void populateCastCleanupPatterns(mlir::RewritePatternSet &patterns);

// A size such as "6GiB", "512MiB", "1.5GB" or "1000000" in bytes; 0 when `text` is not one.
uint64_t parseByteSize(llvm::StringRef text);

// The rules of castor-loss-scale's and castor-recompute's options, which the passes apply and
// CompileOptions::validate applies before building a pipeline: empty when they hold, else
// what is wrong.
std::string checkLossScaleOptions(llvm::StringRef mode, double init);
std::string checkRecomputeOptions(llvm::StringRef policy, llvm::StringRef memoryBudget);

#define GEN_PASS_REGISTRATION
#include "castor/Passes/Passes.h.inc"

} // namespace castor
