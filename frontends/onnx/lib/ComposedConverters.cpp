// ONNX ops imported as compositions of castor ops (see ComposedConverters.h).
#include "ComposedConverters.h"
#include "Composition.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <numeric>

using namespace mlir;

namespace castor::onnx_import {
namespace {

// A scalar constant of x's element type times x.
FailureOr<Value> scaled(NodeImporter &n, Value x, double factor) {
  auto c = n.splatOf(RankedTensorType::get({}, typeOf(x).getElementType()), factor);
  if (failed(c))
    return failure();
  return resultOf(n.create<MulOp>({x, *c}));
}

enum class Reduction { Mean, Sum, Max, L2 };

// The reduced axes, in [0, rank), sorted: from input 1 (ReduceSum's from opset 13, the others'
// from opset 18) or from the attribute `axes` (before), known at import either way. No axes
// reduce all of them, or, with noop_with_empty_axes, none (`identity`).
FailureOr<std::vector<int64_t>> reducedAxes(NodeImporter &n, int64_t rank, bool &identity) {
  auto noop = n.attrInt("noop_with_empty_axes", 0);
  if (failed(noop))
    return failure();
  if (n.hasInput(1) && n.hasAttr("axes"))
    return n.fail("axes are given both as the attribute and as input 1");
  auto given = n.hasInput(1) ? n.constInts(1) : n.attrInts("axes", {});
  if (failed(given))
    return failure();
  identity = given->empty() && *noop != 0;
  std::vector<int64_t> axes;
  if (given->empty() && !identity)
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : *given) {
    if (a < -rank || a >= rank)
      return n.fail("axis " + std::to_string(a) + " is out of range for an input of rank " + std::to_string(rank));
    const int64_t d = a < 0 ? a + rank : a;
    if (seen[size_t(d)])
      return n.fail("axis " + std::to_string(a) + " is repeated");
    seen[size_t(d)] = true;
    axes.push_back(d);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// [1, M, K, 1] -> [1, M, 1, 1]: each row's mean, sum, max or L2 norm.
FailureOr<Value> reduceRows(NodeImporter &n, Value rows, int64_t k, Reduction r) {
  Builder b(n.context());
  if (r == Reduction::Max) {
    // The gradient goes to each row's first maximum (max_pool2d_backward's choice).
    MaxPool2dOp::Properties p;
    p.kernel = b.getDenseI64ArrayAttr({k, 1});
    p.strides = b.getDenseI64ArrayAttr({1, 1});
    p.pads = b.getDenseI64ArrayAttr({0, 0, 0, 0});
    p.dilations = b.getDenseI64ArrayAttr({1, 1});
    p.ceil_mode = b.getBoolAttr(false);
    return resultOf(n.create<MaxPool2dOp>({rows}, p));
  }
  if (r == Reduction::L2) {
    auto squares = resultOf(n.create<MulOp>({rows, rows}));
    if (failed(squares))
      return failure();
    rows = *squares;
  }
  auto mean = resultOf(n.create<GlobalAvgPoolOp>({rows}));
  if (failed(mean) || r == Reduction::Mean)
    return mean;
  auto sum = k == 1 ? mean : scaled(n, *mean, double(k));
  if (failed(sum) || r == Reduction::Sum)
    return sum;
  return resultOf(n.create<SqrtOp>({*sum}));
}

template <Reduction R> LogicalResult convertReduce(NodeImporter &n) {
  if (failed(n.checkArity(1, 2)) || failed(n.checkAttrs({"axes", "keepdims", "noop_with_empty_axes"})))
    return failure();
  auto x = n.input(0);
  auto keep = n.attrInt("keepdims", 1);
  if (failed(x) || failed(keep))
    return failure();
  RankedTensorType type = typeOf(*x);
  const int64_t rank = type.getRank();
  bool identity = false;
  auto axes = reducedAxes(n, rank, identity);
  if (failed(axes))
    return failure();
  if (identity)
    return n.setOutput(0, *x);
  if (!llvm::isa<FloatType>(type.getElementType()))
    return n.fail("only floating-point tensors are reduced");
  std::vector<bool> reduced(size_t(rank), false);
  for (int64_t a : *axes)
    reduced[size_t(a)] = true;
  SmallVector<int64_t> perm, outDims;
  int64_t m = 1, k = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = type.getDimSize(d);
    if (!reduced[size_t(d)]) {
      perm.push_back(d);
      m *= size;
    } else {
      k *= size;
    }
    if (!reduced[size_t(d)] || *keep)
      outDims.push_back(reduced[size_t(d)] ? 1 : size);
  }
  perm.append(axes->begin(), axes->end());
  // A mean over exactly the spatial axes of [N, C, ...] is the global average pool itself (what
  // the dynamo exporter writes for it), kept as one op for the passes that look for it.
  std::vector<int64_t> spatial(size_t(std::max<int64_t>(rank - 2, 0)));
  std::iota(spatial.begin(), spatial.end(), 2);
  if (R == Reduction::Mean && rank >= 3 && *axes == spatial) {
    auto pool = resultOf(n.create<GlobalAvgPoolOp>({*x}));
    auto y = failed(pool) ? pool : reshapeTo(n, *pool, outDims);
    return failed(y) ? failure() : n.setOutput(0, *y);
  }
  Value v = *x;
  SmallVector<int64_t> identityPerm(static_cast<size_t>(rank), 0);
  std::iota(identityPerm.begin(), identityPerm.end(), 0);
  if (perm != identityPerm) {
    TransposeOp::Properties p;
    p.perm = Builder(n.context()).getDenseI64ArrayAttr(perm);
    auto t = resultOf(n.create<TransposeOp>({v}, p));
    if (failed(t))
      return failure();
    v = *t;
  }
  auto rows = reshapeTo(n, v, {1, m, k, 1});
  auto r = failed(rows) ? rows : reduceRows(n, *rows, k, R);
  auto y = failed(r) ? r : reshapeTo(n, *r, outDims);
  return failed(y) ? failure() : n.setOutput(0, *y);
}


// x [N, C, S...] normalised per sample over each of `groups` groups of C / groups channels (and
// all of S): layer_norm over the last axis of x viewed as [N, G, K], with a constant unit scale
// and zero bias, so that its gradients are layer_norm's. Then the trained affine: a scale and
// bias per group ([G], applied to the [N, G, K] view as [G, 1]) or per channel ([C], applied to
// [N, C, S...] as [C, 1, ...]), through mul and add, whose VJPs sum their gradients.
FailureOr<Value> normalizeGroups(NodeImporter &n, Value x, int64_t groups, double epsilon, Value scale, Value bias,
                                 bool perGroup) {
  RankedTensorType type = typeOf(x);
  const int64_t rank = type.getRank(), batch = type.getDimSize(0), channels = type.getDimSize(1);
  if (groups <= 0 || channels % groups != 0)
    return n.fail("num_groups " + std::to_string(groups) + " does not divide the " + std::to_string(channels) +
                  " channels");
  const int64_t k = type.getNumElements() / (batch * groups), affine = perGroup ? groups : channels;
  for (Value v : {scale, bias})
    if (typeOf(v).getRank() != 1 || typeOf(v).getDimSize(0) != affine)
      return n.fail(std::string(v == scale ? "the scale" : "the bias") + "'s shape " + shapeText(typeOf(v)) +
                    " is not [" + std::to_string(affine) + "] (one value per " + (perGroup ? "group" : "channel") +
                    ")");
  auto rows = reshapeTo(n, x, {batch, groups, k});
  auto ones = n.splatOf(RankedTensorType::get({k}, type.getElementType()), 1.0);
  auto zeros = n.splatOf(RankedTensorType::get({k}, type.getElementType()), 0.0);
  if (failed(rows) || failed(ones) || failed(zeros))
    return failure();
  Builder b(n.context());
  LayerNormOp::Properties p;
  p.axis = b.getI64IntegerAttr(-1);
  p.epsilon = b.getF64FloatAttr(epsilon);
  auto norm = n.create<LayerNormOp>({*rows, *ones, *zeros}, p);
  if (failed(norm))
    return failure();
  Value y = norm->getResult(0);
  SmallVector<int64_t> affineDims{affine};
  if (!perGroup) {
    auto back = reshapeTo(n, y, SmallVector<int64_t>(type.getShape()));
    if (failed(back))
      return failure();
    y = *back;
    affineDims.append(size_t(rank - 2), 1);
  } else {
    affineDims.push_back(1);
  }
  auto s = reshapeTo(n, scale, affineDims), c = reshapeTo(n, bias, affineDims);
  if (failed(s) || failed(c))
    return failure();
  auto scaled = resultOf(n.create<MulOp>({y, *s}));
  auto shifted = failed(scaled) ? scaled : resultOf(n.create<AddOp>({*scaled, *c}));
  return failed(shifted) ? shifted : reshapeTo(n, *shifted, SmallVector<int64_t>(type.getShape()));
}

} // namespace

LogicalResult convertReduceMean(NodeImporter &n) { return convertReduce<Reduction::Mean>(n); }
LogicalResult convertReduceSum(NodeImporter &n) { return convertReduce<Reduction::Sum>(n); }
LogicalResult convertReduceMax(NodeImporter &n) { return convertReduce<Reduction::Max>(n); }
LogicalResult convertReduceL2(NodeImporter &n) { return convertReduce<Reduction::L2>(n); }

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

// A 1-D convolution (ECA's channel attention: Conv1d over [N, 1, C]) is the 2-D one over
// [N, C, 1, L] with a [K, C/group, 1, k] filter: the reshapes around conv2d carry its gradients
// (data, filter, bias) back to the 1-D tensors.
LogicalResult convertConv1d(NodeImporter &n, Value x, Value w) {
  RankedTensorType xType = typeOf(x), wType = typeOf(w);
  if (xType.getRank() != 3)
    return n.fail("a 1-D filter needs an input [N, C, L], not one of rank " + std::to_string(xType.getRank()));
  auto autoPad = n.attrString("auto_pad", "NOTSET");
  auto pads = n.attrInts("pads", {0, 0});
  auto strides = n.attrInts("strides", {1});
  auto dilations = n.attrInts("dilations", {1});
  auto group = n.attrInt("group", 1);
  auto kernel = n.attrInts("kernel_shape", {wType.getDimSize(2)});
  if (failed(autoPad) || failed(pads) || failed(strides) || failed(dilations) || failed(group) || failed(kernel))
    return failure();
  if (*autoPad != "NOTSET" && *autoPad != "VALID")
    return n.fail("auto_pad=" + *autoPad + " is not supported; export with explicit pads");
  if (pads->size() != 2 || strides->size() != 1 || dilations->size() != 1 || kernel->size() != 1)
    return n.fail("a 1-D convolution takes 2 pads, 1 stride, 1 dilation and 1 kernel size (given " +
                  std::to_string(pads->size()) + ", " + std::to_string(strides->size()) + ", " +
                  std::to_string(dilations->size()) + ", " + std::to_string(kernel->size()) + ")");
  if (kernel->front() != wType.getDimSize(2))
    return n.fail("kernel_shape does not match the filter's shape");
  auto x2d = reshapeTo(n, x, {xType.getDimSize(0), xType.getDimSize(1), 1, xType.getDimSize(2)});
  auto w2d = reshapeTo(n, w, {wType.getDimSize(0), wType.getDimSize(1), 1, wType.getDimSize(2)});
  if (failed(x2d) || failed(w2d))
    return failure();
  SmallVector<Value> operands{*x2d, *w2d};
  if (n.hasInput(2)) {
    auto b = n.input(2, ParamRole::ConvBias);
    if (failed(b))
      return failure();
    operands.push_back(*b);
  }
  Builder b(n.context());
  Conv2dOp::Properties p;
  p.strides = b.getDenseI64ArrayAttr({1, strides->front()});
  p.pads = b.getDenseI64ArrayAttr({0, (*pads)[0], 0, (*pads)[1]});
  p.dilations = b.getDenseI64ArrayAttr({1, dilations->front()});
  p.groups = b.getI64IntegerAttr(*group);
  auto y = resultOf(n.create<Conv2dOp>(operands, p));
  if (failed(y))
    return failure();
  RankedTensorType yType = typeOf(*y);
  auto y1d = reshapeTo(n, *y, {yType.getDimSize(0), yType.getDimSize(1), yType.getDimSize(3)});
  return failed(y1d) ? failure() : n.setOutput(0, *y1d);
}

// Each channel of each sample normalised over its spatial positions: group normalisation with a
// group per channel.
LogicalResult convertInstanceNorm(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)) || failed(n.checkAttrs({"epsilon"})))
    return failure();
  auto eps = n.attrFloat("epsilon", 1e-5);
  auto x = n.input(0);
  auto scale = n.input(1, ParamRole::NormScale), bias = n.input(2, ParamRole::NormBias);
  if (failed(eps) || failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (type.getRank() < 3)
    return n.fail("an input [N, C, D1, ...] is needed, not one of rank " + std::to_string(type.getRank()));
  auto y = normalizeGroups(n, *x, type.getDimSize(1), *eps, *scale, *bias, /*perGroup=*/true);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

// GroupNormalization: opset 18's scale and bias are per group ([G]: its function body applies them
// to x viewed as [N, G, K] through InstanceNormalization), opset 21's per channel ([C]).
LogicalResult convertGroupNorm(NodeImporter &n) {
  if (failed(n.checkArity(3, 3)) || failed(n.checkAttrs({"epsilon", "num_groups", "stash_type"})))
    return failure();
  if (n.opset() < 18)
    return n.fail("GroupNormalization is an op of opset 18 and later, the model declares opset " +
                  std::to_string(n.opset()));
  if (!n.hasAttr("num_groups"))
    return n.fail("the attribute num_groups is required");
  auto eps = n.attrFloat("epsilon", 1e-5);
  auto groups = n.attrInt("num_groups", 0);
  auto stash = n.attrInt("stash_type", 1);
  if (failed(eps) || failed(groups) || failed(stash))
    return failure();
  if (*stash != 1)
    return n.fail("stash_type " + std::to_string(*stash) + " is not supported (statistics are computed in fp32)");
  auto x = n.input(0);
  auto scale = n.input(1, ParamRole::NormScale), bias = n.input(2, ParamRole::NormBias);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (type.getRank() < 2)
    return n.fail("an input [N, C, ...] is needed, not one of rank " + std::to_string(type.getRank()));
  auto y = normalizeGroups(n, *x, *groups, *eps, *scale, *bias, /*perGroup=*/n.opset() < 21);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

// Tile with repeats known at import: the whole of each axis copied `repeats` times.
LogicalResult convertTile(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)) || failed(n.checkAttrs({})))
    return failure();
  auto x = n.input(0);
  auto repeats = n.constInts(1);
  if (failed(x) || failed(repeats))
    return failure();
  RankedTensorType type = typeOf(*x);
  if (int64_t(repeats->size()) != type.getRank())
    return n.fail("it has " + std::to_string(repeats->size()) + " repeats for an input of rank " +
                  std::to_string(type.getRank()));
  for (size_t d = 0; d < repeats->size(); ++d)
    if ((*repeats)[d] < 1)
      return n.fail("repeat " + std::to_string((*repeats)[d]) + " along axis " + std::to_string(d) +
                    " is not supported (1 or more)");
  auto y = repeatAxes(n, *x, *repeats, /*repeatOuter=*/true);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

} // namespace castor::onnx_import
