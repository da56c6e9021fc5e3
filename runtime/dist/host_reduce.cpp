#include "dist/host_reduce.h"

#include "castor/float_convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace castor::dist {

namespace {

// Max that propagates NaN: a replica whose gradients overflowed must not be hidden by the others.
template <typename T> T maxKeepingNan(T acc, T x) {
  if constexpr (std::is_floating_point_v<T>)
    return (x > acc || std::isnan(x)) ? x : acc;
  else
    return x > acc ? x : acc;
}

// F32, F64, I64: combined in their own type, one replica after the other.
template <typename T>
void reduceNative(T *inout, const std::vector<const void *> &others, size_t count, ReduceOp op) {
  for (const void *other : others) {
    const T *x = static_cast<const T *>(other);
    if (op == ReduceOp::Max) {
      for (size_t i = 0; i < count; ++i)
        inout[i] = maxKeepingNan(inout[i], x[i]);
    } else if constexpr (std::is_integral_v<T>) {
      for (size_t i = 0; i < count; ++i) // unsigned: wraps instead of overflowing
        inout[i] = T(uint64_t(inout[i]) + uint64_t(x[i]));
    } else {
      for (size_t i = 0; i < count; ++i)
        inout[i] += x[i];
    }
  }
}

// F16, BF16: every replica's value widened to f32, combined there, rounded back once.
void reduce16(uint16_t *inout, const std::vector<const void *> &others, size_t count, ReduceOp op, bool brain) {
  auto widen = [brain](uint16_t v) { return brain ? bfloat16ToFloat(v) : halfToFloat(v); };
  for (size_t i = 0; i < count; ++i) {
    float acc = widen(inout[i]);
    for (const void *other : others) {
      float x = widen(static_cast<const uint16_t *>(other)[i]);
      acc = op == ReduceOp::Max ? maxKeepingNan(acc, x) : acc + x;
    }
    inout[i] = brain ? floatToBFloat16(acc) : floatToHalf(acc);
  }
}

} // namespace

void reduceInRankOrder(void *inout, const std::vector<const void *> &others, size_t count, plan::DType dtype,
                       ReduceOp op) {
  switch (dtype) {
  case plan::F32:
    return reduceNative(static_cast<float *>(inout), others, count, op);
  case plan::F64:
    return reduceNative(static_cast<double *>(inout), others, count, op);
  case plan::I64:
    return reduceNative(static_cast<int64_t *>(inout), others, count, op);
  case plan::F16:
    return reduce16(static_cast<uint16_t *>(inout), others, count, op, false);
  case plan::BF16:
    return reduce16(static_cast<uint16_t *>(inout), others, count, op, true);
  default:
    return;
  }
}

} // namespace castor::dist
