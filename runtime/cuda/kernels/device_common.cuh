// Device-side helpers shared by the own CUDA kernels (elementwise.cu, reduce.cu, pooling.cu,
// loss.cu, optimizer.cu): typed element access with fp32 arithmetic for f32/f16/bf16 and f64
// arithmetic for f64, a runtime-typed fallback for operands of mixed dtypes, host-side dtype
// dispatch into template instantiations, 16-byte vectors, block sums and grid sizing.
//
// Dispatch: an op whose big operands share one dtype T runs the instantiation for T (`Io<T>`,
// computing in Acc<T>: float, or double for f64); operands of different dtypes run the `Any`
// instantiation (`AnyIo`: a switch per access, computing in double), the rare slow path.
#pragma once

#include "cuda/kernels/types.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace castor::cuda::detail {

constexpr int kThreads = 256;

// Multiprocessors of the device (set by the builders through configureDevice; queried once
// otherwise). Grids are capped at kBlocksPerSm blocks per multiprocessor.
int smCount();
constexpr int kBlocksPerSm = 8;

inline int gridFor(int64_t work, int threads = kThreads) {
  const int64_t want = (work + threads - 1) / threads;
  return int(std::max<int64_t>(1, std::min<int64_t>(want, int64_t(smCount()) * kBlocksPerSm)));
}

#define CASTOR_GRID_LOOP(i, n)                                                                                     \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

// --- Scalar conversions -----------------------------------------------------------------------

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <> struct AccOf<int64_t> { using type = double; };
template <typename T> using Acc = typename AccOf<T>::type;

__device__ __forceinline__ float toAcc(float v) { return v; }
__device__ __forceinline__ float toAcc(__half v) { return __half2float(v); }
__device__ __forceinline__ float toAcc(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ double toAcc(double v) { return v; }
__device__ __forceinline__ double toAcc(int64_t v) { return double(v); }

// Rounds once into T (int64: truncation toward zero, as the CPU reference's cast).
template <typename T> __device__ __forceinline__ T fromAcc(float v);
template <typename T> __device__ __forceinline__ T fromAcc(double v);
template <> __device__ __forceinline__ float fromAcc<float>(float v) { return v; }
template <> __device__ __forceinline__ float fromAcc<float>(double v) { return float(v); }
template <> __device__ __forceinline__ __half fromAcc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __half fromAcc<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromAcc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromAcc<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
template <> __device__ __forceinline__ double fromAcc<double>(float v) { return double(v); }
template <> __device__ __forceinline__ double fromAcc<double>(double v) { return v; }
template <> __device__ __forceinline__ int64_t fromAcc<int64_t>(float v) { return int64_t(v); }
template <> __device__ __forceinline__ int64_t fromAcc<int64_t>(double v) { return int64_t(v); }

// Any dtype through a switch (scalars, per-channel vectors, the mixed-dtype fallback).
__device__ __forceinline__ double ldAny(const void *p, int dt, int64_t i) {
  switch (dt) {
  case kF32:
    return static_cast<const float *>(p)[i];
  case kF16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case kF64:
    return static_cast<const double *>(p)[i];
  case kI64:
    return double(static_cast<const int64_t *>(p)[i]);
  }
  return 0.0;
}
__device__ __forceinline__ void stAny(void *p, int dt, int64_t i, double v) {
  switch (dt) {
  case kF32:
    static_cast<float *>(p)[i] = float(v);
    break;
  case kF16:
    static_cast<__half *>(p)[i] = __double2half(v);
    break;
  case kBF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
    break;
  case kF64:
    static_cast<double *>(p)[i] = v;
    break;
  case kI64:
    static_cast<int64_t *>(p)[i] = int64_t(v);
    break;
  }
}
__device__ __forceinline__ double ldAny(Ref r, int64_t i) { return ldAny(r.p, r.dt, i); }
__device__ __forceinline__ void stAny(Ref r, int64_t i, double v) { stAny(r.p, r.dt, i, v); }

// --- Accessors ----------------------------------------------------------------------------------

struct Any {}; // the mixed-dtype instantiation

template <typename T> struct Io {
  using Acc = detail::Acc<T>;
  T *p;
  __device__ __forceinline__ Acc ld(int64_t i) const { return toAcc(p[i]); }
  __device__ __forceinline__ void st(int64_t i, Acc v) const { p[i] = fromAcc<T>(v); }
};
struct AnyIo {
  using Acc = double;
  void *p;
  int dt;
  __device__ __forceinline__ double ld(int64_t i) const { return ldAny(p, dt, i); }
  __device__ __forceinline__ void st(int64_t i, double v) const { stAny(p, dt, i, v); }
};

template <typename T> struct IoOf {
  using type = Io<T>;
  static type make(Ref r) { return type{static_cast<T *>(r.p)}; }
};
template <> struct IoOf<Any> {
  using type = AnyIo;
  static type make(Ref r) { return type{r.p, r.dt}; }
};
template <typename T> typename IoOf<T>::type io(Ref r) { return IoOf<T>::make(r); }

template <typename T> struct Tag { using type = T; };

// f(Tag<T>) for dtype dt (f32/f16/bf16/f64; i64 too when withInt), else f(Tag<Any>).
template <typename F> cudaError_t withFloatType(int dt, F &&f) {
  switch (dt) {
  case kF32:
    return f(Tag<float>{});
  case kF16:
    return f(Tag<__half>{});
  case kBF16:
    return f(Tag<__nv_bfloat16>{});
  case kF64:
    return f(Tag<double>{});
  default:
    return f(Tag<Any>{});
  }
}
template <typename F> cudaError_t withAnyType(int dt, F &&f) {
  if (dt == kI64)
    return f(Tag<int64_t>{});
  return withFloatType(dt, f);
}

inline bool sameDtype(std::initializer_list<Ref> refs) {
  for (const Ref &r : refs)
    if (r.dt != refs.begin()->dt)
      return false;
  return true;
}
// Dispatch on the dtype shared by every operand in refs (a float dtype), else Any.
template <typename F> cudaError_t withSharedType(std::initializer_list<Ref> refs, F &&f) {
  if (!sameDtype(refs))
    return f(Tag<Any>{});
  return withFloatType(refs.begin()->dt, f);
}

// --- Vectors -------------------------------------------------------------------------------------

// V elements of T loaded or stored with one instruction (V * sizeof(T) <= 16, or two for 32).
template <typename T, int V> struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <typename T> constexpr int kVec = 16 / int(sizeof(T));

inline bool aligned(const void *p, size_t bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

// --- Conversions ---------------------------------------------------------------------------------

// y[i] = x[i] converted to Tout (through double where either side is f64, else float), for this
// thread's share of [0, n): i = first, first + stride, ...; four at a time where `vec` (x and y
// aligned for packs of four). The one conversion of a cast, whichever kernel runs it.
template <typename Tin, typename Tout>
__device__ __forceinline__ void convertRange(const Tin *x, Tout *y, int64_t n, int64_t first, int64_t stride,
                                             bool vec) {
  constexpr int V = 4;
  using A = std::conditional_t<std::is_same_v<Acc<Tin>, double> || std::is_same_v<Acc<Tout>, double>, double, float>;
  int64_t start = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t i = first; i < nv; i += stride) {
      const Pack<Tin, V> px = reinterpret_cast<const Pack<Tin, V> *>(x)[i];
      Pack<Tout, V> r;
#pragma unroll
      for (int k = 0; k < V; ++k)
        r.v[k] = fromAcc<Tout>(A(toAcc(px.v[k])));
      reinterpret_cast<Pack<Tout, V> *>(y)[i] = r;
    }
    start = nv * V;
  }
  for (int64_t i = start + first; i < n; i += stride)
    y[i] = fromAcc<Tout>(A(toAcc(x[i])));
}

// --- Block reductions ----------------------------------------------------------------------------

template <typename A> __device__ __forceinline__ A warpSum(A v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename A> __device__ __forceinline__ A warpMax(A v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. Summed in a fixed order: deterministic for a given block size.
__device__ __forceinline__ double blockSum(double v) {
  __shared__ double partial[32];
  v = warpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? partial[lane] : 0.0;
    v = warpSum(v);
    if (lane == 0)
      partial[0] = v;
  }
  __syncthreads();
  const double r = partial[0];
  __syncthreads();
  return r;
}

} // namespace castor::cuda::detail
