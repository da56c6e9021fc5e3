// Small matchers the fusion passes share.
#pragma once

#include "castor/Dialect/CastorOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Casting.h"

#include <optional>

namespace castor {

// The only user of `v` when it is an OpTy; null when `v` has another user or none.
template <typename OpTy> OpTy singleUser(mlir::Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return llvm::dyn_cast<OpTy>(*v.getUsers().begin());
}

// Every OpTy under `root`, collected first so that a rewrite may erase what the walk has passed.
template <typename OpTy> llvm::SmallVector<OpTy> collectOps(mlir::Operation *root) {
  llvm::SmallVector<OpTy> ops;
  root->walk([&](OpTy op) { ops.push_back(op); });
  return ops;
}

// The value of a constant that holds one value (a scalar or a splat).
inline std::optional<double> splatValue(mlir::Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto values = llvm::dyn_cast<mlir::DenseFPElementsAttr>(c.getValue());
  if (!values || !values.isSplat())
    return std::nullopt;
  return values.getSplatValue<llvm::APFloat>().convertToDouble();
}

} // namespace castor
