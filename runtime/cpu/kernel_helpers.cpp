// Shape and loss helpers the CPU kernel files share (declared in cpu_internal.h).
#include "cpu/cpu_internal.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <cmath>

namespace castor::cpu {

std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  size_t rank = out.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    size_t d = in.size() - 1 - i;
    size_t o = rank - 1 - i;
    strides[o] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  int64_t n = *shape::elementCount(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    map[i] = at;
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      at += strides[d];
      if (idx[d] < out[d])
        break;
      at -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return map;
}

int64_t span(const Shape &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    n *= s[i];
  return n;
}

Expected<AxisSplit> splitAtAxis(const Kernel &k, int64_t fallback, const Shape &s) {
  auto axis = plan::parseAxis(k, fallback);
  if (!axis)
    return axis.status();
  auto ax = shape::normalizeAxis(*axis, int64_t(s.size()));
  if (!ax)
    return Status::error("axis out of range");
  const size_t a = size_t(*ax);
  return AxisSplit{*ax, span(s, 0, a), s[a], span(s, a + 1, s.size())};
}

Status checkLabel(int64_t label, int64_t n, int64_t C) {
  if (label < 0 || label >= C)
    return Status::error("label " + std::to_string(label) + " of sample " + std::to_string(n) + " is outside [0, " +
                         std::to_string(C) + ")");
  return Status::ok();
}

double logSumExp(const double *row, int64_t C) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < C; ++j)
    mx = std::max(mx, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < C; ++j)
    sum += std::exp(row[j] - mx);
  return mx + std::log(sum);
}

std::vector<std::pair<int64_t, int64_t>> windowRanges(int64_t outSize, int64_t inSize, int64_t taps, int64_t stride,
                                                      int64_t pad, int64_t dilation) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t o = 0; o < outSize; ++o) {
    int64_t lo = taps, hi = 0;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t i = o * stride - pad + k * dilation;
      if (i >= 0 && i < inSize) {
        lo = std::min(lo, k);
        hi = k + 1;
      }
    }
    ranges.emplace_back(lo, std::max(lo, hi));
  }
  return ranges;
}

} // namespace castor::cpu
