// What the builders of the CUDA backend's own kernels share (builders.cpp): the layout helpers,
// scratch buffers and operand checks; and the builders themselves, which
// executor/kernel_table.cpp maps ops to.
#pragma once

#include <functional>

#include "cuda/base/device_context.h"
#include "cuda/kernels/elementwise.h"

#include <limits>
#include <string>
#include <vector>

namespace castor::cuda::own {

using plan::Kernel;
using plan::OpId;
using plan::Tensor;

constexpr double inf = std::numeric_limits<double>::infinity();

// kTagBnInvStd: the inverse standard deviation the graph API's batch-norm inference reads
// (cudnn/batch_norm_graph.cpp); kTagBnReluMask: the ReLU's mask the own batch-norm-ReLU forward
// records for its backward (cudnn/batch_norm_relu.cpp). 0xE is the convolution's statistics'
// (cudnn/convolution_stats.cpp).
enum ScratchTag : uint32_t {
  kTagChannel = 0x8,
  kTagLoss = 0x9,
  kTagMulti = 0xA,
  kTagReorder = 0xB,
  kTagPoolTaps = 0xC,
  kTagBnInvStd = 0xD,
  kTagBnReluMask = 0xF
};

Expected<void *> scratchFor(DeviceContext &ctx, ScratchTag tag, const Tensor *owner, size_t bytes);

// The operands (inputs, then outputs) of a plan kernel; null for an unknown id.
std::vector<const Tensor *> operandsOf(const DeviceContext &ctx, const Kernel &k);

// Horizontal batching of independent kernels (consecutive optimizer updates, running-statistics
// updates): the plan indices from the kernel being built on, as long as `joins` accepts the
// kernel and nothing it touches is still being written on another stream. Empty when the
// context has no plan (a single kernel built alone). The caller runs them all in one launch and
// marks the others in ctx.coveredKernels, whose builders then return coveredKernel().
std::vector<int> consecutiveRun(const DeviceContext &ctx, const std::function<bool(const Kernel &)> &joins);
bool isCovered(const DeviceContext &ctx);
RunFn coveredKernel();

Status layoutError(const std::string &op, const std::string &what);

// Whether t's storage order differs from the plan's row-major order (channels-last with C > 1
// and H*W > 1; [N,1,H,W] and [N,C,1,1] are the same bytes either way).
bool reordered(const DeviceContext &ctx, const Tensor *t);

// Operands of one shape must share their storage order.
Status sameOrder(const DeviceContext &ctx, const std::string &op, std::initializer_list<const Tensor *> ts);

// Element stride in storage of each logical dim of t.
std::vector<int64_t> storageStrides(const DeviceContext &ctx, const Tensor &t);

// The logical dims of t from the outermost in storage to the innermost.
std::vector<int> storageOrder(const DeviceContext &ctx, const Tensor &t);

// a, b broadcast against out, in out's storage order, each indexed by its storage strides.
Expected<Broadcast> physicalBroadcast(const DeviceContext &ctx, const Tensor *a, const Tensor *b, const Tensor *out);

// x = [A, C, B] per channel (dim 1): channels-last [N*H*W, C, 1], else [N, C, prod(rest)].
struct ChannelGeometry {
  int64_t A, C, B;
};

ChannelGeometry channelGeometry(const DeviceContext &ctx, const Tensor &x);

// A check that the kernel has at least nin inputs and nout outputs.
struct OperandCheck {
  const std::string &op;
  const TensorList &in, &out;
  Status operator()(size_t nin, size_t nout) const;
};
OperandCheck operandCheck(const std::string &op, const TensorList &in, const TensorList &out);

// One builder per op family, each beside its .cu file (elementwise.cpp, reduce.cpp, pooling.cpp,
// loss.cpp, optimizer.cpp, strided.cpp, layer_norm.cpp).
using OwnBuilder = Expected<RunFn>(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                                   const TensorList &out);
OwnBuilder buildAdamwUpdate;
OwnBuilder buildBatchNormApply;
OwnBuilder buildBatchNormInference;
OwnBuilder buildBatchNormRunningUpdate;
OwnBuilder buildBatchNormTraining;
OwnBuilder buildBatchNormTrainingBackward;
OwnBuilder buildBinary;
OwnBuilder buildConcatOrSplit;
OwnBuilder buildConv2dBackwardBias;
OwnBuilder buildCopyOrCast;
OwnBuilder buildCountCorrect;
OwnBuilder buildDropout;
OwnBuilder buildFill;
OwnBuilder buildFusedElementwise; // fused_elementwise.cpp: a generated kernel per program
OwnBuilder buildGlobalAvgPool;
OwnBuilder buildGradientStats;
OwnBuilder buildAllReduce;
OwnBuilder buildIncrement;
OwnBuilder buildLayerNorm;
OwnBuilder buildLayerNormBackward;
OwnBuilder buildLrSchedule;
OwnBuilder buildPool;
OwnBuilder buildPoolBackward;
OwnBuilder buildReduceSumTo;
OwnBuilder buildSgdUpdate;
OwnBuilder buildSlice;
OwnBuilder buildSoftmax;
OwnBuilder buildSoftmaxCrossEntropy;
OwnBuilder buildSoftmaxCrossEntropyBackward;
OwnBuilder buildTranspose;
OwnBuilder buildElementwise; // every unary element-wise op of ops.def and its gradient
OwnBuilder buildUnscaleGradients;
OwnBuilder buildUpdateLossScale;

} // namespace castor::cuda::own
