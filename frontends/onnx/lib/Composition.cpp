// Builders shared by the composing converters (see Composition.h).
#include "Composition.h"

using namespace mlir;

namespace castor::onnx_import {

std::string shapeText(RankedTensorType t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.getRank(); ++i)
    s += (i ? ", " : "") + std::to_string(t.getDimSize(i));
  return s + "]";
}

FailureOr<Value> reshapeTo(NodeImporter &n, Value x, ArrayRef<int64_t> dims) {
  auto type = RankedTensorType::get(dims, typeOf(x).getElementType());
  if (type == x.getType())
    return x;
  return resultOf(n.build<ReshapeOp>(type, {x}));
}

FailureOr<Value> transposeBy(NodeImporter &n, Value x, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == int64_t(i);
  if (identity)
    return x;
  TransposeOp::Properties p;
  p.perm = Builder(n.context()).getDenseI64ArrayAttr(perm);
  return resultOf(n.create<TransposeOp>({x}, p));
}

FailureOr<Value> repeatAxes(NodeImporter &n, Value x, ArrayRef<int64_t> factors, bool repeatOuter) {
  RankedTensorType type = typeOf(x);
  SmallVector<int64_t> view, target, out;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    const int64_t size = type.getDimSize(d), f = factors[size_t(d)];
    if (f != 1 && repeatOuter)
      view.push_back(1), target.push_back(f);
    view.push_back(size), target.push_back(size);
    if (f != 1 && !repeatOuter)
      view.push_back(1), target.push_back(f);
    out.push_back(size * f);
  }
  if (view.size() == size_t(type.getRank()))
    return x;
  auto v = reshapeTo(n, x, view);
  auto zeros = n.splatOf(RankedTensorType::get(target, type.getElementType()), 0.0);
  if (failed(v) || failed(zeros))
    return failure();
  auto sum = resultOf(n.create<AddOp>({*v, *zeros}));
  return failed(sum) ? sum : reshapeTo(n, *sum, out);
}

} // namespace castor::onnx_import
