#include "data/image_encoding.h"

#include "weights/init.h"

namespace castor::data {

plan::DType hostImageDType(plan::DType planDType) {
  const bool isFloat =
      planDType == plan::F16 || planDType == plan::BF16 || planDType == plan::F32 || planDType == plan::F64;
  return isFloat ? planDType : plan::F64;
}

void encodeValuesParallel(plan::DType dtype, const std::vector<double> &values, std::vector<uint8_t> &out,
                          int threads) {
  const size_t size = plan::dtypeSize(dtype);
  out.resize(values.size() * size);
  // A conversion is a few instructions per value: only large chunks pay for a thread.
  host::parallelChunks(
      values.size(), size_t(1) << 18,
      [&](size_t begin, size_t end) {
        weights::encodeValues(dtype, values.data() + begin, end - begin, out.data() + begin * size);
      },
      threads);
}

} // namespace castor::data
