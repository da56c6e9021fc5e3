// `castor compile --report DIR`: the planned memory of a compiled training step, over its kernels
// and split by kind, with the saved tensors and why each is kept or recomputed (memory.json),
// drawn by castor-plot-memory.py (memory.png, memory.svg) beside it.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace castor::cli {

// Writes DIR/memory.json for `step` (after castor-plan-memory) and, with `picture`, runs the
// plotting script next to the castor executable; an error message, or empty.
std::string writeMemoryReport(mlir::func::FuncOp step, const std::string &dir, const char *argv0, bool picture);

} // namespace castor::cli
