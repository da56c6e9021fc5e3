// One converter per supported ONNX op type (default domain, opsets 13 to 21).
#include "ComposedConverters.h"
#include "NodeImporter.h"
#include "TensorData.h"
#include "castor/Dialect/ShapeInference.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace castor::onnx_import {
namespace {

// Expands ONNX's 2-D pads [top, left, bottom, right] (already in that order) and checks
// auto_pad, which Castor supports only as NOTSET or VALID.
LogicalResult windowAttrs(NodeImporter &n, std::vector<int64_t> &pads) {
  auto autoPad = n.attrString("auto_pad", "NOTSET");
  if (failed(autoPad))
    return failure();
  if (*autoPad != "NOTSET" && *autoPad != "VALID")
    return n.fail("auto_pad=" + *autoPad + " is not supported; export with explicit pads");
  auto p = n.attrInts("pads", {0, 0, 0, 0});
  if (failed(p))
    return failure();
  if (p->size() != 4)
    return n.fail("only 2-D windows are supported (pads has " + std::to_string(p->size()) + " values)");
  pads = *p;
  return success();
}

LogicalResult need2d(NodeImporter &n, const std::vector<int64_t> &v, const char *what) {
  if (v.size() != 2)
    return n.fail(std::string("only 2-D windows are supported (") + what + " has " + std::to_string(v.size()) +
                  " values)");
  return success();
}

LogicalResult convertConv(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)) ||
      failed(n.checkAttrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})))
    return failure();
  auto x = n.input(0), w = n.input(1, ParamRole::ConvWeight);
  if (failed(x) || failed(w))
    return failure();
  auto wType = llvm::cast<RankedTensorType>(w->getType());
  if (wType.getRank() == 3)
    return convertConv1d(n, *x, *w);
  if (wType.getRank() != 4)
    return n.fail("only 1-D and 2-D convolutions are supported (the filter has rank " +
                  std::to_string(wType.getRank()) + ")");
  std::vector<int64_t> pads;
  auto strides = n.attrInts("strides", {1, 1});
  auto dilations = n.attrInts("dilations", {1, 1});
  auto group = n.attrInt("group", 1);
  auto kernel = n.attrInts("kernel_shape", {wType.getDimSize(2), wType.getDimSize(3)});
  if (failed(windowAttrs(n, pads)) || failed(strides) || failed(dilations) || failed(group) || failed(kernel) ||
      failed(need2d(n, *strides, "strides")) || failed(need2d(n, *dilations, "dilations")))
    return failure();
  if (*kernel != std::vector<int64_t>{wType.getDimSize(2), wType.getDimSize(3)})
    return n.fail("kernel_shape does not match the filter's shape");
  SmallVector<Value> operands{*x, *w};
  if (n.hasInput(2)) {
    auto b = n.input(2, ParamRole::ConvBias);
    if (failed(b))
      return failure();
    operands.push_back(*b);
  }
  Builder b(n.context());
  Conv2dOp::Properties p;
  p.strides = b.getDenseI64ArrayAttr(*strides);
  p.pads = b.getDenseI64ArrayAttr(pads);
  p.dilations = b.getDenseI64ArrayAttr(*dilations);
  p.groups = b.getI64IntegerAttr(*group);
  auto op = n.create<Conv2dOp>(operands, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertBatchNorm(NodeImporter &n) {
  if (failed(n.checkArity(5, 5)) || failed(n.checkAttrs({"epsilon", "momentum", "training_mode", "spatial"})))
    return failure();
  auto eps = n.attrFloat("epsilon", 1e-5);
  auto momentum = n.attrFloat("momentum", 0.9);
  // Before opset 14 a training-mode BatchNormalization is recognisable by its extra outputs.
  auto training = n.attrInt("training_mode", n.node().output_size() > 1 ? 1 : 0);
  if (failed(eps) || failed(momentum) || failed(training))
    return failure();
  auto x = n.input(0), scale = n.input(1, ParamRole::NormScale), bias = n.input(2, ParamRole::NormBias);
  auto mean = n.input(3, ParamRole::RunningMean), var = n.input(4, ParamRole::RunningVar);
  if (failed(x) || failed(scale) || failed(bias) || failed(mean) || failed(var))
    return failure();
  Builder b(n.context());
  // A training-mode batch norm without buffers (F.batch_norm with running statistics None, as
  // timm's weight-standardised convolutions normalise their filters): the exporter passes
  // computed values as its "running statistics", which nothing keeps; it normalises with the
  // batch statistics and tracks nothing.
  const bool untracked = *training && !n.isInitializer(3) && !n.isInitializer(4);
  if (untracked) {
    for (int i = 1; i < n.node().output_size(); ++i)
      if (failed(n.requireUnused(i, "running statistics")))
        return failure();
    BatchNormTrainingOp::Properties p;
    p.epsilon = b.getF64FloatAttr(*eps);
    p.momentum = b.getF64FloatAttr(0.0);
    auto op = n.create<BatchNormTrainingOp>({*x, *scale, *bias}, p);
    return failed(op) ? failure() : n.setOutput(0, op->getResult(0));
  }
  if (*training) {
    // ONNX's running-statistics outputs: Castor updates running statistics in the training
    // step it builds, so the forward graph must not read them.
    for (int i = 1; i < n.node().output_size(); ++i)
      if (failed(n.requireUnused(i, "running statistics")))
        return failure();
    BatchNormTrainingOp::Properties p;
    p.epsilon = b.getF64FloatAttr(*eps);
    // ONNX keeps running = running * momentum + batch * (1 - momentum); PyTorch the opposite.
    p.momentum = b.getF64FloatAttr(decimalOfFloat(float(1.0 - *momentum)));
    // The running statistics ride along as operands: the training step updates them.
    auto op = n.create<BatchNormTrainingOp>({*x, *scale, *bias, *mean, *var}, p);
    return failed(op) ? failure() : n.setOutput(0, op->getResult(0));
  }
  BatchNormInferenceOp::Properties p;
  p.epsilon = b.getF64FloatAttr(*eps);
  auto op = n.create<BatchNormInferenceOp>({*x, *scale, *bias, *mean, *var}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

template <typename OpT>
LogicalResult convertUnary(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0);
  if (failed(x))
    return failure();
  auto op = n.create<OpT>({*x});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// A unary element-wise op (ElementwiseOps.td) whose ONNX attributes are floats named as the
// dialect op's (HardSigmoid's alpha and beta); an absent one takes the dialect's default, ONNX's.
template <typename OpT>
LogicalResult convertElementwise(NodeImporter &n) {
  llvm::SmallVector<llvm::StringRef> names(OpT::getAttributeNames().begin(), OpT::getAttributeNames().end());
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs(llvm::ArrayRef<llvm::StringRef>(names))))
    return failure();
  auto x = n.input(0);
  if (failed(x))
    return failure();
  Builder b(n.context());
  llvm::SmallVector<NamedAttribute> given;
  for (llvm::StringRef name : names) {
    auto v = n.attrFloat(name.str(), std::nan(""));
    if (failed(v))
      return failure();
    if (!std::isnan(*v))
      given.push_back(b.getNamedAttr(name, b.getF64FloatAttr(*v)));
  }
  typename OpT::Properties p;
  if (failed(OpT::setPropertiesFromAttr(p, b.getDictionaryAttr(given), [&] { return mlir::emitError(n.loc()); })))
    return failure();
  auto op = n.create<OpT>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// `role`: what an initializer operand is to the seeded initialisation (--init kaiming).
template <typename OpT, ParamRole role>
LogicalResult convertBinary(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto a = n.input(0, role), b = n.input(1, role);
  if (failed(a) || failed(b))
    return failure();
  auto op = n.create<OpT>({*a, *b});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertClip(NodeImporter &n) {
  if (failed(n.checkArity(1, 3)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0);
  if (failed(x))
    return failure();
  Builder b(n.context());
  ClipOp::Properties p;
  for (int i : {1, 2}) {
    if (!n.hasInput(i))
      continue;
    auto v = n.constDoubles(i);
    if (failed(v))
      return failure();
    if (v->size() != 1)
      return n.fail("clip bounds must be scalars");
    (i == 1 ? p.min : p.max) = b.getF64FloatAttr(v->front());
  }
  auto op = n.create<ClipOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertGelu(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({"approximate"})))
    return failure();
  auto x = n.input(0);
  auto approximate = n.attrString("approximate", "none");
  if (failed(x) || failed(approximate))
    return failure();
  if (*approximate != "none" && *approximate != "tanh")
    return n.fail("approximate must be \"none\" or \"tanh\", not \"" + *approximate + "\"");
  GeluOp::Properties p;
  if (*approximate == "tanh")
    p.tanh = UnitAttr::get(n.context());
  auto op = n.create<GeluOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// The window attributes MaxPool and AveragePool share, as castor attributes.
struct PoolWindow {
  DenseI64ArrayAttr kernel, strides, pads, dilations;
  BoolAttr ceilMode;
};

FailureOr<PoolWindow> poolWindow(NodeImporter &n) {
  std::vector<int64_t> pads;
  auto kernel = n.attrInts("kernel_shape", {});
  auto strides = n.attrInts("strides", {1, 1});
  auto dilations = n.attrInts("dilations", {1, 1});
  auto ceil = n.attrInt("ceil_mode", 0);
  if (failed(windowAttrs(n, pads)) || failed(kernel) || failed(strides) || failed(dilations) || failed(ceil) ||
      failed(need2d(n, *kernel, "kernel_shape")) || failed(need2d(n, *strides, "strides")) ||
      failed(need2d(n, *dilations, "dilations")))
    return failure();
  Builder b(n.context());
  return PoolWindow{b.getDenseI64ArrayAttr(*kernel), b.getDenseI64ArrayAttr(*strides), b.getDenseI64ArrayAttr(pads),
                    b.getDenseI64ArrayAttr(*dilations), b.getBoolAttr(*ceil)};
}

LogicalResult convertMaxPool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) ||
      failed(n.checkAttrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"})) ||
      failed(n.requireUnused(1, "indices")))
    return failure();
  auto window = poolWindow(n);
  auto order = n.attrInt("storage_order", 0);
  if (failed(window) || failed(order))
    return failure();
  if (*order != 0)
    return n.fail("storage_order=1 is not supported");
  auto x = n.input(0);
  if (failed(x))
    return failure();
  MaxPool2dOp::Properties p;
  p.kernel = window->kernel;
  p.strides = window->strides;
  p.pads = window->pads;
  p.dilations = window->dilations;
  p.ceil_mode = window->ceilMode;
  auto op = n.create<MaxPool2dOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertAveragePool(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) ||
      failed(n.checkAttrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"})))
    return failure();
  auto window = poolWindow(n);
  auto includePad = n.attrInt("count_include_pad", 0);
  if (failed(window) || failed(includePad))
    return failure();
  for (int64_t d : window->dilations.asArrayRef())
    if (d != 1)
      return n.fail("dilated average pooling is not supported");
  auto x = n.input(0);
  if (failed(x))
    return failure();
  AvgPool2dOp::Properties p;
  p.kernel = window->kernel;
  p.strides = window->strides;
  p.pads = window->pads;
  p.ceil_mode = window->ceilMode;
  p.count_include_pad = Builder(n.context()).getBoolAttr(*includePad);
  auto op = n.create<AvgPool2dOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertGlobalAveragePool(NodeImporter &n) { return convertUnary<GlobalAvgPoolOp>(n); }

LogicalResult convertFlatten(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({"axis"})))
    return failure();
  auto x = n.input(0);
  auto axis = n.attrInt("axis", 1);
  if (failed(x) || failed(axis))
    return failure();
  FlattenOp::Properties p;
  p.axis = Builder(n.context()).getI64IntegerAttr(*axis);
  auto op = n.create<FlattenOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertReshape(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({"allowzero"})))
    return failure();
  auto x = n.input(0, n.viewedRole());
  auto target = n.constInts(1);
  auto allowZero = n.attrInt("allowzero", 0);
  if (failed(x) || failed(target) || failed(allowZero))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  // An export with a fixed batch bakes it into reshape targets; rebind it to --batch.
  if (n.declaredBatch() > 0 && n.declaredBatch() != n.batch() && !target->empty() &&
      target->front() == n.declaredBatch() && type.getRank() > 0 && type.getDimSize(0) == n.batch())
    target->front() = n.batch();
  auto rule = shape::reshapeTarget(shapeOf(type), *target, *allowZero != 0);
  if (!rule)
    return n.fail(rule.error);
  auto op = n.build<ReshapeOp>(RankedTensorType::get(rule.shape, type.getElementType()), {*x});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// Axes of Unsqueeze and Squeeze: input 1 from opset 13, the attribute before.
// The constant axes of input `i` (Slice's and Pad's), or 0 .. count - 1 when it is absent.
FailureOr<std::vector<int64_t>> axesOrAll(NodeImporter &n, int i, size_t count) {
  if (n.hasInput(i))
    return n.constInts(i);
  std::vector<int64_t> axes(count);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

FailureOr<std::vector<int64_t>> axesInput(NodeImporter &n, bool &given) {
  given = n.hasInput(1) || n.hasAttr("axes");
  if (n.hasInput(1))
    return n.constInts(1);
  return n.attrInts("axes", {});
}

template <bool Unsqueeze>
LogicalResult convertSqueezeOrUnsqueeze(NodeImporter &n) {
  if (failed(n.checkArity(1, 2)) || failed(n.checkAttrs({"axes"})))
    return failure();
  auto x = n.input(0, n.viewedRole());
  bool given;
  auto axes = axesInput(n, given);
  if (failed(x) || failed(axes))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  auto rule = Unsqueeze ? shape::unsqueeze(shapeOf(type), *axes) : shape::squeeze(shapeOf(type), *axes, given);
  if (!rule)
    return n.fail(rule.error);
  auto op = n.build<ReshapeOp>(RankedTensorType::get(rule.shape, type.getElementType()), {*x});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// Div and Sub by a value known at import (a scale, a keep probability, GELU's sqrt(2)) become
// a product with its reciprocal and a sum with its negation.
template <bool IsDiv>
LogicalResult convertByKnown(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  const char *op = IsDiv ? "Div" : "Sub";
  if (!n.isImportConstant(1))
    return n.fail(std::string(op) + " by a tensor computed from the data or by a weight is not supported; "
                                    "only by a constant or a value folded from shapes");
  auto x = n.input(0);
  auto values = n.constDoubles(1);
  if (failed(x) || failed(values))
    return failure();
  auto xType = llvm::cast<RankedTensorType>(x->getType());
  SmallVector<int64_t> dims;
  for (int64_t d : n.constDims(1))
    dims.push_back(d);
  if (values->size() > 256)
    return n.fail(std::string(op) + " by a known tensor of " + std::to_string(values->size()) +
                  " elements is not supported (at most 256)");
  for (double &v : *values)
    v = IsDiv ? 1.0 / v : -v;
  auto c = n.constantOf(RankedTensorType::get(dims, xType.getElementType()), *values);
  if (failed(c))
    return failure();
  FailureOr<Value> result = failure();
  if constexpr (IsDiv) {
    auto m = n.create<MulOp>({*x, *c});
    if (succeeded(m))
      result = m->getResult();
  } else {
    auto a = n.create<AddOp>({*x, *c});
    if (succeeded(a))
      result = a->getResult();
  }
  return failed(result) ? failure() : n.setOutput(0, *result);
}

// Div by a known value is a product with its reciprocal (convertByKnown); by a computed tensor
// (F.normalize's division by the norm, a weight), a * reciprocal(b), broadcasting as ONNX does:
// two roundings where a division has one, within an ulp of a / b.
LogicalResult convertDiv(NodeImporter &n) {
  if (n.isImportConstant(1))
    return convertByKnown<true>(n);
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto a = n.input(0), b = n.input(1);
  if (failed(a) || failed(b))
    return failure();
  if (!llvm::isa<FloatType>(llvm::cast<RankedTensorType>(b->getType()).getElementType()))
    return n.fail("Div by a computed integer tensor is not supported");
  auto inverse = n.create<ReciprocalOp>({*b});
  if (failed(inverse))
    return failure();
  auto op = n.create<MulOp>({*a, inverse->getResult()});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// Sub by a known value is a sum (convertByKnown); of a computed tensor, a + b * (-1), exact in
// every float type.
LogicalResult convertSub(NodeImporter &n) {
  if (n.isImportConstant(1))
    return convertByKnown<false>(n);
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto a = n.input(0, ParamRole::Offset), b = n.input(1, ParamRole::Offset);
  if (failed(a) || failed(b))
    return failure();
  auto bType = llvm::cast<RankedTensorType>(b->getType());
  auto minusOne = n.splatOf(RankedTensorType::get({}, bType.getElementType()), -1.0);
  if (failed(minusOne))
    return failure();
  auto negated = n.create<MulOp>({*b, *minusOne});
  if (failed(negated))
    return failure();
  auto sum = n.create<AddOp>({*a, negated->getResult()});
  return failed(sum) ? failure() : n.setOutput(0, sum->getResult());
}

LogicalResult convertTranspose(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({"perm"})))
    return failure();
  // A transposed weight is a linear layer's (exporters write nn.Linear as Transpose + MatMul).
  auto x = n.input(0, ParamRole::LinearWeight);
  if (failed(x))
    return failure();
  int64_t rank = llvm::cast<RankedTensorType>(x->getType()).getRank();
  std::vector<int64_t> reversed(rank);
  for (int64_t i = 0; i < rank; ++i)
    reversed[i] = rank - 1 - i;
  auto perm = n.attrInts("perm", reversed);
  if (failed(perm))
    return failure();
  TransposeOp::Properties p;
  p.perm = Builder(n.context()).getDenseI64ArrayAttr(*perm);
  auto op = n.create<TransposeOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// A slice of every dimension: ONNX's starts/ends/axes/steps with the dimensions it leaves out
// taken whole.
FailureOr<Value> sliceOf(NodeImporter &n, Value x, ArrayRef<int64_t> axes, ArrayRef<int64_t> starts,
                         ArrayRef<int64_t> ends, ArrayRef<int64_t> steps) {
  int64_t rank = llvm::cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> s(rank, 0), e(rank, std::numeric_limits<int64_t>::max()), st(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax < 0 || ax >= rank || seen[ax])
      return n.fail("axis " + std::to_string(axes[i]) + " is out of range or repeated");
    seen[ax] = true;
    s[ax] = starts[i];
    e[ax] = ends[i];
    st[ax] = steps[i];
  }
  Builder b(n.context());
  SliceOp::Properties p;
  p.starts = b.getDenseI64ArrayAttr(s);
  p.ends = b.getDenseI64ArrayAttr(e);
  p.steps = b.getDenseI64ArrayAttr(st);
  auto op = n.create<SliceOp>({x}, p);
  if (failed(op))
    return failure();
  return op->getResult();
}

LogicalResult convertSlice(NodeImporter &n) {
  if (failed(n.checkArity(3, 5)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0);
  auto starts = n.constInts(1), ends = n.constInts(2);
  if (failed(x) || failed(starts) || failed(ends))
    return failure();
  std::vector<int64_t> steps(starts->size(), 1);
  auto given = axesOrAll(n, 3, starts->size());
  if (failed(given))
    return failure();
  const std::vector<int64_t> &axes = *given;
  if (n.hasInput(4)) {
    auto st = n.constInts(4);
    if (failed(st))
      return failure();
    steps = *st;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() || steps.size() != starts->size())
    return n.fail("starts, ends, axes and steps differ in length");
  auto y = sliceOf(n, *x, axes, *starts, *ends, steps);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

// Split: each output a slice along `axis`, of the sizes the `split` input (opset 13 on) or
// attribute gives, else parts of ceil(extent / outputs) with a smaller last one (opset 18's rule,
// which equal parts satisfy); each slice's gradient is slice_backward's, their sum the input's.
LogicalResult convertSplit(NodeImporter &n) {
  if (failed(n.checkArity(1, 2)) || failed(n.checkAttrs({"axis", "split", "num_outputs"})))
    return failure();
  auto x = n.input(0);
  auto axisAttr = n.attrInt("axis", 0);
  if (failed(x) || failed(axisAttr))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  const int64_t rank = type.getRank(), axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
  if (axis < 0 || axis >= rank)
    return n.fail("axis " + std::to_string(*axisAttr) + " is out of range for an input of rank " +
                  std::to_string(rank));
  const int64_t extent = type.getDimSize(axis), outputs = n.node().output_size();
  std::vector<int64_t> sizes;
  if (n.hasInput(1) || n.hasAttr("split")) {
    auto given = n.hasInput(1) ? n.constInts(1) : n.attrInts("split", {});
    if (failed(given))
      return failure();
    sizes = *given;
  } else {
    auto parts = n.attrInt("num_outputs", outputs);
    if (failed(parts))
      return failure();
    if (*parts != outputs)
      return n.fail("num_outputs is " + std::to_string(*parts) + " but the node has " + std::to_string(outputs) +
                    " outputs");
    const int64_t part = (extent + outputs - 1) / outputs;
    for (int64_t i = 0; i < outputs; ++i)
      sizes.push_back(std::min(part, extent - i * part));
  }
  if (int64_t(sizes.size()) != outputs)
    return n.fail("it gives " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size <= 0)
      return n.fail("an output of size " + std::to_string(size) + " along axis " + std::to_string(axis) +
                    " is not supported");
    total += size;
  }
  if (total != extent)
    return n.fail("its sizes add up to " + std::to_string(total) + ", not the axis' extent " + std::to_string(extent));
  int64_t start = 0;
  for (int64_t i = 0; i < outputs; start += sizes[size_t(i)], ++i) {
    if (n.node().output(int(i)).empty())
      continue;
    auto y = sliceOf(n, *x, {axis}, {start}, {start + sizes[size_t(i)]}, {1});
    if (failed(y) || failed(n.setOutput(int(i), *y)))
      return failure();
  }
  return success();
}

// Rows of a tensor at known indices that are no single range (Swin's relative position bias: a
// trained table read through an index table): the product of a one-hot matrix of the indices
// with the rows, whose gradient (the transposed product) sums the gradients of repeated rows.
constexpr int64_t kMaxOneHotElements = int64_t(1) << 22;

FailureOr<Value> gatherRowsByProduct(NodeImporter &n, Value x, const std::vector<int64_t> &idx,
                                     const std::vector<int64_t> &indexDims) {
  auto type = llvm::cast<RankedTensorType>(x.getType());
  const int64_t extent = type.getDimSize(0), inner = type.getNumElements() / std::max<int64_t>(extent, 1);
  const int64_t count = int64_t(idx.size());
  if (count * extent > kMaxOneHotElements)
    return n.fail("Gather of a computed tensor at " + std::to_string(count) + " indices of " + std::to_string(extent) +
                  " rows that are no single range is not supported (its one-hot matrix would exceed " +
                  std::to_string(kMaxOneHotElements) + " elements)");
  Type element = type.getElementType();
  Value rows = x;
  if (type.getRank() != 2) {
    auto r = n.build<ReshapeOp>(RankedTensorType::get({extent, inner}, element), {x});
    if (failed(r))
      return failure();
    rows = r->getResult();
  }
  std::vector<double> oneHot(size_t(count * extent), 0.0);
  for (int64_t j = 0; j < count; ++j)
    oneHot[size_t(j * extent + idx[size_t(j)])] = 1.0;
  auto selector = n.constantOf(RankedTensorType::get({count, extent}, element), oneHot);
  if (failed(selector))
    return failure();
  Builder bld(n.context());
  GemmOp::Properties props;
  props.trans_a = bld.getBoolAttr(false);
  props.trans_b = bld.getBoolAttr(false);
  props.alpha = bld.getF64FloatAttr(1.0);
  props.beta = bld.getF64FloatAttr(1.0);
  auto product = n.create<GemmOp>({*selector, rows}, props);
  if (failed(product))
    return failure();
  SmallVector<int64_t> dims(indexDims.begin(), indexDims.end());
  dims.append(type.getShape().begin() + 1, type.getShape().end());
  auto outType = RankedTensorType::get(dims, element);
  if (outType == product->getResult().getType())
    return product->getResult();
  auto out = n.build<ReshapeOp>(outType, {product->getResult()});
  if (failed(out))
    return failure();
  return out->getResult();
}

// The same along any axis (LeViT's and EfficientFormer's attention biases, a table [heads,
// offsets] read at [N, N] offset indices along axis 1): the axis moved first, the rows gathered,
// the index dimensions moved back to where the axis was.
FailureOr<Value> gatherByProduct(NodeImporter &n, Value x, int64_t axis, const std::vector<int64_t> &idx,
                                 const std::vector<int64_t> &indexDims) {
  if (axis == 0)
    return gatherRowsByProduct(n, x, idx, indexDims);
  auto type = llvm::cast<RankedTensorType>(x.getType());
  const int64_t rank = type.getRank(), k = int64_t(indexDims.size());
  SmallVector<int64_t> first = {axis};
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      first.push_back(d);
  Builder b(n.context());
  TransposeOp::Properties toFront;
  toFront.perm = b.getDenseI64ArrayAttr(first);
  auto moved = n.create<TransposeOp>({x}, toFront);
  if (failed(moved))
    return failure();
  auto rows = gatherRowsByProduct(n, moved->getResult(), idx, indexDims);
  if (failed(rows))
    return failure();
  // rows: [index dims..., dims before the axis..., dims after it...] -> [before..., index..., after...]
  SmallVector<int64_t> back;
  for (int64_t d = 0; d < axis; ++d)
    back.push_back(k + d);
  for (int64_t d = 0; d < k; ++d)
    back.push_back(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    back.push_back(k + d - 1);
  TransposeOp::Properties toPlace;
  toPlace.perm = b.getDenseI64ArrayAttr(back);
  auto placed = n.create<TransposeOp>({*rows}, toPlace);
  if (failed(placed))
    return failure();
  return placed->getResult();
}

// Gather of a computed tensor at known indices that form one ascending range (a class token,
// x[:, 0]) is a slice, reshaped to drop the axis for a scalar index; at other known indices,
// the product above.
LogicalResult convertGather(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({"axis"})))
    return failure();
  auto x = n.input(0, ParamRole::Offset); // a trained table read at known indices starts at zero
  auto axis = n.attrInt("axis", 0);
  if (failed(x) || failed(axis))
    return failure();
  if (!n.isImportConstant(1) && !n.isIntegerInitializer(1))
    return n.fail("Gather at indices computed from the data is not supported; only at known indices");
  auto indices = n.constInts(1);
  if (failed(indices))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  int64_t rank = type.getRank();
  int64_t ax = *axis < 0 ? *axis + rank : *axis;
  if (ax < 0 || ax >= rank)
    return n.fail("axis " + std::to_string(*axis) + " is out of range");
  int64_t extent = type.getDimSize(ax);
  std::vector<int64_t> idx = *indices;
  for (int64_t &i : idx) {
    if (i < -extent || i >= extent)
      return n.fail("index " + std::to_string(i) + " is out of range for a dimension of " + std::to_string(extent));
    i = i < 0 ? i + extent : i;
  }
  if (idx.empty())
    return n.fail("Gather with no indices is not supported");
  std::vector<int64_t> indexDims = n.constDims(1);
  for (size_t i = 1; i < idx.size(); ++i)
    if (idx[i] != idx[0] + int64_t(i)) {
      if (!llvm::isa<FloatType>(type.getElementType()))
        return n.fail("Gather of a computed tensor at indices that are no single range is supported for a "
                      "floating-point tensor only");
      auto gathered = gatherByProduct(n, *x, ax, idx, indexDims);
      return failed(gathered) ? failure() : n.setOutput(0, *gathered);
    }
  if (indexDims.size() > 1)
    return n.fail("Gather of a computed tensor with indices of rank " + std::to_string(indexDims.size()) +
                  " is not supported");
  auto sliced = sliceOf(n, *x, {ax}, {idx.front()}, {idx.back() + 1}, {1});
  if (failed(sliced))
    return failure();
  if (!indexDims.empty())
    return n.setOutput(0, *sliced);
  SmallVector<int64_t> dims(type.getShape());
  dims.erase(dims.begin() + ax);
  auto op = n.build<ReshapeOp>(RankedTensorType::get(dims, type.getElementType()), {*sliced});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// Pad in constant mode with pads known at import and the value 0 (timm's TF-style SAME padding
// pads the bottom and right by one; Swin pads to a multiple of the window, at 224x224 nothing):
// along each padded axis a concat of zeros, the input and zeros, so its gradient is concat's (the
// input's slice of the output gradient). Negative pads (crops) and other values are refused.
LogicalResult convertPad(NodeImporter &n) {
  if (failed(n.checkArity(2, 4)) || failed(n.checkAttrs({"mode"})))
    return failure();
  auto x = n.input(0);
  auto mode = n.attrString("mode", "constant");
  if (failed(x) || failed(mode))
    return failure();
  if (*mode != "constant")
    return n.fail("Pad mode '" + *mode + "' is not supported (constant only)");
  if (!n.isImportConstant(1) && !n.isIntegerInitializer(1))
    return n.fail("Pad with pads computed from the data is not supported; only with known pads");
  auto pads = n.constInts(1);
  if (failed(pads))
    return failure();
  if (n.hasInput(2)) {
    auto value = n.constDoubles(2);
    if (failed(value))
      return failure();
    if (value->size() != 1 || (*value)[0] != 0.0)
      return n.fail("Pad with a constant value other than 0 is not supported");
  }
  auto type = llvm::cast<RankedTensorType>(x->getType());
  const int64_t rank = type.getRank();
  auto given = axesOrAll(n, 3, size_t(rank));
  if (failed(given))
    return failure();
  const std::vector<int64_t> &axes = *given;
  if (pads->size() != 2 * axes.size())
    return n.fail("it has " + std::to_string(pads->size()) + " pads for " + std::to_string(axes.size()) + " axes");
  std::string list;
  for (int64_t p : *pads) {
    list += (list.empty() ? "" : ", ") + std::to_string(p);
    if (p < 0)
      return n.fail("Pad with negative pads [" + list + "...] (a crop) is not supported");
  }
  Value y = *x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank)
      return n.fail("axis " + std::to_string(axes[i]) + " is out of range for an input of rank " + std::to_string(rank));
    const int64_t before = (*pads)[i], after = (*pads)[i + axes.size()];
    if (before == 0 && after == 0)
      continue;
    auto current = llvm::cast<RankedTensorType>(y.getType());
    SmallVector<Value> parts;
    for (int64_t width : {before, int64_t(-1), after}) {
      if (width == -1) {
        parts.push_back(y);
        continue;
      }
      if (width == 0)
        continue;
      SmallVector<int64_t> dims(current.getShape());
      dims[size_t(axis)] = width;
      auto zeros = n.splatOf(RankedTensorType::get(dims, current.getElementType()), 0.0);
      if (failed(zeros))
        return failure();
      parts.push_back(*zeros);
    }
    ConcatOp::Properties p;
    p.axis = Builder(n.context()).getI64IntegerAttr(axis);
    auto op = n.create<ConcatOp>(parts, p);
    if (failed(op))
      return failure();
    y = op->getResult();
  }
  return n.setOutput(0, y);
}

// Expand of a computed or trained tensor (ViT's class token over the batch): a sum with zeros of
// the broadcast shape, whose gradient (reduce_sum_to) sums the copies back.
LogicalResult convertExpand(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0, ParamRole::Offset); // a trained tensor broadcast over the batch: a class token
  auto target = n.constInts(1);
  if (failed(x) || failed(target))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  auto rule = shape::broadcast(shapeOf(type), *target);
  if (!rule)
    return n.fail(rule.error);
  auto zeros = n.splatOf(RankedTensorType::get(rule.shape, type.getElementType()), 0.0);
  if (failed(zeros))
    return failure();
  auto op = n.create<AddOp>({*x, *zeros});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

// LayerNormalization; its Mean and InvStdDev outputs are the op's statistics (readable, though
// the training step refuses to differentiate through them), and a missing bias is zero.
LogicalResult convertLayerNorm(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)) || failed(n.checkAttrs({"axis", "epsilon", "stash_type"})))
    return failure();
  auto axis = n.attrInt("axis", -1);
  auto eps = n.attrFloat("epsilon", 1e-5);
  auto stash = n.attrInt("stash_type", 1);
  if (failed(axis) || failed(eps) || failed(stash))
    return failure();
  if (*stash != 1)
    return n.fail("stash_type " + std::to_string(*stash) + " is not supported (statistics are computed in fp32)");
  auto x = n.input(0), scale = n.input(1, ParamRole::NormScale);
  if (failed(x) || failed(scale))
    return failure();
  auto bias = n.hasInput(2) ? n.input(2, ParamRole::NormBias)
                            : n.splatOf(llvm::cast<RankedTensorType>(scale->getType()), 0.0);
  if (failed(bias))
    return failure();
  Builder b(n.context());
  LayerNormOp::Properties p;
  p.axis = b.getI64IntegerAttr(*axis);
  p.epsilon = b.getF64FloatAttr(*eps);
  auto op = n.create<LayerNormOp>({*x, *scale, *bias}, p);
  if (failed(op))
    return failure();
  for (int i = 0; i < 3; ++i)
    if (failed(n.setOutput(i, op->getResult(unsigned(i)))))
      return failure();
  return success();
}

LogicalResult convertGemm(NodeImporter &n) {
  if (failed(n.checkArity(2, 3)) || failed(n.checkAttrs({"alpha", "beta", "transA", "transB"})))
    return failure();
  auto a = n.input(0), b = n.input(1, ParamRole::LinearWeight);
  auto alpha = n.attrFloat("alpha", 1.0), beta = n.attrFloat("beta", 1.0);
  auto transA = n.attrInt("transA", 0), transB = n.attrInt("transB", 0);
  if (failed(a) || failed(b) || failed(alpha) || failed(beta) || failed(transA) || failed(transB))
    return failure();
  SmallVector<Value> operands{*a, *b};
  if (n.hasInput(2)) {
    auto c = n.input(2, ParamRole::LinearBias);
    if (failed(c))
      return failure();
    operands.push_back(*c);
  }
  Builder bld(n.context());
  GemmOp::Properties p;
  p.trans_a = bld.getBoolAttr(*transA);
  p.trans_b = bld.getBoolAttr(*transB);
  p.alpha = bld.getF64FloatAttr(*alpha);
  p.beta = bld.getF64FloatAttr(*beta);
  auto op = n.create<GemmOp>(operands, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertMatMul(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto a = n.input(0), b = n.input(1, ParamRole::LinearWeight);
  if (failed(a) || failed(b))
    return failure();
  auto op = n.create<MatmulOp>({*a, *b});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertConcat(NodeImporter &n) {
  if (failed(n.checkArity(1, 1 << 20)) || failed(n.checkAttrs({"axis"})))
    return failure();
  auto axis = n.attrInt("axis", 0);
  if (failed(axis))
    return failure();
  if (!n.hasAttr("axis"))
    return n.fail("attribute 'axis' is required");
  SmallVector<Value> inputs;
  for (int i = 0; i < n.node().input_size(); ++i) {
    auto v = n.input(i, ParamRole::Offset);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  ConcatOp::Properties p;
  p.axis = Builder(n.context()).getI64IntegerAttr(*axis);
  auto op = n.create<ConcatOp>(inputs, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertDropout(NodeImporter &n) {
  if (failed(n.checkArity(1, 3)) || failed(n.checkAttrs({"seed"})) || failed(n.requireUnused(1, "mask")))
    return failure();
  auto x = n.input(0);
  if (failed(x))
    return failure();
  double ratio = 0.5;
  bool training = false;
  if (n.hasInput(1)) {
    auto r = n.constDoubles(1);
    if (failed(r))
      return failure();
    if (r->size() != 1)
      return n.fail("ratio must be a scalar");
    ratio = r->front();
  }
  if (n.hasInput(2)) {
    auto t = n.constInts(2);
    // training_mode is a bool tensor; accept it through its raw bytes.
    if (failed(t))
      return failure();
    training = !t->empty() && t->front() != 0;
  }
  // Outside training mode ONNX's Dropout is the identity, and so it is at ratio 0 (exports keep
  // the Dropout of every layer whose probability is 0, as ViT's attention and MLP).
  if (!training || ratio == 0.0)
    return n.setOutput(0, *x);
  DropoutOp::Properties p;
  p.ratio = Builder(n.context()).getF64FloatAttr(ratio);
  auto op = n.create<DropoutOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertCast(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({"to", "saturate"})))
    return failure();
  auto x = n.input(0);
  auto to = n.attrInt("to", 0);
  if (failed(x) || failed(to))
    return failure();
  Type element = elementTypeOf(*n.context(), int32_t(*to));
  if (!element)
    return n.fail("cast to " + onnxTypeName(int32_t(*to)) + " is not supported");
  auto type = llvm::cast<RankedTensorType>(x->getType());
  auto op = n.build<CastOp>(RankedTensorType::get(type.getShape(), element), {*x});
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertSoftmax(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({"axis"})))
    return failure();
  auto x = n.input(0);
  auto axis = n.attrInt("axis", -1);
  if (failed(x) || failed(axis))
    return failure();
  SoftmaxOp::Properties p;
  p.axis = Builder(n.context()).getI64IntegerAttr(*axis);
  auto op = n.create<SoftmaxOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertSoftmaxCrossEntropyLoss(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({"reduction"})) || failed(n.requireUnused(1, "log_prob")))
    return failure();
  auto logits = n.input(0), labels = n.input(1);
  auto reduction = n.attrString("reduction", "mean");
  if (failed(logits) || failed(labels) || failed(reduction))
    return failure();
  auto r = symbolizeReduction(*reduction);
  if (!r)
    return n.fail("reduction '" + *reduction + "' is not supported");
  SoftmaxCrossEntropyOp::Properties p;
  p.reduction = ReductionAttr::get(n.context(), *r);
  p.label_smoothing = Builder(n.context()).getF64FloatAttr(0.0);
  auto op = n.create<SoftmaxCrossEntropyOp>({*logits, *labels}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

LogicalResult convertIdentity(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) || failed(n.checkAttrs({})))
    return failure();
  // Exporters alias shared initializers through Identity (eval-mode constant folding).
  if (n.forwardConstantInput())
    return success();
  auto x = n.input(0);
  return failed(x) ? failure() : n.setOutput(0, *x);
}

// Constant nodes become values only when an op consumes them as a tensor, so constants
// that only feed attributes (Reshape's shape, Clip's bounds) leave nothing in the IR.
LogicalResult convertConstant(NodeImporter &n) {
  const auto &node = n.node();
  if (node.output_size() != 1 || node.attribute_size() != 1)
    return n.fail("expects one output and one value attribute");
  const auto &attr = node.attribute(0);
  auto tensor = std::make_unique<onnx::TensorProto>();
  if (attr.name() == "value" && attr.has_t()) {
    *tensor = attr.t();
  } else if (attr.name() == "value_float") {
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_float_data(attr.f());
  } else if (attr.name() == "value_floats") {
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    tensor->add_dims(attr.floats_size());
    for (float f : attr.floats())
      tensor->add_float_data(f);
  } else if (attr.name() == "value_int") {
    tensor->set_data_type(onnx::TensorProto::INT64);
    tensor->add_int64_data(attr.i());
  } else if (attr.name() == "value_ints") {
    tensor->set_data_type(onnx::TensorProto::INT64);
    tensor->add_dims(attr.ints_size());
    for (int64_t v : attr.ints())
      tensor->add_int64_data(v);
  } else {
    return n.fail("value attribute '" + attr.name() + "' is not supported");
  }
  return n.defineConstant(std::move(tensor));
}

} // namespace

LogicalResult convertDropPath(NodeImporter &n, const DropPath &path) {
  auto x = n.input(path.dataInput);
  if (failed(x))
    return failure();
  auto type = llvm::cast<RankedTensorType>(x->getType());
  auto mask = n.knownDims(path.maskLike);
  if (!mask)
    return n.fail("stochastic depth's random mask has a shape that depends on the data");
  bool fits = int64_t(mask->size()) == type.getRank() && !mask->empty() &&
              ((*mask)[0] == type.getDimSize(0) || (*mask)[0] == n.declaredBatch());
  for (size_t i = 1; fits && i < mask->size(); ++i)
    fits = (*mask)[i] == 1;
  if (!fits)
    return n.fail("stochastic depth's random mask is not one value per sample of the input (mask of rank " +
                  std::to_string(mask->size()) + ", input rank " + std::to_string(type.getRank()) + ")");
  Builder b(n.context());
  DropoutOp::Properties p;
  p.ratio = b.getF64FloatAttr(path.ratio);
  p.per_sample = b.getUnitAttr();
  auto op = n.create<DropoutOp>({*x}, p);
  return failed(op) ? failure() : n.setOutput(0, op->getResult());
}

namespace {

const llvm::StringMap<ConvertFn> &registry() {
  static const llvm::StringMap<ConvertFn> converters = {
      {"Conv", convertConv},
      {"BatchNormalization", convertBatchNorm},
      {"LayerNormalization", convertLayerNorm},
      {"InstanceNormalization", convertInstanceNorm},
      {"GroupNormalization", convertGroupNorm},
      {"Resize", convertResize},
      {"Tile", convertTile},
      {"Einsum", convertEinsum},
      {"Relu", convertUnary<ReluOp>},
      {"Sigmoid", convertUnary<SigmoidOp>},
      {"Clip", convertClip},
      {"HardSigmoid", convertElementwise<HardSigmoidOp>},
      {"LeakyRelu", convertElementwise<LeakyReluOp>},
      {"Elu", convertElementwise<EluOp>},
      {"Selu", convertElementwise<SeluOp>},
      {"Celu", convertElementwise<CeluOp>},
      {"Softplus", convertUnary<SoftplusOp>},
      {"Mish", convertUnary<MishOp>},
      {"Softsign", convertUnary<SoftsignOp>},
      {"Sqrt", convertUnary<SqrtOp>},
      {"Reciprocal", convertUnary<ReciprocalOp>},
      {"PRelu", convertPRelu},
      {"HardSwish", convertUnary<HardSwishOp>},
      {"Erf", convertUnary<ErfOp>},
      {"Gelu", convertGelu},
      {"Add", convertBinary<AddOp, ParamRole::Offset>},
      {"Mul", convertBinary<MulOp, ParamRole::Multiplier>},
      {"Div", convertDiv},
      {"Sub", convertSub},
      {"Unsqueeze", convertSqueezeOrUnsqueeze<true>},
      {"Squeeze", convertSqueezeOrUnsqueeze<false>},
      {"Transpose", convertTranspose},
      {"Slice", convertSlice},
      {"Split", convertSplit},
      {"Gather", convertGather},
      {"Expand", convertExpand},
      {"Pad", convertPad},
      {"MaxPool", convertMaxPool},
      {"AveragePool", convertAveragePool},
      {"GlobalAveragePool", convertGlobalAveragePool},
      {"ReduceMean", convertReduceMean},
      {"ReduceSum", convertReduceSum},
      {"ReduceMax", convertReduceMax},
      {"ReduceL2", convertReduceL2},
      {"Flatten", convertFlatten},
      {"Reshape", convertReshape},
      {"Gemm", convertGemm},
      {"MatMul", convertMatMul},
      {"Concat", convertConcat},
      {"Dropout", convertDropout},
      {"Cast", convertCast},
      {"Softmax", convertSoftmax},
      {"SoftmaxCrossEntropyLoss", convertSoftmaxCrossEntropyLoss},
      {"Identity", convertIdentity},
      {"Constant", convertConstant},
  };
  return converters;
}

} // namespace

ConvertFn findConverter(const std::string &opType) {
  auto it = registry().find(opType);
  return it == registry().end() ? nullptr : it->second;
}

} // namespace castor::onnx_import
