// Softmax, softmax cross-entropy and the correct-count (loss.cu).
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

enum class LossReduction : int { Mean, Sum, None };

cudaError_t softmax(Ref x, Ref y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
cudaError_t softmaxBackward(Ref dy, Ref y, Ref dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
// Labels outside [0, C) give a NaN loss (the device cannot report an error without a sync).
// scratch: N doubles (per-row losses, summed in a fixed order).
size_t lossScratchBytes(int64_t N);
cudaError_t softmaxCrossEntropy(Ref logits, const int64_t *labels, Ref loss, Ref probs, int64_t N, int64_t C,
                                double smoothing, LossReduction red, void *scratch, cudaStream_t s);
cudaError_t softmaxCrossEntropyBackward(Ref dloss, Ref logits, const int64_t *labels, Ref dx, int64_t N, int64_t C,
                                        double smoothing, LossReduction red, cudaStream_t s);
cudaError_t countCorrect(Ref logits, const int64_t *labels, int64_t *out, int64_t N, int64_t C, cudaStream_t s);

} // namespace castor::cuda
