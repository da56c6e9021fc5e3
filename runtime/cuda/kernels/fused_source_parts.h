// The pieces that the writers of generated kernels share (fused_elementwise_source.cpp writes
// the element-wise kernel, fused_reduction_source.cpp the kernel with reduction outputs): the
// dtype spellings, the specialised index of an operand, the source's header (the program as a
// comment, the prelude, the text of elementwise_ops.h) and the program's instructions as C++.
#pragma once

#include "cuda/kernels/fused_elementwise_source.h"

namespace castor::cuda::source {

const char *suffix(plan::DType t);      // "f16": castor_ld_f16, castor_st_f16, castor_round_f16
const char *storageType(plan::DType t); // "castor_h16"
const char *accType(plan::DType t);     // "float", or "double" for f64
int64_t sizeOf(plan::DType t);
std::string valueName(const plan::ProgramValue &v); // "a0" for input 0, "t3" for instruction 3

// Whether `strides` walk `dims` contiguously, as the flat index does.
bool isFlat(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides);
// The index of an operand at flat index `i`, specialised to its strides (constants inlined, so
// that the divisions become multiplications).
std::string indexExpression(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides, bool index64);

std::string sourceHeader(const FusedKernelSpec &spec);

// The instructions, each `const A tK = castor_round_T(...)` over the inputs' values aK; the op
// structs as extra kernel parameters (params) and their bytes (opArguments).
struct ProgramBody {
  std::string body, params;
  std::vector<std::vector<uint8_t>> opArguments;
};
Expected<ProgramBody> programBody(const FusedKernelSpec &spec);

// The kernel of a program with reduction outputs (fused_reduction_source.cpp).
Expected<FusedKernelSource> writeReductionKernel(const FusedKernelSpec &spec);

} // namespace castor::cuda::source
