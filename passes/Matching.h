// Small matchers the fusion passes share.
#pragma once

#include "mlir/IR/Value.h"
#include "llvm/Support/Casting.h"

namespace castor {

// The only user of `v` when it is an OpTy; null when `v` has another user or none.
template <typename OpTy> OpTy singleUser(mlir::Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return llvm::dyn_cast<OpTy>(*v.getUsers().begin());
}

} // namespace castor
