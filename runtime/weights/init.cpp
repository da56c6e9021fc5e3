#include "weights/init.h"

#include "castor/float_convert.h"
#include "castor/fnv1a.h"
#include "host/parallel.h"
#include "weights/philox.h"

#include <cmath>
#include <cstring>

namespace castor::weights {

uint64_t parameterNameHash(const std::string &name) { return fnv1a64(name); }

namespace {
inline double u53(uint32_t a, uint32_t b) {
  return double((uint64_t(a) << 32 | b) >> 11) * 0x1.0p-53;
}

// Element i of a parameter depends on i alone (its own Philox block), so any split into chunks
// gives the same bits; ResNet-50's 25 million weights take a second on one core.
constexpr size_t kMinChunk = size_t(1) << 16;

template <typename Body> void forEachIndex(int64_t count, Body body) {
  host::parallelChunks(size_t(count), kMinChunk, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      body(int64_t(i));
  });
}
} // namespace

Expected<std::vector<double>> initialValues(const plan::Parameter &p, int64_t count, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(count));
  const uint64_t h = parameterNameHash(p.name());
  const PhiloxKey key{uint32_t(seed), uint32_t(seed >> 32)};
  auto words = [&](int64_t i) {
    return philox4x32_10({uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32), uint32_t(h), uint32_t(h >> 32)}, key);
  };
  switch (p.init()) {
  case plan::Parameter::ZEROS:
    break;
  case plan::Parameter::ONES:
    for (double &e : v)
      e = 1.0;
    break;
  case plan::Parameter::FILL:
    for (double &e : v)
      e = p.init_value();
    break;
  case plan::Parameter::LINEAR_UNIFORM: {
    if (p.fan_in() <= 0)
      return Status::error("parameter '" + p.name() + "': linear_uniform needs a positive fan_in");
    const double bound = 1.0 / std::sqrt(double(p.fan_in()));
    forEachIndex(count, [&](int64_t i) {
      auto w = words(i);
      v[size_t(i)] = -bound + 2.0 * bound * u53(w[0], w[1]);
    });
    break;
  }
  case plan::Parameter::KAIMING_NORMAL: {
    if (p.fan_out() <= 0)
      return Status::error("parameter '" + p.name() + "': kaiming_normal needs a positive fan_out");
    const double stddev = std::sqrt(2.0 / double(p.fan_out()));
    const double twoPi = 6.283185307179586476925286766559;
    forEachIndex(count, [&](int64_t i) {
      auto w = words(i);
      double r = std::sqrt(-2.0 * std::log(u53(w[0], w[1]) + 0x1.0p-54));
      v[size_t(i)] = stddev * r * std::cos(twoPi * u53(w[2], w[3]));
    });
    break;
  }
  case plan::Parameter::FILE:
    return Status::error("parameter '" + p.name() + "' is initialized from a weights file");
  default:
    return Status::error("parameter '" + p.name() + "' has no valid initializer");
  }
  return v;
}

std::vector<uint8_t> encodeValues(plan::DType dtype, const std::vector<double> &values) {
  std::vector<uint8_t> out;
  encodeValues(dtype, values, out);
  return out;
}

void encodeValues(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out, int threads) {
  const size_t size = plan::dtypeSize(dtype);
  out.resize(values.size() * size);
  host::parallelChunks(
      values.size(), kMinChunk,
      [&](size_t begin, size_t end) {
        encodeValues(dtype, values.data() + begin, end - begin, out.data() + begin * size);
      },
      threads);
}

void encodeValues(plan::DType dtype, const double *values, size_t count, uint8_t *p) {
  for (size_t i = 0; i < count; ++i) {
    double x = values[i];
    switch (dtype) {
    case plan::F32: {
      float f = float(x);
      std::memcpy(p + 4 * i, &f, 4);
      break;
    }
    case plan::F64:
      std::memcpy(p + 8 * i, &x, 8);
      break;
    case plan::F16: {
      uint16_t h = doubleToHalf(x);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case plan::BF16: {
      uint16_t h = doubleToBFloat16(x);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case plan::I64: {
      int64_t n = int64_t(x);
      std::memcpy(p + 8 * i, &n, 8);
      break;
    }
    default:
      break;
    }
  }
}

std::vector<double> decodeValues(plan::DType dtype, const std::vector<uint8_t> &bytes) {
  uint64_t size = plan::dtypeSize(dtype);
  std::vector<double> v(size ? bytes.size() / size : 0);
  const uint8_t *p = bytes.data();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
    case plan::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v[i] = f;
      break;
    }
    case plan::F64:
      std::memcpy(&v[i], p + 8 * i, 8);
      break;
    case plan::F16:
    case plan::BF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = dtype == plan::F16 ? halfToDouble(h) : bfloat16ToDouble(h);
      break;
    }
    case plan::I64: {
      int64_t n;
      std::memcpy(&n, p + 8 * i, 8);
      v[i] = double(n);
      break;
    }
    default:
      break;
    }
  }
  return v;
}

} // namespace castor::weights
