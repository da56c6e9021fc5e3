// Attributes of the kernels the runtime knows, parsed in one place.
//
// The plan validator and every backend read kernel attributes through these functions, so
// names, types and defaults cannot drift apart. Unknown attribute names are refused (a typo
// such as "stride" would otherwise be silently ignored).
#pragma once

#include "castor/shape_rules.h"
#include "castor/status.h"
#include "plan/elementwise_ops.h"
#include "plan/plan.h"

#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace castor::plan {

// Typed access to a kernel's attribute map, recording the first error and the names read.
class AttrReader {
public:
  explicit AttrReader(const Kernel &kernel) : kernel_(kernel) {}

  // Integer list ("ints"). An absent attribute yields `fallback`.
  std::vector<int64_t> ints(const std::string &name, std::vector<int64_t> fallback);
  // One integer ("ints" with one value, or "b").
  int64_t integer(const std::string &name, int64_t fallback);
  // One real ("floats" or "ints" with one value). optReal: nullopt when absent.
  double real(const std::string &name, double fallback);
  std::optional<double> optReal(const std::string &name);
  // A bool ("b", or "ints" with one value 0 or 1).
  bool boolean(const std::string &name, bool fallback);
  std::string string(const std::string &name, std::string fallback);

  // The first type error, or an attribute that no accessor asked for.
  Status finish() const;

private:
  const Attr *find(const std::string &name);
  void fail(const std::string &message);

  const Kernel &kernel_;
  std::set<std::string> read_;
  std::string error_;
};

struct Conv2dParams {
  shape::Conv2dAttrs shape; // strides [2], pads [4] top,left,bottom,right, dilations [2], groups
};
struct Pool2dParams {
  shape::Pool2dAttrs shape;     // kernel [2], strides [2], pads [4], dilations [2], ceil_mode
  bool countIncludePad = false; // avg_pool2d only
};
struct BatchNormParams {
  double epsilon = 1e-5;
  // PyTorch's convention: running = (1 - momentum) * running + momentum * batch statistic.
  double momentum = 0.1;
  // Statistics over the whole batch of a data-parallel step's replicas (SyncBatchNorm): the
  // per-channel sums reduced across them, forward and backward.
  bool sync = false;
};
// batch_norm_relu_training and its backward: the batch norm's attributes and, for the ReLU6 form,
// the clip's maximum (the activation is clip(t, 0, clipMax), its gradient clip_backward's, and
// there is no residual).
struct BatchNormReluParams {
  BatchNormParams batchNorm;
  std::optional<double> clipMax;
};
// layer_norm and layer_norm_backward: normalised dimensions from `axis` on.
struct LayerNormParams {
  int64_t axis = -1;
  double epsilon = 1e-5;
};
// batch_norm_apply: relu, or with clipMax (relu set, no residual) ReLU6's clip(t, 0, clipMax).
struct BatchNormApplyParams {
  bool relu = false;
  std::optional<double> clipMax;
};
struct GemmParams {
  bool transA = false, transB = false;
  double alpha = 1.0, beta = 1.0;
};
// attention and attention_backward: the factor of the scores, softmax(scale q k^T) (the compiler
// writes 1/sqrt(D) for the usual scaled dot-product attention).
struct AttentionParams {
  double scale = 1.0;
};
struct SoftmaxCrossEntropyParams {
  double labelSmoothing = 0.0;
  shape::Reduction reduction = shape::Reduction::Mean;
};

// Training-step kernels.
struct DropoutParams {
  double ratio = 0.5;
  int64_t seed = 0, salt = 0;
  // One draw per sample (index along dimension 0) instead of per element: drop path.
  bool perSample = false;
};
struct ReduceSumToParams {
  double scale = 1.0;
};
struct BatchNormRunningUpdateParams {
  double momentum = 0.1, epsilon = 1e-5;
  int64_t count = 0; // elements per channel (N*H*W); required
  bool sync = false; // the statistics are over every replica's batch: count times the replicas
};
struct SgdParams {
  double momentum = 0.0, weightDecay = 0.0, dampening = 0.0;
  bool nesterov = false;
};
struct AdamWParams {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
};
struct LrScheduleParams {
  enum class Kind { Constant, Step, Cosine };
  Kind kind = Kind::Constant;
  double baseLr = 0.0, gamma = 0.1, minLr = 0.0;
  int64_t warmupSteps = 0, stepSize = 0, totalSteps = 0;
};
struct FillParams {
  double value = 0.0;
};

// Mixed-precision training kernels (loss scaling, gradient clipping, counters, statistics).
struct ClipGradNormParams {
  double maxNorm = 0.0; // required
};
struct UpdateLossScaleParams {
  double growth = 2.0, backoff = 0.5;
  int64_t interval = 2000;
};
// all_reduce: what each element becomes across the replicas.
enum class ReplicaReduction { Mean, Sum, Max };
struct AllReduceParams {
  ReplicaReduction reduction = ReplicaReduction::Mean;
};
struct IncrementParams {
  // With a flag input: count only when the flag is nonzero ("set") or zero ("clear", default).
  bool whenSet = false;
};

Expected<Conv2dParams> parseConv2d(const Kernel &k); // also conv2d_backward_data/filter

// Whether the kernel stands for a group of ops a backend may run fused or as the group: a fused
// op (ops.def's last section), or a data gradient with an accumulated gradient
// (conv2d_backward_data's third input, castor-fuse-gradient-add).
bool isFusedKernel(const Kernel &k);
// max_pool2d, avg_pool2d and their _backward kernels.
Expected<Pool2dParams> parsePool2d(const Kernel &k);
Expected<DropoutParams> parseDropout(const Kernel &k); // dropout, dropout_backward
Expected<ReduceSumToParams> parseReduceSumTo(const Kernel &k);
Expected<BatchNormRunningUpdateParams> parseBatchNormRunningUpdate(const Kernel &k);
Expected<SgdParams> parseSgd(const Kernel &k);
Expected<AdamWParams> parseAdamW(const Kernel &k);
Expected<LrScheduleParams> parseLrSchedule(const Kernel &k);
Expected<FillParams> parseFill(const Kernel &k);
Expected<ClipGradNormParams> parseClipGradNorm(const Kernel &k);
Expected<UpdateLossScaleParams> parseUpdateLossScale(const Kernel &k);
Expected<IncrementParams> parseIncrement(const Kernel &k);
Expected<AllReduceParams> parseAllReduce(const Kernel &k);
Expected<BatchNormParams> parseBatchNorm(const Kernel &k);
Expected<BatchNormReluParams> parseBatchNormRelu(const Kernel &k);
// Whether `name` is an attribute of a fused batch-norm-ReLU kernel's activation (clip_max), not of
// its batch norm: the batch-norm step of a composed fused kernel takes every other one.
bool isBatchNormReluActivationAttr(const std::string &name);
Expected<BatchNormApplyParams> parseBatchNormApply(const Kernel &k);
Expected<LayerNormParams> parseLayerNorm(const Kernel &k);
Expected<GemmParams> parseGemm(const Kernel &k);
Expected<SoftmaxCrossEntropyParams> parseSoftmaxCrossEntropy(const Kernel &k);
Expected<AttentionParams> parseAttention(const Kernel &k); // attention, attention_backward
// transpose's permutation.
struct TransposeParams {
  std::vector<int64_t> perm;
};
// slice's and slice_backward's per-dimension starts, ends and steps (ONNX semantics, one entry
// per dimension of the sliced tensor).
struct SliceParams {
  std::vector<int64_t> starts, ends, steps;
};
Expected<TransposeParams> parseTranspose(const Kernel &k);
Expected<SliceParams> parseSlice(const Kernel &k);
// "axis" of concat (default 0... required), softmax (default -1) and flatten (default 1).
Expected<int64_t> parseAxis(const Kernel &k, int64_t fallback);
// A unary element-wise op (elementwise_ops.h) or its gradient: the op's attributes, each read by
// the type of its field, then the op's own check. The op and its _backward take the same ones.
template <class Op> Expected<Op> parseElementwise(const Kernel &k) {
  AttrReader r(k);
  Op op;
  op.attrs([&r](const char *name, auto &field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>)
      field = r.boolean(name, field);
    else
      field = r.real(name, field);
  });
  CASTOR_RETURN_IF_ERROR(r.finish());
  if (const char *refused = op.check())
    return Status::error(refused);
  return op;
}

// Ops without attributes (add, mul, ...) and those whose attributes are informative only
// (dropout's ratio).
Status parseNoAttrs(const Kernel &k, const std::vector<std::string> &ignored = {});

} // namespace castor::plan
