#include "data/image_encoding.h"

namespace castor::data {

plan::DType hostImageDType(plan::DType planDType) {
  const bool isFloat =
      planDType == plan::F16 || planDType == plan::BF16 || planDType == plan::F32 || planDType == plan::F64;
  return isFloat ? planDType : plan::F64;
}

} // namespace castor::data
