#include "cuda/executor/kernel_table.h"

#include "castor/cuda_backend.h"

#include "cuda/cublaslt/matmul.h"
#include "cuda/cudnn/builders.h"
#include "cuda/kernels/builders.h"

namespace castor::cuda {

using plan::OpId;

// Library calls where a library has the op (cuDNN, cuBLASLt), the own kernels elsewhere. Batch
// norm's running-statistics update and the convolution bias gradient are own kernels.
const plan::OpTable<Builder> &cudaKernels() {
  static const plan::OpTable<Builder> elementwise = {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name) {OpId::id, own::buildElementwise}, {OpId::id##Backward, own::buildElementwise},
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  };
  static const plan::OpTable<Builder> table = plan::OpTable<Builder>{
      {OpId::Conv2d, buildConvolution},
      {OpId::BatchNormTraining, buildBatchNorm},
      {OpId::BatchNormInference, buildBatchNorm},
      {OpId::BatchNormApply, own::buildBatchNormApply},
      {OpId::Add, own::buildBinary},
      {OpId::Transpose, own::buildTranspose},
      {OpId::LayerNorm, own::buildLayerNorm},
      {OpId::LayerNormBackward, own::buildLayerNormBackward},
      {OpId::Slice, own::buildSlice},
      {OpId::SliceBackward, own::buildSlice},
      {OpId::Mul, own::buildBinary},
      {OpId::Identity, own::buildCopyOrCast},
      {OpId::Cast, own::buildCopyOrCast},
      {OpId::Reshape, own::buildCopyOrCast},
      {OpId::Flatten, own::buildCopyOrCast},
      {OpId::Dropout, own::buildDropout},
      {OpId::MaxPool2d, own::buildPool},
      {OpId::AvgPool2d, own::buildPool},
      {OpId::GlobalAvgPool, own::buildGlobalAvgPool},
      {OpId::Gemm, buildCublasLtMatmul},
      {OpId::Matmul, buildCublasLtMatmul},
      {OpId::Concat, own::buildConcatOrSplit},
      {OpId::Softmax, own::buildSoftmax},
      {OpId::SoftmaxCrossEntropy, own::buildSoftmaxCrossEntropy},
      {OpId::Attention, buildAttention},
      {OpId::Conv2dBackwardData, buildConvolution},
      {OpId::Conv2dBackwardFilter, buildConvolution},
      {OpId::Conv2dBackwardBias, own::buildConv2dBackwardBias},
      {OpId::ReduceSumTo, own::buildReduceSumTo},
      {OpId::BatchNormTrainingBackward, buildBatchNorm},
      {OpId::BatchNormRunningUpdate, own::buildBatchNormRunningUpdate},
      {OpId::DropoutBackward, own::buildDropout},
      {OpId::MaxPool2dBackward, own::buildPoolBackward},
      {OpId::AvgPool2dBackward, own::buildPoolBackward},
      {OpId::GlobalAvgPoolBackward, own::buildGlobalAvgPool},
      {OpId::SoftmaxBackward, own::buildSoftmax},
      {OpId::SoftmaxCrossEntropyBackward, own::buildSoftmaxCrossEntropyBackward},
      {OpId::Split, own::buildConcatOrSplit},
      {OpId::AttentionBackward, buildAttention},
      {OpId::CountCorrect, own::buildCountCorrect},
      {OpId::Fill, own::buildFill},
      {OpId::SgdUpdate, own::buildSgdUpdate},
      {OpId::AdamwUpdate, own::buildAdamwUpdate},
      {OpId::Increment, own::buildIncrement},
      {OpId::LrSchedule, own::buildLrSchedule},
      {OpId::AllReduce, own::buildAllReduce},
      {OpId::UnscaleGradients, own::buildUnscaleGradients},
      {OpId::ClipGradNorm, own::buildUnscaleGradients},
      {OpId::UpdateLossScale, own::buildUpdateLossScale},
      {OpId::GradientStats, own::buildGradientStats},
      {OpId::BatchNormReluTraining, buildBatchNormRelu},
      {OpId::BatchNormReluTrainingBackward, buildBatchNormRelu},
      {OpId::FusedElementwise, own::buildFusedElementwise},
  }.merge(elementwise);
  return table;
}

const plan::OpTable<CompileAheadFn> &cudaCompileAhead() {
  static const plan::OpTable<CompileAheadFn> table = {
      {OpId::Conv2dBackwardData, compileAheadConvolution},
  };
  return table;
}

} // namespace castor::cuda

namespace castor {
std::vector<plan::OpId> cudaBackendOps() { return cuda::cudaKernels().implemented(); }
} // namespace castor
