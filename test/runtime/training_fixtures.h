// Fixtures of the training tests: a small CNN's training step and its inference form, as the
// compiler emits them, and IDX files of a learnable toy data set.
#pragma once

#include "plan_builder.h"

#include <cstdint>
#include <string>

namespace castor::test {

// conv (stride 2) -> batch norm -> relu -> max pool -> flatten -> dropout -> linear ->
// cross-entropy on images [batch, 1, 28, 28]; backward; SGD and AdamW; outputs loss, correct.
// With `fused`, as the compiler's fusion pass leaves it: batch norm and relu as one
// batch_norm_relu_training, their backwards as one batch_norm_relu_training_backward.
plan::Plan trainingPlan(int64_t batch = 4, bool fused = false);
// The same model's inference form: images [N, 1, 28, 28] -> logits "output" [N, 10].
plan::Plan forwardPlan(int64_t N);
// "<prefix>-images-idx3-ubyte" and "<prefix>-labels-idx1-ubyte" (".gz" when gz) in `dir`:
// `count` 28x28 images whose class (n * 7 mod 10) shows as a bright block at its own place.
void writeIdxSet(const std::string &dir, const std::string &prefix, int count, bool gz);

} // namespace castor::test
