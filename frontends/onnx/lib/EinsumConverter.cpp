// ONNX Einsum as transposes, views and one matmul (see ComposedConverters.h): the contractions
// that attention ("bhid,bhjd->bhij"), Mixer and linear layers ("bnc,dc->bnd") are written as.
#include "ComposedConverters.h"
#include "Composition.h"
#include "EinsumEquation.h"

#include <algorithm>

using namespace mlir;

namespace castor::onnx_import {
namespace {

// A value and the label of each of its axes.
struct Labelled {
  Value value;
  std::vector<int> labels;

  bool has(int label) const { return std::find(labels.begin(), labels.end(), label) != labels.end(); }
  int64_t axisOf(int label) const { return std::find(labels.begin(), labels.end(), label) - labels.begin(); }
  int64_t sizeOf(int label) const { return typeOf(value).getDimSize(axisOf(label)); }
};

bool isIdentity(ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

// The axes of `of` holding `labels`, in that order.
SmallVector<int64_t> axesOf(const Labelled &of, ArrayRef<int> labels) {
  SmallVector<int64_t> axes;
  for (int l : labels)
    axes.push_back(of.axisOf(l));
  return axes;
}

int64_t product(const Labelled &of, ArrayRef<int> labels) {
  int64_t p = 1;
  for (int l : labels)
    p *= of.sizeOf(l);
  return p;
}

// x with the axes whose labels `drop` says dropped: size-1 axes viewed away (broadcast against
// the other operand), others summed as [M, K] times a [K, 1] column of ones.
FailureOr<Labelled> dropAxes(NodeImporter &n, const Labelled &x, llvm::function_ref<bool(int)> drop) {
  std::vector<int> kept, summed;
  for (int l : x.labels)
    (drop(l) ? summed : kept).push_back(l);
  if (summed.empty())
    return x;
  SmallVector<int64_t> keptDims;
  for (int l : kept)
    keptDims.push_back(x.sizeOf(l));
  const int64_t m = product(x, kept), k = product(x, summed);
  Labelled out{x.value, kept};
  if (k == 1) {
    auto v = reshapeTo(n, x.value, keptDims);
    if (failed(v))
      return failure();
    out.value = *v;
    return out;
  }
  SmallVector<int64_t> perm = axesOf(x, kept);
  perm.append(axesOf(x, summed));
  auto moved = transposeBy(n, x.value, perm);
  auto rows = failed(moved) ? moved : reshapeTo(n, *moved, {m, k});
  auto ones = n.splatOf(RankedTensorType::get({k, 1}, typeOf(x.value).getElementType()), 1.0);
  if (failed(rows) || failed(ones))
    return failure();
  auto sums = resultOf(n.create<MatmulOp>({*rows, *ones}));
  auto v = failed(sums) ? sums : reshapeTo(n, *sums, keptDims);
  if (failed(v))
    return failure();
  out.value = *v;
  return out;
}

// How two operands meet in one matmul, left operand first: left as [batch..., M, K] (its axes
// permuted to batch, its own output labels, contracted), right as [batch..., K, N] (batch,
// contracted, its own output labels), the product viewed as [batch..., left's, right's] and
// permuted to the output's labels.
struct Contraction {
  const Labelled *left, *right;
  std::vector<int> batch, leftOwn, contracted, rightOwn;
  SmallVector<int64_t> leftPerm, rightPerm, outPerm;

  int transposes() const { return !isIdentity(leftPerm) + !isIdentity(rightPerm) + !isIdentity(outPerm); }
};

Contraction planContraction(const Labelled &left, const Labelled &right, const std::vector<int> &output) {
  Contraction c{&left, &right, {}, {}, {}, {}, {}, {}, {}};
  for (int l : output)
    (left.has(l) && right.has(l) ? c.batch : left.has(l) ? c.leftOwn : c.rightOwn).push_back(l);
  for (int l : left.labels)
    if (right.has(l) && std::find(output.begin(), output.end(), l) == output.end())
      c.contracted.push_back(l);
  c.leftPerm = axesOf(left, c.batch);
  c.leftPerm.append(axesOf(left, c.leftOwn));
  c.leftPerm.append(axesOf(left, c.contracted));
  c.rightPerm = axesOf(right, c.batch);
  c.rightPerm.append(axesOf(right, c.contracted));
  c.rightPerm.append(axesOf(right, c.rightOwn));
  std::vector<int> result = c.batch;
  result.insert(result.end(), c.leftOwn.begin(), c.leftOwn.end());
  result.insert(result.end(), c.rightOwn.begin(), c.rightOwn.end());
  for (int l : output)
    c.outPerm.push_back(std::find(result.begin(), result.end(), l) - result.begin());
  return c;
}

FailureOr<Value> contract(NodeImporter &n, const Contraction &c) {
  const Labelled &a = *c.left, &b = *c.right;
  SmallVector<int64_t> batchDims, resultDims;
  for (int l : c.batch)
    batchDims.push_back(a.sizeOf(l));
  resultDims = batchDims;
  for (int l : c.leftOwn)
    resultDims.push_back(a.sizeOf(l));
  for (int l : c.rightOwn)
    resultDims.push_back(b.sizeOf(l));
  const int64_t m = product(a, c.leftOwn), k = product(a, c.contracted), nn = product(b, c.rightOwn);
  SmallVector<int64_t> leftDims = batchDims, rightDims = batchDims;
  leftDims.append({m, k});
  rightDims.append({k, nn});
  auto l = transposeBy(n, a.value, c.leftPerm);
  auto r = transposeBy(n, b.value, c.rightPerm);
  if (failed(l) || failed(r))
    return failure();
  auto l2 = reshapeTo(n, *l, leftDims), r2 = reshapeTo(n, *r, rightDims);
  if (failed(l2) || failed(r2))
    return failure();
  auto p = resultOf(n.create<MatmulOp>({*l2, *r2}));
  auto viewed = failed(p) ? p : reshapeTo(n, *p, resultDims);
  return failed(viewed) ? viewed : transposeBy(n, *viewed, c.outPerm);
}

} // namespace

LogicalResult convertEinsum(NodeImporter &n) {
  if (failed(n.checkArity(1, 1 << 20)) || failed(n.checkAttrs({"equation"})))
    return failure();
  if (n.node().input_size() > 2)
    return n.fail("an equation of " + std::to_string(n.node().input_size()) +
                  " operands is not supported (one or two)");
  auto equation = n.attrString("equation", "");
  if (failed(equation))
    return failure();
  if (equation->empty())
    return n.fail("the attribute equation is required");
  std::vector<Labelled> operands;
  std::vector<int64_t> ranks;
  for (int i = 0; i < n.node().input_size(); ++i) {
    // A weight read by an einsum is a linear layer's ("bnc,dc->bnd").
    auto v = n.input(i, ParamRole::LinearWeight);
    if (failed(v))
      return failure();
    operands.push_back({*v, {}});
    ranks.push_back(typeOf(*v).getRank());
  }
  std::string why;
  auto labels = resolveEinsum(*equation, ranks, why);
  if (!labels)
    return n.fail(why);
  for (size_t i = 0; i < operands.size(); ++i) {
    operands[i].labels = labels->inputs[i];
    for (int l : operands[i].labels)
      if (std::count(operands[i].labels.begin(), operands[i].labels.end(), l) > 1)
        return n.fail("label " + einsumLabelName(l) + " repeats in input " + std::to_string(i) +
                      " (a diagonal or trace), which is not supported");
  }
  const std::vector<int> &output = labels->output;
  auto inOutput = [&](int l) { return std::find(output.begin(), output.end(), l) != output.end(); };
  if (operands.size() == 1) {
    auto x = dropAxes(n, operands[0], [&](int l) { return !inOutput(l); });
    auto y = failed(x) ? FailureOr<Value>(failure()) : transposeBy(n, x->value, axesOf(*x, output));
    return failed(y) ? failure() : n.setOutput(0, *y);
  }
  Labelled &a = operands[0], &b = operands[1];
  for (int l : a.labels) {
    if (!b.has(l) || a.sizeOf(l) == b.sizeOf(l) || a.sizeOf(l) == 1 || b.sizeOf(l) == 1)
      continue;
    return n.fail("label " + einsumLabelName(l) + " has size " + std::to_string(a.sizeOf(l)) + " in input 0 and " +
                  std::to_string(b.sizeOf(l)) + " in input 1, which do not broadcast");
  }
  // A size-1 axis broadcast against the other operand's is that operand's alone; an axis in one
  // operand alone and not in the output is summed there.
  auto broadcastOrSummed = [&](const Labelled &self, const Labelled &other) {
    return [self = &self, other = &other, &inOutput](int l) {
      if (other->has(l))
        return self->sizeOf(l) == 1 && other->sizeOf(l) != 1;
      return !inOutput(l);
    };
  };
  auto a1 = dropAxes(n, a, broadcastOrSummed(a, b));
  auto b1 = dropAxes(n, b, broadcastOrSummed(b, a));
  if (failed(a1) || failed(b1))
    return failure();
  auto b2 = dropAxes(n, *b1, [&](int l) { return !a1->has(l) && !inOutput(l); });
  auto a2 = dropAxes(n, *a1, [&](int l) { return !b1->has(l) && !inOutput(l); });
  if (failed(a2) || failed(b2))
    return failure();
  // Either operand may go on the left: the order with fewer transposes.
  Contraction ab = planContraction(*a2, *b2, output), ba = planContraction(*b2, *a2, output);
  auto y = contract(n, ba.transposes() < ab.transposes() ? ba : ab);
  return failed(y) ? failure() : n.setOutput(0, *y);
}

} // namespace castor::onnx_import
