// Element-wise own kernels: unary ops and their backward, add/mul (same shape or broadcast),
// casts, fill, dropout. Same-dtype contiguous operands run a vectorised kernel (16-byte loads and
// stores, a scalar tail); broadcasts index each operand by its strides in the output's storage
// order (the builders compute them from the physical layouts).
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/philox.cuh"
#include "cuda/kernels/elementwise.h"

#include <vector>
#include <climits>

namespace castor::cuda {
namespace detail {

namespace {
int gSms = 0;
}

int smCount() {
  if (gSms <= 0) {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && sms > 0)
      gSms = sms;
    else
      gSms = 132;
  }
  return gSms;
}

} // namespace detail

void configureDevice(int smCount) {
  if (smCount > 0)
    detail::gSms = smCount;
}

namespace {

using namespace detail;

// The formulas of elementwise_ops.h as the maps' functors: (x, unused) -> y, (dy, saved) -> dx.
template <class Op> struct ForwardOf {
  Op op;
  template <typename A> __device__ A operator()(A x, A) const { return op.template forward<A>(x); }
};
template <class Op> struct BackwardOf {
  Op op;
  template <typename A> __device__ A operator()(A dy, A saved) const { return op.template backward<A>(dy, saved); }
};

// --- Ops: (x, y) -> result in the accumulation type A ---------------------------------------------

struct AddOp {
  template <typename A> __device__ A operator()(A a, A b) const { return a + b; }
};
struct MulOp {
  template <typename A> __device__ A operator()(A a, A b) const { return a * b; }
};
struct ScaleOp {
  double k;
  template <typename A> __device__ A operator()(A a, A) const { return A(k) * a; }
};
// --- Contiguous maps ---------------------------------------------------------------------------------

// y[i] = op(a[i], b[i]) (NIN 2) or op(a[i]) (NIN 1), one dtype T; 16-byte vectors when `vec`.
template <int NIN, typename T, typename Op>
__global__ void mapKernel(Op op, const T *a, const T *b, T *y, int64_t n, bool vec) {
  constexpr int V = kVec<T>;
  using P = Pack<T, V>;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(blockDim.x) * gridDim.x;
  int64_t start = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t i = tid; i < nv; i += stride) {
      const P pa = reinterpret_cast<const P *>(a)[i];
      P pb;
      if constexpr (NIN == 2)
        pb = reinterpret_cast<const P *>(b)[i];
      P r;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc<T> second = Acc<T>(0);
        if constexpr (NIN == 2)
          second = toAcc(pb.v[k]);
        r.v[k] = fromAcc<T>(op(toAcc(pa.v[k]), second));
      }
      reinterpret_cast<P *>(y)[i] = r;
    }
    start = nv * V;
  }
  for (int64_t i = start + tid; i < n; i += stride) {
    Acc<T> second = Acc<T>(0);
    if constexpr (NIN == 2)
      second = toAcc(b[i]);
    y[i] = fromAcc<T>(op(toAcc(a[i]), second));
  }
}

template <int NIN, typename Op> __global__ void mapAnyKernel(Op op, AnyIo a, AnyIo b, AnyIo y, int64_t n) {
  CASTOR_GRID_LOOP(i, n) y.st(i, op(a.ld(i), NIN == 2 ? b.ld(i) : 0.0));
}

template <int NIN, typename Op> cudaError_t launchMap(Op op, Ref a, Ref b, Ref y, int64_t n, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  if (NIN == 1)
    b = a;
  return withSharedType({a, b, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Any>) {
      mapAnyKernel<NIN><<<gridFor(n), kThreads, 0, s>>>(op, io<Any>(a), io<Any>(b), io<Any>(y), n);
    } else {
      constexpr int V = kVec<T>;
      const bool vec = aligned(a.p, 16) && aligned(b.p, 16) && aligned(y.p, 16);
      mapKernel<NIN, T><<<gridFor(vec ? (n + V - 1) / V : n), kThreads, 0, s>>>(
          op, static_cast<const T *>(a.p), static_cast<const T *>(b.p), static_cast<T *>(y.p), n, vec);
    }
    return cudaGetLastError();
  });
}

// --- Broadcasts ------------------------------------------------------------------------------------

// I: the index type, 32-bit where every index fits (64-bit division is many times slower).
template <typename I, typename IoT, typename Op>
__global__ void broadcastKernel(Op op, IoT a, IoT b, IoT c, Broadcast bc, I n) {
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += I(blockDim.x) * gridDim.x) {
    I oa = 0, ob = 0, rest = i;
    for (int d = bc.rank - 1; d >= 0; --d) {
      const I extent = I(bc.out[d]);
      const I idx = rest % extent;
      rest /= extent;
      oa += idx * I(bc.sa[d]);
      ob += idx * I(bc.sb[d]);
    }
    c.st(int64_t(i), op(a.ld(int64_t(oa)), b.ld(int64_t(ob))));
  }
}

template <typename Op> cudaError_t launchBroadcast(Op op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  // Operands are no larger than the output, so n bounds every index.
  return withSharedType({a, b, c}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (n < INT32_MAX)
      broadcastKernel<uint32_t><<<gridFor(n), kThreads, 0, s>>>(op, io<T>(a), io<T>(b), io<T>(c), bc, uint32_t(n));
    else
      broadcastKernel<int64_t><<<gridFor(n), kThreads, 0, s>>>(op, io<T>(a), io<T>(b), io<T>(c), bc, n);
    return cudaGetLastError();
  });
}

bool isFlat(const Broadcast &bc) { return bc.rank == 1 && bc.sa[0] == 1 && bc.sb[0] == 1; }

// --- Conversions -----------------------------------------------------------------------------------

template <typename Tin, typename Tout> __global__ void convertKernel(const Tin *x, Tout *y, int64_t n, bool vec) {
  convertRange(x, y, n, int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(blockDim.x) * gridDim.x, vec);
}

template <typename T> __global__ void fillKernel(T *y, int64_t n, double value, bool vec) {
  constexpr int V = kVec<T>;
  const T v = fromAcc<T>(value);
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(blockDim.x) * gridDim.x;
  int64_t start = 0;
  if (vec) {
    Pack<T, V> p;
#pragma unroll
    for (int k = 0; k < V; ++k)
      p.v[k] = v;
    const int64_t nv = n / V;
    for (int64_t i = tid; i < nv; i += stride)
      reinterpret_cast<Pack<T, V> *>(y)[i] = p;
    start = nv * V;
  }
  for (int64_t i = start + tid; i < n; i += stride)
    y[i] = v;
}

// --- Dropout -------------------------------------------------------------------------------------------

// The dropout mask as weights/dropout.h, from Philox (philox.cuh).

template <typename IoT>
__global__ void dropoutKernel(IoT x, IoT y, int64_t n, const int64_t *iteration, double ratio, int64_t seed,
                              int64_t salt, DropoutGeometry g) {
  using A = typename IoT::Acc;
  const uint64_t sd = uint64_t(seed);
  const uint32_t k0 = uint32_t(sd), k1 = uint32_t(sd >> 32);
  const uint32_t it = iteration ? uint32_t(uint64_t(*iteration)) : 0;
  const A scale = A(ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0);
  CASTOR_GRID_LOOP(i, n) {
    A v = x.ld(i);
    if (iteration) {
      uint64_t e = uint64_t(i); // the logical (row-major) index keys the mask
      if (g.channelsLast) {
        int64_t t = i;
        const int64_t c = t % g.C;
        t /= g.C;
        const int64_t w = t % g.W;
        t /= g.W;
        const int64_t h = t % g.H, nn = t / g.H;
        e = uint64_t(((nn * g.C + c) * g.H + h) * g.W + w);
      }
      e /= uint64_t(g.group);
      uint32_t ctr[4] = {uint32_t(e), uint32_t(e >> 32), it, uint32_t(uint64_t(salt))};
      philox(ctr, k0, k1);
      const double u = double((uint64_t(ctr[0]) << 32 | ctr[1]) >> 11) * 0x1.0p-53;
      v = (ratio < 1.0 && u >= ratio) ? v * scale : A(0);
    }
    y.st(i, v);
  }
}

} // namespace

// --- Launch functions ------------------------------------------------------------------------------

Broadcast simplifyBroadcast(const Broadcast &bc) {
  if (bc.rank == 0)
    return bc;
  struct Dim {
    int64_t size, sa, sb;
  };
  std::vector<Dim> dims;
  for (int d = 0; d < bc.rank; ++d) {
    if (bc.out[d] == 1)
      continue;
    const Dim cur{bc.out[d], bc.sa[d], bc.sb[d]};
    if (!dims.empty() && dims.back().sa == cur.sa * cur.size && dims.back().sb == cur.sb * cur.size)
      dims.back() = Dim{dims.back().size * cur.size, cur.sa, cur.sb};
    else
      dims.push_back(cur);
  }
  if (dims.empty())
    dims.push_back(Dim{1, 0, 0});
  Broadcast r;
  r.rank = int(dims.size());
  for (size_t d = 0; d < dims.size(); ++d)
    r.out[d] = dims[d].size, r.sa[d] = dims[d].sa, r.sb[d] = dims[d].sb;
  return r;
}

cudaError_t convert(Ref x, Ref y, int64_t n, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  if (x.dt == y.dt) {
    const size_t bytes = (x.dt == kF16 || x.dt == kBF16) ? 2 : (x.dt == kF32 ? 4 : 8);
    return x.p == y.p ? cudaSuccess : cudaMemcpyAsync(y.p, x.p, size_t(n) * bytes, cudaMemcpyDeviceToDevice, s);
  }
  return withAnyType(x.dt, [&](auto tx) -> cudaError_t {
    return withAnyType(y.dt, [&](auto ty) -> cudaError_t {
      using Tin = typename decltype(tx)::type;
      using Tout = typename decltype(ty)::type;
      if constexpr (std::is_same_v<Tin, Any> || std::is_same_v<Tout, Any>) {
        return cudaErrorInvalidValue;
      } else {
        const bool vec = aligned(x.p, 4 * sizeof(Tin)) && aligned(y.p, 4 * sizeof(Tout));
        convertKernel<Tin, Tout><<<gridFor(vec ? (n + 3) / 4 : n), kThreads, 0, s>>>(
            static_cast<const Tin *>(x.p), static_cast<Tout *>(y.p), n, vec);
        return cudaGetLastError();
      }
    });
  });
}

template <class Op> cudaError_t unary(const Op &op, Ref x, Ref y, int64_t n, cudaStream_t s) {
  return launchMap<1>(ForwardOf<Op>{op}, x, x, y, n, s);
}

template <class Op> cudaError_t unaryBackward(const Op &op, Ref dy, Ref saved, Ref dx, int64_t n, cudaStream_t s) {
  return launchMap<2>(BackwardOf<Op>{op}, dy, saved, dx, n, s);
}

// One instance of each for every unary element-wise op of the registry.
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                        \
  template cudaError_t unary<elementwise::id>(const elementwise::id &, Ref, Ref, int64_t, cudaStream_t);      \
  template cudaError_t unaryBackward<elementwise::id>(const elementwise::id &, Ref, Ref, Ref, int64_t, cudaStream_t);
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP

cudaError_t binary(OpId op, Ref a, Ref b, Ref c, const Broadcast &bc, int64_t n, cudaStream_t s) {
  const Broadcast simple = simplifyBroadcast(bc);
  const bool flat = simple.rank == 0 || isFlat(simple);
  switch (op) {
  case OpId::Add:
    return flat ? launchMap<2>(AddOp{}, a, b, c, n, s) : launchBroadcast(AddOp{}, a, b, c, simple, n, s);
  case OpId::Mul:
    return flat ? launchMap<2>(MulOp{}, a, b, c, n, s) : launchBroadcast(MulOp{}, a, b, c, simple, n, s);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t broadcastScaled(Ref x, Ref y, const Broadcast &bc, int64_t n, double scale, cudaStream_t s) {
  const Broadcast simple = simplifyBroadcast(bc);
  if (simple.rank == 0 || isFlat(simple))
    return launchMap<1>(ScaleOp{scale}, x, x, y, n, s);
  return launchBroadcast(ScaleOp{scale}, x, x, y, simple, n, s);
}

cudaError_t fill(Ref y, int64_t n, double value, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  return withAnyType(y.dt, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Any>) {
      return cudaErrorInvalidValue;
    } else {
      const bool vec = aligned(y.p, 16);
      fillKernel<T><<<gridFor(vec ? (n + kVec<T> - 1) / kVec<T> : n), kThreads, 0, s>>>(static_cast<T *>(y.p), n,
                                                                                         value, vec);
      return cudaGetLastError();
    }
  });
}

cudaError_t dropout(Ref x, Ref y, int64_t n, const int64_t *iteration, double ratio, int64_t seed, int64_t salt,
                    const DropoutGeometry &g, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  return withSharedType({x, y}, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    dropoutKernel<<<gridFor(n), kThreads, 0, s>>>(io<T>(x), io<T>(y), n, iteration, ratio, seed, salt, g);
    return cudaGetLastError();
  });
}

} // namespace castor::cuda
