// The depthwise kernels' host-side dispatch (depthwise_conv.cu, depthwise_rows.cu): a runtime
// dtype, kernel size or stride as the template argument of one instantiation.
#pragma once

#include "cuda/kernels/types.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace castor::cuda::depthwise::dispatch {

template <int V> using Int = std::integral_constant<int, V>;

// f(T{}) for a float dtype of the kernels (f32, f16, bf16).
template <typename F> cudaError_t withType(int dt, F &&f) {
  switch (dt) {
  case kF32:
    return f(float{});
  case kF16:
    return f(__half{});
  case kBF16:
    return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

// f(Int<K>{}) for a kernel size 3, 5 or (up to MaxK) 7: the row kernels instantiate no 7x7.
template <int MaxK = 7, typename F> cudaError_t withKernelSize(int K, F &&f) {
  switch (K) {
  case 3:
    return f(Int<3>{});
  case 5:
    return f(Int<5>{});
  case 7:
    if constexpr (MaxK >= 7)
      return f(Int<7>{});
  }
  return cudaErrorInvalidValue;
}

// f(Int<1>{}) or f(Int<2>{}) for v = 1 or 2 (a stride; the row kernels: a padding parity + 1).
template <typename F> cudaError_t withOneOrTwo(int v, F &&f) {
  if (v == 1)
    return f(Int<1>{});
  if (v == 2)
    return f(Int<2>{});
  return cudaErrorInvalidValue;
}

} // namespace castor::cuda::depthwise::dispatch
