#include "cuda/kernels/broadcast.h"

#include <string>

namespace castor::cuda {

// Element strides of `in` (right-aligned against `out`, 0 where it broadcasts).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t d = in.size() - 1 - i, o = out.size() - 1 - i;
    strides[o] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

Expected<Broadcast> makeBroadcast(const Shape &a, const Shape &b, const Shape &out) {
  Broadcast bc;
  if (a == out && b == out)
    return bc; // rank 0: same shapes, flat indices
  if (out.size() > size_t(kMaxRank))
    return Status::error("broadcasting over more than " + std::to_string(kMaxRank) + " dimensions");
  bc.rank = int(out.size());
  auto sa = broadcastStrides(a, out), sb = broadcastStrides(b, out);
  for (size_t d = 0; d < out.size(); ++d)
    bc.out[d] = out[d], bc.sa[d] = sa[d], bc.sb[d] = sb[d];
  return bc;
}

// Flat indices of the batch entries of `in` broadcast against `out` (matmul's batch dims).
std::vector<int64_t> broadcastIndex(const Shape &in, const Shape &out) {
  const auto strides = broadcastStrides(in, out);
  const int64_t n = span(out, 0, out.size());
  std::vector<int64_t> map(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, at = 0;
    for (size_t d = out.size(); d-- > 0;) {
      at += (rest % out[d]) * strides[d];
      rest /= out[d];
    }
    map[size_t(i)] = at;
  }
  return map;
}

} // namespace castor::cuda
