// ONNX ops imported as compositions of castor ops (see ComposedConverters.h).
#include "ComposedConverters.h"

using namespace mlir;

namespace castor::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

std::string shapeText(RankedTensorType t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.getRank(); ++i)
    s += (i ? ", " : "") + std::to_string(t.getDimSize(i));
  return s + "]";
}

// The single result of a created op, or failure.
template <typename OpT> FailureOr<Value> resultOf(FailureOr<OpT> op) {
  if (failed(op))
    return failure();
  return op->getResult();
}

} // namespace

// relu(x) + slope * (x - relu(x)): x - relu(x) is min(x, 0) exactly (x - x or x - 0), so the
// forward is PRelu's in every float type, the derivative in x is 1 where x > 0 and the slope
// elsewhere (PyTorch's prelu backward), and the slope's gradient is the sum of dy min(x, 0) over
// what it is broadcast over (the mul's VJP).
LogicalResult convertPRelu(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0);
  // A trained slope; --init kaiming starts it at 1 (Multiplier's seeded value: the identity).
  auto slope = n.input(1, ParamRole::Multiplier);
  if (failed(x) || failed(slope))
    return failure();
  RankedTensorType xType = typeOf(*x), slopeType = typeOf(*slope);
  auto relu = resultOf(n.create<ReluOp>({*x}));
  auto minusOne = n.splatOf(RankedTensorType::get({}, xType.getElementType()), -1.0);
  if (failed(relu) || failed(minusOne))
    return failure();
  auto negatedRelu = resultOf(n.create<MulOp>({*relu, *minusOne}));
  if (failed(negatedRelu))
    return failure();
  auto negativePart = resultOf(n.create<AddOp>({*x, *negatedRelu}));
  if (failed(negativePart))
    return failure();
  auto scaled = resultOf(n.create<MulOp>({*negativePart, *slope}));
  if (failed(scaled))
    return failure();
  // ONNX broadcasts the slope to x one way only: a slope that widens x is not PRelu's.
  if (scaled->getType() != xType)
    return n.fail("the slope's shape " + shapeText(slopeType) + " does not broadcast to the input's " +
                  shapeText(xType));
  auto y = resultOf(n.create<AddOp>({*relu, *scaled}));
  return failed(y) ? failure() : n.setOutput(0, *y);
}

} // namespace castor::onnx_import
