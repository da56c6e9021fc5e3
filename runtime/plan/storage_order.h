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
// A transposed view (a transpose (0,2,3,1) or (0,3,1,2) whose result is a view of its operand)
// reads [N,C,H,W] stored channels-last as [N,H,W,C] row-major: the same bytes. It requires its
// [N,C,H,W] side's group channels-last (whatever else the group touches) and its [N,H,W,C] side
// row-major. A group required in both orders is a conflict: the compiler makes no such view, the
// validator refuses a plan with one.
//
// The CUDA backend stores tensors this way; the compiler asks it before making a reshape or a
// transpose a view.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

namespace castor::plan {

// Whether a rank-4 tensor's channels-last and row-major orders differ.
bool ordersDiffer(const Tensor &t);

// Which groups a backend stores channels-last: those that prefer it (the CUDA backend's
// channels-last mode), or only those a transposed view requires (every other tensor row-major).
enum class OrderPreference { ConvolutionsChannelsLast, RowMajor };

std::unordered_set<uint32_t> rowMajorTensors(const plan::Plan &plan,
                                             OrderPreference preference = OrderPreference::ConvolutionsChannelsLast);

// The two sides of a transposed view: the [N,C,H,W] tensor stored channels-last and the
// [N,H,W,C] tensor, row-major, that is the same bytes.
struct TransposedView {
  int kernel;              // index in plan.kernels
  uint32_t channelsLast;   // the [N,C,H,W] side
  uint32_t rowMajor;       // the [N,H,W,C] side
};

// Whether a transpose's perm moves a rank-4 tensor from [N,C,H,W] to [N,H,W,C] (0,2,3,1) or back
// (0,3,1,2): the perms a transposed view may have. `fromChannels` says which.
bool isChannelsLastPerm(const std::vector<int64_t> &perm, bool *fromChannels = nullptr);

// The plan's transposed views, in kernel order.
std::vector<TransposedView> transposedViews(const plan::Plan &plan);

// The transposed views whose sides cannot be stored as the view needs them (their kernel indices).
std::vector<int> conflictingTransposedViews(const plan::Plan &plan);

// The tensors the plan's transposed views require channels-last: each view's [N,C,H,W] side and
// the same-shape views sharing its bytes. A backend storing everything else row-major (the CPU
// reference) stores these channels-last.
std::unordered_set<uint32_t> channelsLastForViews(const plan::Plan &plan);

// Bytes of a rank-4 [N,C,H,W] tensor moved between row-major and channels-last order.
void toChannelsLast(const Tensor &t, const uint8_t *rowMajor, uint8_t *channelsLast);
void fromChannelsLast(const Tensor &t, const uint8_t *channelsLast, uint8_t *rowMajor);

} // namespace castor::plan
