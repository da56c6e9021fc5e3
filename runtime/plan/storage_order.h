// Which rank-4 tensors stay row-major in a channels-last plan. Convolutions, batch norm and
// pooling want channels-last; matrix products and layer norm need their rows contiguous
// (attention's [N, heads, S, d], ConvNeXt's [N, H, W, C]). Tensors that one kernel reads or
// writes together must share a layout unless the kernel moves elements through each operand's
// own strides (transpose, slice, reshapes, add and mul): such groups are joined. A group is
// channels-last when it touches a convolution, a batch norm or a pooling kernel and no matrix
// product or layer norm; every other group stays row-major (a channels-last tensor that only
// reshapes and transposes touch would cost a reorder at each of them). A view (Tensor.view_of)
// reads its source's bytes in another shape, so where the shapes differ both stay row-major
// unless the rank-4 side's two orders are the same bytes (one channel, or one pixel).
//
// The CUDA backend stores tensors this way; the compiler asks it before making a reshape a view.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <unordered_set>

namespace castor::plan {

// Whether a rank-4 tensor's channels-last and row-major orders differ.
bool ordersDiffer(const Tensor &t);

std::unordered_set<uint32_t> rowMajorTensors(const plan::Plan &plan);

} // namespace castor::plan
