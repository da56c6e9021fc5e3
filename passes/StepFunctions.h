// The functions of a Castor module that passes work on, looked up once with one message each.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace castor {

// @forward, or null after an error "no @forward function<what>" on the module.
inline mlir::func::FuncOp forwardFunction(mlir::ModuleOp module, llvm::StringRef what = "") {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    module.emitError("no @forward function") << what;
  return forward;
}

// @train_step, or null after an error that names the pass that makes it.
inline mlir::func::FuncOp trainStepFunction(mlir::ModuleOp module) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!step)
    module.emitError("no @train_step: run castor-make-train-step first");
  return step;
}

} // namespace castor
