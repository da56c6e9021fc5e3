// Verifiers, inference and folders of the ops in TensorOps.td.
#include "castor/Dialect/CastorOps.h"
#include "castor/Dialect/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace castor;

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  if (getTrainable() && !llvm::isa<FloatType>(getElementTypeOrSelf(getType())))
    return emitOpError("a trainable parameter must have a floating-point element type, got ")
           << getElementTypeOrSelf(getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

// Only a cast to the same type folds: a narrowing round trip changes values.
OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

static LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs, Value rhs,
                                    SmallVectorImpl<Type> &inferred) {
  if (failed(requireSameElementType(loc, {lhs, rhs}, "operands")))
    return failure();
  return appendInferred(loc, shape::broadcast(shapeOf(lhs), shapeOf(rhs)), getElementTypeOrSelf(lhs.getType()),
                        inferred);
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, op.getLhs(), op.getRhs(), inferred);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, op.getLhs(), op.getRhs(), inferred);
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                          SmallVectorImpl<Type> &inferred) {
  return appendInferred(loc, shape::flatten(shapeOf(op.getInput()), static_cast<int64_t>(op.getAxis())),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult ReshapeOp::verify() {
  if (getElementTypeOrSelf(getInput().getType()) != getElementTypeOrSelf(getType()))
    return emitOpError("must keep the element type");
  auto rule = shape::reshape(shapeOf(getInput()), shapeOf(getType()));
  if (!rule)
    return emitOpError(rule.error);
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                         SmallVectorImpl<Type> &inferred) {
  if (op.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  if (failed(requireSameElementType(loc, op.getInputs(), "inputs")))
    return failure();
  std::vector<shape::Shape> shapes;
  for (Value v : op.getInputs())
    shapes.push_back(shapeOf(v));
  return appendInferred(loc, shape::concat(shapes, static_cast<int64_t>(op.getAxis())),
                        getElementTypeOrSelf(op.getInputs().front().getType()), inferred);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                            SmallVectorImpl<Type> &inferred) {
  auto perm = op.getPerm();
  return appendInferred(loc, shape::transpose(shapeOf(op.getInput()), {perm.begin(), perm.end()}),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor op,
                                        SmallVectorImpl<Type> &inferred) {
  auto vec = [](ArrayRef<int64_t> a) { return std::vector<int64_t>(a.begin(), a.end()); };
  return appendInferred(loc,
                        shape::slice(shapeOf(op.getInput()), vec(op.getStarts()), vec(op.getEnds()),
                                     vec(op.getSteps())),
                        getElementTypeOrSelf(op.getInput().getType()), inferred);
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  return success();
}

#define GET_OP_CLASSES
#include "castor/Dialect/TensorOps.cpp.inc"

void CastorDialect::registerTensorOps() {
  addOperations<
#define GET_OP_LIST
#include "castor/Dialect/TensorOps.cpp.inc"
      >();
}
