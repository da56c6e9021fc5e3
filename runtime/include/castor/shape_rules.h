// Shape rules of Castor's operations, and the element-type rules that are more than "all
// operands alike", in one place.
//
// The compiler's verifiers and result-type inference call these, and so does the runtime's
// plan validator, so the three can never disagree about what an operation accepts and produces.
// Plain C++ on purpose: the runtime must build without MLIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace castor::shape {

using Shape = std::vector<int64_t>;

// The result shape of a rule, or the reason the operands are invalid.
struct ShapeResult {
  Shape shape;
  std::string error;

  static ShapeResult ok(Shape s) { return {std::move(s), {}}; }
  static ShapeResult fail(std::string why) { return {{}, std::move(why)}; }
  explicit operator bool() const { return error.empty(); }
};

// Number of elements, or nullopt if a dimension is negative or the product overflows int64.
std::optional<int64_t> elementCount(const Shape &shape);
std::string toString(const Shape &shape);

struct Conv2dAttrs {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0}; // top, left, bottom, right
  std::vector<int64_t> dilations{1, 1};
  int64_t groups = 1;
};
// input [N, C, H, W], filter [K, C/groups, R, S], optional bias [K] -> [N, K, P, Q].
ShapeResult conv2d(const Shape &input, const Shape &filter, const Shape *bias,
                   const Conv2dAttrs &attrs);

struct Pool2dAttrs {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0}; // top, left, bottom, right
  std::vector<int64_t> dilations{1, 1};
  bool ceilMode = false;
};
// input [N, C, H, W] -> [N, C, P, Q].
ShapeResult pool2d(const Shape &input, const Pool2dAttrs &attrs);

// input [N, C, d...] -> [N, C, 1...].
ShapeResult globalAvgPool(const Shape &input);

// input [N, C, d...] and every per-channel operand [C] -> input's shape.
ShapeResult batchNorm(const Shape &input, const std::vector<Shape> &perChannel);

// Layer normalisation over the dimensions from `axis` on (negative counts from the end): scale
// and bias have exactly those dimensions; the result has the input's shape. `stats`, when given,
// receives the shape of the saved mean and inverse standard deviation: the input's dimensions
// before `axis`, then 1s (ONNX LayerNormalization's Mean and InvStdDev).
ShapeResult layerNorm(const Shape &input, const Shape &scale, const Shape &bias, int64_t axis,
                      Shape *stats = nullptr);

// How the layer-norm kernels walk a valid layer norm's input: [rows, length], `length` the
// element count of the normalised dimensions (row-major storage makes each row contiguous).
ShapeResult layerNormRows(const Shape &input, const Shape &scale, int64_t axis);

// Element types as the rules tell them apart; the compiler and the plan map theirs onto these.
enum class ElementType { F64, F32, F16, BF16, Other };
const char *toString(ElementType type);

// The element types of batch_norm_training, batch_norm_inference, batch_norm_training_backward
// and batch_norm_running_update. `data` holds those of x and, where the op has them, y, dy and
// dx; `perChannel` those of scale, bias, the running and batch statistics and their gradients.
// The data share one floating-point type and so do the per-channel operands, which have the
// data's type or, for f16 or bf16 data, f32: "mixed" BatchNorm, which reads and writes
// low-precision activations and keeps its parameters and statistics in fp32, as PyTorch AMP and
// cuDNN do. Returns why the types are invalid, or an empty string.
std::string batchNormTypes(const std::vector<ElementType> &data, const std::vector<ElementType> &perChannel);

// NumPy/ONNX multidirectional broadcasting.
ShapeResult broadcast(const Shape &lhs, const Shape &rhs);

// A fused element-wise group (fused_elementwise): every output that is not a reduction
// (`reduced[j]` false or absent) has one shape, the domain, and every input broadcasts to it
// without growing it. Without such an output the domain is the broadcast of the inputs. A
// reduction output broadcasts to the domain (reducedAxes). Returns the domain.
ShapeResult fusedElementwise(const std::vector<Shape> &inputs, const std::vector<Shape> &outputs,
                             const std::vector<bool> &reduced = {});

// The axes of `domain` that `reduced` (which broadcasts to it) sums over: those where it is 1 or
// absent (right-aligned) and the domain is not 1.
std::vector<int64_t> reducedAxes(const Shape &reduced, const Shape &domain);

// Gemm: op(A) [M, K] x op(B) [K, N] (+ C broadcastable to [M, N]) -> [M, N].
ShapeResult gemm(const Shape &a, const Shape &b, const Shape *c, bool transA, bool transB);

// MatMul with numpy semantics (1-D promotion, broadcast batch dimensions).
ShapeResult matmul(const Shape &a, const Shape &b);

// Flatten at `axis` (0 <= axis <= rank) -> [prod(d[:axis]), prod(d[axis:])].
ShapeResult flatten(const Shape &input, int64_t axis);

// Reshape to `target`, resolving ONNX's 0 (copy, unless allowZero) and a single -1.
ShapeResult reshapeTarget(const Shape &input, const Shape &target, bool allowZero);
// Reshape whose result shape is already static: the element counts must match.
ShapeResult reshape(const Shape &input, const Shape &result);

// ONNX Unsqueeze: a dimension of 1 inserted at each of `axes` (of the result's rank).
ShapeResult unsqueeze(const Shape &input, const std::vector<int64_t> &axes);
// ONNX Squeeze: the dimensions at `axes` (each of size 1) dropped; without axes every 1.
ShapeResult squeeze(const Shape &input, const std::vector<int64_t> &axes, bool axesGiven);

// Concatenation of `inputs` along `axis` (negative counts from the end).
ShapeResult concat(const std::vector<Shape> &inputs, int64_t axis);

// Transpose: result dimension i is input dimension perm[i]; perm is a permutation of [0, rank).
ShapeResult transpose(const Shape &input, const Shape &perm);

// Slice with ONNX's semantics on every dimension: starts, ends and steps have the input's rank;
// negative starts and ends count from the end and are clamped into the dimension (steps may be
// negative, never 0). `first`, when given, receives the first index read along each dimension,
// so a kernel reads input[first + i * step] into result[i].
ShapeResult slice(const Shape &input, const Shape &starts, const Shape &ends, const Shape &steps,
                  Shape *first = nullptr);

// The elements a transpose or slice reads, as a strided view of its input: result element
// (i0, i1, ...) is input element offset + sum(i_d * strides[d]), in units of elements. The input's
// own strides are given (row-major, or a device's channels-last order), so backends share the
// index arithmetic whatever their storage order.
struct StridedView {
  Shape dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
std::vector<int64_t> rowMajorStrides(const Shape &shape);
// nullopt when the rule fails (call transpose()/slice() for the reason).
std::optional<StridedView> transposeView(const Shape &input, const std::vector<int64_t> &inputStrides,
                                         const Shape &perm);
std::optional<StridedView> sliceView(const Shape &input, const std::vector<int64_t> &inputStrides,
                                     const Shape &starts, const Shape &ends, const Shape &steps);

// Softmax along `axis` (negative counts from the end) -> input's shape.
ShapeResult softmax(const Shape &input, int64_t axis);

// logits [N, C], labels [N] -> [] for a mean or sum reduction, [N] for none.
enum class Reduction { Mean, Sum, None };
ShapeResult softmaxCrossEntropy(const Shape &logits, const Shape &labels, Reduction reduction);

// Scaled dot-product attention: q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] -> o
// [B, H, Sq, Dv]. `stats`, when given, receives the shape of the saved log-sum-exp of each row of
// scores: [B, H, Sq, 1].
ShapeResult attention(const Shape &q, const Shape &k, const Shape &v, Shape *stats = nullptr);

// The element types of attention and attention_backward: `data` holds those of q, k, v, o and,
// where the op has them, dO, dq, dk, dv; they share one floating-point type. `stats` (the saved
// log-sum-exp) is f32 whatever the data's type, as cuDNN's SDPA keeps it. Returns why the types
// are invalid, or an empty string.
std::string attentionTypes(const std::vector<ElementType> &data, ElementType stats);

// Normalises a possibly negative axis against `rank`; nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace castor::shape
