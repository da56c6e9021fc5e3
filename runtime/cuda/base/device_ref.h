// A device operand as the CUDA backend's launch functions take it (kernels/types.h): a device
// pointer and its dtype (the plan's DType values). Plain C++, so that .cu files include it
// without the plan's protobuf headers.
#pragma once

namespace castor::cuda {

enum DType : int { kF32 = 1, kF16 = 2, kBF16 = 3, kF64 = 4, kI64 = 5 };

struct Ref {
  void *p = nullptr;
  int dt = kF32;
};

constexpr int kMaxRank = 8;

} // namespace castor::cuda
