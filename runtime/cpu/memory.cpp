// The CPU backend's arena, element by element in double precision (Memory in cpu_internal.h):
// reads widen exactly, writes round once to nearest even into the tensor's dtype.
#include "cpu/convert16.h"
#include "cpu/cpu_internal.h"

#include "castor/float_convert.h"

#include <cmath>
#include <cstring>

namespace castor::cpu {

void Memory::readRange(const Tensor &t, int64_t begin, int64_t n, double *v) {
  const uint8_t *p = slot(t);
  switch (t.dtype()) {
  case plan::F32:
    p += 4 * begin;
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v[i] = f;
    }
    break;
  case plan::F64:
    std::memcpy(v, p + 8 * begin, size_t(n) * 8);
    break;
  case plan::F16:
  case plan::BF16:
    decode16(p + 2 * begin, n, t.dtype() == plan::BF16, v);
    break;
  case plan::I64:
    p += 8 * begin;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x;
      std::memcpy(&x, p + 8 * i, 8);
      v[i] = double(x);
    }
    break;
  default:
    break;
  }
}

Values Memory::read(const Tensor &t) {
  int64_t n = countOf(t);
  Values v = unsetValues(static_cast<size_t>(n)); // readRange writes every element
  double *dst = v.data();
  parallelChunks(n, 1.0, [&](int64_t i0, int64_t m) { readRange(t, i0, m, dst + i0); });
  return v;
}

std::vector<int64_t> Memory::readInts(const Tensor &t) {
  std::vector<int64_t> v(size_t(countOf(t)));
  std::memcpy(v.data(), slot(t), v.size() * 8);
  return v;
}

void Memory::writeInts(const Tensor &t, const std::vector<int64_t> &v) {
  std::memcpy(slot(t), v.data(), size_t(countOf(t)) * 8);
}

void Memory::writeRange(const Tensor &t, int64_t begin, int64_t n, const double *v) {
  uint8_t *p = slot(t);
  switch (t.dtype()) {
  case plan::F32:
    p += 4 * begin;
    for (int64_t i = 0; i < n; ++i) {
      float f = float(v[i]);
      std::memcpy(p + 4 * i, &f, 4);
    }
    break;
  case plan::F64:
    std::memcpy(p + 8 * begin, v, size_t(n) * 8);
    break;
  case plan::F16:
  case plan::BF16:
    encode16(v, n, t.dtype() == plan::BF16, p + 2 * begin);
    break;
  case plan::I64:
    p += 8 * begin;
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = int64_t(v[i]);
      std::memcpy(p + 8 * i, &x, 8);
    }
    break;
  default:
    break;
  }
}

double roundToDtype(double v, plan::DType dtype) {
  switch (dtype) {
  case plan::F32:
    return double(float(v));
  case plan::F16:
    return halfToDouble(doubleToHalf(v));
  case plan::BF16:
    return bfloat16ToDouble(doubleToBFloat16(v));
  default:
    return v;
  }
}

void Memory::write(const Tensor &t, const Values &v) {
  const double *src = v.data();
  parallelChunks(countOf(t), 1.0, [&](int64_t i0, int64_t m) { writeRange(t, i0, m, src + i0); });
}

} // namespace castor::cpu
