// Optimizer updates (SGD, AdamW), counters, the learning-rate schedule, and the loss scaler's
// kernels over every gradient at once (unscale_gradients, clip_grad_norm): a device table of
// (pointer, element count, dtype) and a list of fixed-size chunks, built when the kernel is built;
// each block takes chunks, dispatches the chunk's dtype once and runs 16-byte vectors over it.
#include "cuda/kernels/device_common.cuh"
#include "cuda/kernels/optimizer.h"

#include <cstring>
#include <vector>

namespace castor::cuda {
namespace {

using namespace detail;

constexpr int64_t kChunk = 65536; // elements per chunk of the multi-tensor kernels (a multiple of 8)
// The casts' chunks: a block's chunk is 8 elements a thread, so that a run of small tensors (a few
// thousand elements each) still spreads over the multiprocessors.
constexpr int64_t kCastChunk = 2048;

struct ChunkEntry {
  int32_t tensor;
  int32_t count;
  int64_t start;
};
static_assert(sizeof(ChunkEntry) == 16, "chunk entries are 16 bytes");

__device__ __forceinline__ bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// --- SGD and AdamW -------------------------------------------------------------------------------------

struct SgdArgs {
  double momentum, wd, dampening;
  bool nesterov;
};

template <typename A> struct SgdStep {
  A lr, momentum, wd, damp1;
  bool useMomentum, first, nesterov;
  __device__ __forceinline__ void operator()(A &w, A g, A &b) const {
    g = g + wd * w;
    if (useMomentum) {
      b = first ? g : momentum * b + damp1 * g;
      g = nesterov ? g + momentum * b : b;
    }
    w = w - lr * g;
  }
};

template <typename A>
__device__ __forceinline__ SgdStep<A> sgdStep(Ref lrRef, const int64_t *step, const SgdArgs &a) {
  SgdStep<A> s;
  s.lr = A(ldAny(lrRef, 0));
  s.momentum = A(a.momentum), s.wd = A(a.wd), s.damp1 = A(1 - a.dampening);
  s.useMomentum = a.momentum != 0;
  s.first = a.momentum != 0 && step && *step <= 1;
  s.nesterov = a.nesterov;
  return s;
}

template <typename TP, typename TG> struct MixAcc {
  using type = std::conditional_t<std::is_same_v<Acc<TP>, double> || std::is_same_v<Acc<TG>, double>, double, float>;
};

// param, buf of TP; grad of TG; 4 elements at a time when `vec`.
template <typename TP, typename TG>
__global__ void sgdKernel(TP *param, const TG *grad, TP *buf, Ref lrRef, const int64_t *step, Ref found, int64_t n,
                          SgdArgs a, bool vec) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  using A = typename MixAcc<TP, TG>::type;
  const SgdStep<A> f = sgdStep<A>(lrRef, step, a);
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(blockDim.x) * gridDim.x;
  int64_t start = 0;
  if (vec) {
    const int64_t nv = n / 4;
    for (int64_t i = tid; i < nv; i += stride) {
      Pack<TP, 4> w = reinterpret_cast<const Pack<TP, 4> *>(param)[i];
      const Pack<TG, 4> g = reinterpret_cast<const Pack<TG, 4> *>(grad)[i];
      Pack<TP, 4> b;
      if (f.useMomentum)
        b = reinterpret_cast<const Pack<TP, 4> *>(buf)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        A wk = A(toAcc(w.v[k])), bk = f.useMomentum && !f.first ? A(toAcc(b.v[k])) : A(0);
        f(wk, A(toAcc(g.v[k])), bk);
        w.v[k] = fromAcc<TP>(wk);
        b.v[k] = fromAcc<TP>(bk);
      }
      reinterpret_cast<Pack<TP, 4> *>(param)[i] = w;
      if (f.useMomentum)
        reinterpret_cast<Pack<TP, 4> *>(buf)[i] = b;
    }
    start = nv * 4;
  }
  for (int64_t i = start + tid; i < n; i += stride) {
    A wk = A(toAcc(param[i])), bk = f.useMomentum && !f.first ? A(toAcc(buf[i])) : A(0);
    f(wk, A(toAcc(grad[i])), bk);
    param[i] = fromAcc<TP>(wk);
    if (f.useMomentum)
      buf[i] = fromAcc<TP>(bk);
  }
}

__global__ void sgdAnyKernel(AnyIo param, AnyIo grad, AnyIo buf, Ref lrRef, const int64_t *step, Ref found, int64_t n,
                             SgdArgs a) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  const SgdStep<double> f = sgdStep<double>(lrRef, step, a);
  CASTOR_GRID_LOOP(i, n) {
    double w = param.ld(i), b = f.useMomentum && !f.first ? buf.ld(i) : 0.0;
    f(w, grad.ld(i), b);
    param.st(i, w);
    if (f.useMomentum)
      buf.st(i, b);
  }
}

struct AdamArgs {
  double b1, b2, eps, wd;
};

template <typename A> struct AdamStep {
  A decay, b1, c1, b2, c2, stepSize, invBc2Sqrt, eps;
  __device__ __forceinline__ void operator()(A &w, A g, A &m, A &v) const {
    w = w * decay;
    m = b1 * m + c1 * g;
    v = b2 * v + c2 * g * g;
    w = w - stepSize * m / (sqrt(v) * invBc2Sqrt + eps);
  }
};

template <typename A> __device__ __forceinline__ AdamStep<A> adamStep(Ref lrRef, const int64_t *stepPtr, const AdamArgs &a) {
  const double lr = ldAny(lrRef, 0), step = double(*stepPtr);
  const double bc1 = 1 - pow(a.b1, step), bc2Sqrt = sqrt(1 - pow(a.b2, step));
  AdamStep<A> s;
  s.decay = A(1 - lr * a.wd);
  s.b1 = A(a.b1), s.c1 = A(1 - a.b1), s.b2 = A(a.b2), s.c2 = A(1 - a.b2);
  s.stepSize = A(lr / bc1), s.invBc2Sqrt = A(1 / bc2Sqrt), s.eps = A(a.eps);
  return s;
}

template <typename TP, typename TG>
__global__ void adamwKernel(TP *param, const TG *grad, TP *mp, TP *vp, Ref lrRef, const int64_t *step, Ref found,
                            int64_t n, AdamArgs a, bool vec) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  using A = typename MixAcc<TP, TG>::type;
  const AdamStep<A> f = adamStep<A>(lrRef, step, a);
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(blockDim.x) * gridDim.x;
  int64_t start = 0;
  if (vec) {
    using P = Pack<TP, 4>;
    const int64_t nv = n / 4;
    for (int64_t i = tid; i < nv; i += stride) {
      P w = reinterpret_cast<const P *>(param)[i], m = reinterpret_cast<const P *>(mp)[i],
        v = reinterpret_cast<const P *>(vp)[i];
      const Pack<TG, 4> g = reinterpret_cast<const Pack<TG, 4> *>(grad)[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        A wk = A(toAcc(w.v[k])), mk = A(toAcc(m.v[k])), vk = A(toAcc(v.v[k]));
        f(wk, A(toAcc(g.v[k])), mk, vk);
        w.v[k] = fromAcc<TP>(wk), m.v[k] = fromAcc<TP>(mk), v.v[k] = fromAcc<TP>(vk);
      }
      reinterpret_cast<P *>(param)[i] = w;
      reinterpret_cast<P *>(mp)[i] = m;
      reinterpret_cast<P *>(vp)[i] = v;
    }
    start = nv * 4;
  }
  for (int64_t i = start + tid; i < n; i += stride) {
    A wk = A(toAcc(param[i])), mk = A(toAcc(mp[i])), vk = A(toAcc(vp[i]));
    f(wk, A(toAcc(grad[i])), mk, vk);
    param[i] = fromAcc<TP>(wk), mp[i] = fromAcc<TP>(mk), vp[i] = fromAcc<TP>(vk);
  }
}

// One AdamW table entry on the device (AdamwTensors without the count: chunks carry ranges).
struct AdamwEntry {
  float *param;
  const float *grad;
  float *m, *v;
};

__global__ void adamwAllKernel(const AdamwEntry *entries, const ChunkEntry *chunks, int chunkCount, Ref lrRef,
                               const int64_t *step, Ref found, AdamArgs a) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  using A = typename MixAcc<float, float>::type; // as adamwKernel<float, float>
  const AdamStep<A> f = adamStep<A>(lrRef, step, a);
  for (int k = blockIdx.x; k < chunkCount; k += gridDim.x) {
    const ChunkEntry ch = chunks[k];
    const AdamwEntry e = entries[ch.tensor];
    float *param = e.param + ch.start, *mp = e.m + ch.start, *vp = e.v + ch.start;
    const float *grad = e.grad + ch.start;
    int64_t start = 0;
    if (aligned16(param) && aligned16(grad) && aligned16(mp) && aligned16(vp)) {
      using P = Pack<float, 4>;
      const int64_t nv = ch.count / 4;
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        P w = reinterpret_cast<const P *>(param)[i], m = reinterpret_cast<const P *>(mp)[i],
          v = reinterpret_cast<const P *>(vp)[i];
        const P g = reinterpret_cast<const P *>(grad)[i];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          A wq = A(w.v[q]), mq = A(m.v[q]), vq = A(v.v[q]);
          f(wq, A(g.v[q]), mq, vq);
          w.v[q] = float(wq), m.v[q] = float(mq), v.v[q] = float(vq);
        }
        reinterpret_cast<P *>(param)[i] = w;
        reinterpret_cast<P *>(mp)[i] = m;
        reinterpret_cast<P *>(vp)[i] = v;
      }
      start = nv * 4;
    }
    for (int64_t i = start + threadIdx.x; i < ch.count; i += blockDim.x) {
      A w = A(param[i]), m = A(mp[i]), v = A(vp[i]);
      f(w, A(grad[i]), m, v);
      param[i] = float(w), mp[i] = float(m), vp[i] = float(v);
    }
  }
}

__global__ void adamwAnyKernel(AnyIo param, AnyIo grad, AnyIo mp, AnyIo vp, Ref lrRef, const int64_t *step, Ref found,
                               int64_t n, AdamArgs a) {
  if (found.p && ldAny(found, 0) != 0.0)
    return;
  const AdamStep<double> f = adamStep<double>(lrRef, step, a);
  CASTOR_GRID_LOOP(i, n) {
    double w = param.ld(i), m = mp.ld(i), v = vp.ld(i);
    f(w, grad.ld(i), m, v);
    param.st(i, w), mp.st(i, m), vp.st(i, v);
  }
}

// --- Counters, schedule, loss scale ----------------------------------------------------------------------

__global__ void incrementKernel(const int64_t *in, int64_t *out, Ref flag, bool whenSet) {
  if (flag.p && (ldAny(flag, 0) != 0.0) != whenSet)
    return;
  *out = *in + 1;
}

__global__ void lrScheduleKernel(const int64_t *iteration, Ref lr, LrSchedule p) {
  const int64_t it = *iteration;
  double v = p.baseLr;
  if (it < p.warmupSteps) {
    v = p.baseLr * double(it + 1) / double(p.warmupSteps);
  } else if (p.kind == 1) {
    v = p.baseLr * pow(p.gamma, double(it / p.stepSize));
  } else if (p.kind == 2) {
    const double T = double(p.totalSteps - p.warmupSteps);
    if (T <= 0) {
      v = p.minLr;
    } else {
      const double t = fmin(fmax(double(it - p.warmupSteps), 0.0), T);
      v = p.minLr + (p.baseLr - p.minLr) * (1 + cos(3.14159265358979323846 * t / T)) / 2;
    }
  }
  stAny(lr, 0, v);
}

__global__ void updateLossScaleKernel(Ref scaleRef, int64_t *tracker, Ref found, double growth, double backoff,
                                      int64_t interval) {
  double scale = ldAny(scaleRef, 0);
  int64_t t = *tracker;
  if (ldAny(found, 0) != 0.0) {
    scale *= backoff;
    t = 0;
  } else if (++t == interval) {
    scale *= growth;
    t = 0;
  }
  stAny(scaleRef, 0, scale);
  *tracker = t;
}

// --- Multi-tensor: unscale, clip ------------------------------------------------------------------------

// g * inv rounded once into T (the reference's double product rounded into g's dtype; for f32 the
// fp32 product is the same number).
template <typename T> __device__ __forceinline__ T unscaleOne(T v, double inv) {
  if constexpr (std::is_same_v<T, float>)
    return v * float(inv);
  else
    return fromAcc<T>(double(toAcc(v)) * inv);
}

// This thread's share of one chunk: scaled in place; whether a stored value is not finite.
template <typename T> __device__ bool unscaleRange(T *p, int64_t count, double inv) {
  constexpr int V = kVec<T>;
  bool bad = false;
  int64_t start = 0;
  if (aligned16(p)) {
    const int64_t nv = count / V;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      Pack<T, V> v = reinterpret_cast<const Pack<T, V> *>(p)[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v.v[k] = unscaleOne(v.v[k], inv);
        bad = bad || !isfinite(toAcc(v.v[k]));
      }
      reinterpret_cast<Pack<T, V> *>(p)[i] = v;
    }
    start = nv * V;
  }
  for (int64_t i = start + threadIdx.x; i < count; i += blockDim.x) {
    p[i] = unscaleOne(p[i], inv);
    bad = bad || !isfinite(toAcc(p[i]));
  }
  return bad;
}

__global__ void unscaleAllKernel(const TensorEntry *tensors, const ChunkEntry *chunks, int chunkCount, Ref scale,
                                 Ref found) {
  const double inv = double(float(1.0 / ldAny(scale, 0)));
  bool bad = false;
  for (int k = blockIdx.x; k < chunkCount; k += gridDim.x) {
    const ChunkEntry ch = chunks[k];
    const TensorEntry t = tensors[ch.tensor];
    switch (t.dt) {
    case kF32:
      bad |= unscaleRange(static_cast<float *>(t.p) + ch.start, ch.count, inv);
      break;
    case kF16:
      bad |= unscaleRange(static_cast<__half *>(t.p) + ch.start, ch.count, inv);
      break;
    case kBF16:
      bad |= unscaleRange(static_cast<__nv_bfloat16 *>(t.p) + ch.start, ch.count, inv);
      break;
    case kF64:
      bad |= unscaleRange(static_cast<double *>(t.p) + ch.start, ch.count, inv);
      break;
    }
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    stAny(found, 0, 1.0);
}

// Casts, table entry t to entry count + t, all of one dtype pair (Tin -> Tout): each chunk
// converted as the single cast's kernel converts (convertRange).
template <typename Tin, typename Tout>
__global__ void castAllKernel(const TensorEntry *tensors, int count, const ChunkEntry *chunks, int chunkCount) {
  for (int k = blockIdx.x; k < chunkCount; k += gridDim.x) {
    const ChunkEntry ch = chunks[k];
    const Tin *x = static_cast<const Tin *>(tensors[ch.tensor].p) + ch.start;
    Tout *y = static_cast<Tout *>(tensors[count + ch.tensor].p) + ch.start;
    const bool vec = reinterpret_cast<uintptr_t>(x) % (4 * sizeof(Tin)) == 0 &&
                     reinterpret_cast<uintptr_t>(y) % (4 * sizeof(Tout)) == 0;
    convertRange(x, y, int64_t(ch.count), int64_t(threadIdx.x), int64_t(blockDim.x), vec);
  }
}

// This thread's sum of squares over its share of one chunk.
template <typename T> __device__ double sumSquaresRange(const T *p, int64_t count) {
  constexpr int V = kVec<T>;
  using A = Acc<T>;
  A s = 0;
  int64_t start = 0;
  if (aligned16(p)) {
    const int64_t nv = count / V;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      const Pack<T, V> v = reinterpret_cast<const Pack<T, V> *>(p)[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A e = toAcc(v.v[k]);
        s += e * e;
      }
    }
    start = nv * V;
  }
  for (int64_t i = start + threadIdx.x; i < count; i += blockDim.x) {
    const A e = toAcc(p[i]);
    s += e * e;
  }
  return double(s);
}

__global__ void sumSquaresAllKernel(const TensorEntry *tensors, const ChunkEntry *chunks, int chunkCount,
                                    double *partials) {
  for (int k = blockIdx.x; k < chunkCount; k += gridDim.x) {
    const ChunkEntry ch = chunks[k];
    const TensorEntry t = tensors[ch.tensor];
    double s = 0;
    switch (t.dt) {
    case kF32:
      s = sumSquaresRange(static_cast<const float *>(t.p) + ch.start, ch.count);
      break;
    case kF16:
      s = sumSquaresRange(static_cast<const __half *>(t.p) + ch.start, ch.count);
      break;
    case kBF16:
      s = sumSquaresRange(static_cast<const __nv_bfloat16 *>(t.p) + ch.start, ch.count);
      break;
    case kF64:
      s = sumSquaresRange(static_cast<const double *>(t.p) + ch.start, ch.count);
      break;
    }
    s = blockSum(s);
    if (threadIdx.x == 0)
      partials[k] = s;
  }
}

// One block: total = sqrt(sum of the chunks' partials) in a fixed order; the coefficient after
// the partials.
__global__ void clipFinishKernel(double *partials, int chunkCount, Ref total, double maxNorm) {
  double s = 0;
  for (int k = threadIdx.x; k < chunkCount; k += blockDim.x)
    s += partials[k];
  s = blockSum(s);
  if (threadIdx.x == 0) {
    const double t = sqrt(s);
    partials[chunkCount] = maxNorm / (t + 1e-6);
    stAny(total, 0, t);
  }
}

template <typename T> __device__ void scaleRange(T *p, int64_t count, double coef) {
  constexpr int V = kVec<T>;
  int64_t start = 0;
  if (aligned16(p)) {
    const int64_t nv = count / V;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      Pack<T, V> v = reinterpret_cast<const Pack<T, V> *>(p)[i];
#pragma unroll
      for (int k = 0; k < V; ++k)
        v.v[k] = fromAcc<T>(double(toAcc(v.v[k])) * coef);
      reinterpret_cast<Pack<T, V> *>(p)[i] = v;
    }
    start = nv * V;
  }
  for (int64_t i = start + threadIdx.x; i < count; i += blockDim.x)
    p[i] = fromAcc<T>(double(toAcc(p[i])) * coef);
}

__global__ void clipApplyAllKernel(const TensorEntry *tensors, const ChunkEntry *chunks, int chunkCount,
                                   const double *partials) {
  const double coef = partials[chunkCount];
  if (!(coef < 1.0))
    return;
  for (int k = blockIdx.x; k < chunkCount; k += gridDim.x) {
    const ChunkEntry ch = chunks[k];
    const TensorEntry t = tensors[ch.tensor];
    switch (t.dt) {
    case kF32:
      scaleRange(static_cast<float *>(t.p) + ch.start, ch.count, coef);
      break;
    case kF16:
      scaleRange(static_cast<__half *>(t.p) + ch.start, ch.count, coef);
      break;
    case kBF16:
      scaleRange(static_cast<__nv_bfloat16 *>(t.p) + ch.start, ch.count, coef);
      break;
    case kF64:
      scaleRange(static_cast<double *>(t.p) + ch.start, ch.count, coef);
      break;
    }
  }
}

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

std::vector<ChunkEntry> chunkList(const std::vector<TensorEntry> &tensors, int64_t chunk = kChunk) {
  std::vector<ChunkEntry> chunks;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (int64_t start = 0; start < tensors[t].n; start += chunk)
      chunks.push_back(ChunkEntry{int32_t(t), int32_t(std::min(chunk, tensors[t].n - start)), start});
  return chunks;
}

int chunkGrid(int chunks) { return std::max(1, std::min(chunks, smCount() * kBlocksPerSm)); }

} // namespace

// --- Launch functions --------------------------------------------------------------------------------------

namespace {
// typed(Tag<TP>, Tag<TG>) for the parameter's and the gradient's dtypes, or anyPath() where either
// has no typed instantiation.
template <typename AnyPath, typename Typed>
cudaError_t withParamAndGradType(Ref param, Ref grad, AnyPath anyPath, Typed typed) {
  return withFloatType(param.dt, [&](auto tp) -> cudaError_t {
    return withFloatType(grad.dt, [&](auto tg) -> cudaError_t {
      using TP = typename decltype(tp)::type;
      using TG = typename decltype(tg)::type;
      if constexpr (std::is_same_v<TP, Any> || std::is_same_v<TG, Any>)
        return anyPath();
      else
        return typed(tp, tg);
    });
  });
}
} // namespace

cudaError_t sgdUpdate(Ref param, Ref grad, Ref buf, Ref lr, const int64_t *step, Ref found, int64_t n,
                      double momentum, bool nesterov, double weightDecay, double dampening, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  const SgdArgs a{momentum, weightDecay, dampening, nesterov};
  auto anyPath = [&]() -> cudaError_t {
    sgdAnyKernel<<<gridFor(n), kThreads, 0, s>>>(io<Any>(param), io<Any>(grad), io<Any>(buf), lr, step, found, n, a);
    return cudaGetLastError();
  };
  if (momentum != 0 && buf.dt != param.dt)
    return anyPath();
  return withParamAndGradType(param, grad, anyPath, [&](auto tp, auto tg) -> cudaError_t {
    using TP = typename decltype(tp)::type;
    using TG = typename decltype(tg)::type;
    const bool vec = aligned(param.p, 4 * sizeof(TP)) && aligned(grad.p, 4 * sizeof(TG)) &&
                     (momentum == 0 || aligned(buf.p, 4 * sizeof(TP)));
    sgdKernel<TP, TG><<<gridFor(vec ? (n + 3) / 4 : n), kThreads, 0, s>>>(
        static_cast<TP *>(param.p), static_cast<const TG *>(grad.p), static_cast<TP *>(buf.p), lr, step, found, n, a,
        vec);
    return cudaGetLastError();
  });
}

cudaError_t adamwUpdate(Ref param, Ref grad, Ref m, Ref v, Ref lr, const int64_t *step, Ref found, int64_t n,
                        double beta1, double beta2, double eps, double weightDecay, cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  const AdamArgs a{beta1, beta2, eps, weightDecay};
  auto anyPath = [&]() -> cudaError_t {
    adamwAnyKernel<<<gridFor(n), kThreads, 0, s>>>(io<Any>(param), io<Any>(grad), io<Any>(m), io<Any>(v), lr, step,
                                                   found, n, a);
    return cudaGetLastError();
  };
  if (m.dt != param.dt || v.dt != param.dt)
    return anyPath();
  return withParamAndGradType(param, grad, anyPath, [&](auto tp, auto tg) -> cudaError_t {
    using TP = typename decltype(tp)::type;
    using TG = typename decltype(tg)::type;
    const bool vec = aligned(param.p, 4 * sizeof(TP)) && aligned(grad.p, 4 * sizeof(TG)) &&
                     aligned(m.p, 4 * sizeof(TP)) && aligned(v.p, 4 * sizeof(TP));
    adamwKernel<TP, TG><<<gridFor(vec ? (n + 3) / 4 : n), kThreads, 0, s>>>(
        static_cast<TP *>(param.p), static_cast<const TG *>(grad.p), static_cast<TP *>(m.p), static_cast<TP *>(v.p),
        lr, step, found, n, a, vec);
    return cudaGetLastError();
  });
}

cudaError_t increment(const int64_t *in, int64_t *out, Ref flag, bool whenSet, cudaStream_t s) {
  incrementKernel<<<1, 1, 0, s>>>(in, out, flag, whenSet);
  return cudaGetLastError();
}

cudaError_t lrSchedule(const int64_t *iteration, Ref lr, const LrSchedule &p, cudaStream_t s) {
  lrScheduleKernel<<<1, 1, 0, s>>>(iteration, lr, p);
  return cudaGetLastError();
}

cudaError_t updateLossScale(Ref scale, int64_t *tracker, Ref found, double growth, double backoff, int64_t interval,
                            cudaStream_t s) {
  updateLossScaleKernel<<<1, 1, 0, s>>>(scale, tracker, found, growth, backoff, interval);
  return cudaGetLastError();
}

size_t multiTensorBytes(const std::vector<TensorEntry> &tensors) {
  const size_t chunks = chunkList(tensors).size();
  return align16(tensors.size() * sizeof(TensorEntry)) + chunks * sizeof(ChunkEntry) + (chunks + 1) * sizeof(double);
}

namespace {

// Copies one table to `device`: `entryBytes` of entries, then the chunks (16-byte aligned), then
// `tailBytes` of zeros. Returns the chunks' offset in *chunkAt.
cudaError_t uploadTable(const void *entries, size_t entryBytes, const std::vector<ChunkEntry> &chunks,
                        size_t tailBytes, void *device, size_t *chunkAt) {
  *chunkAt = align16(entryBytes);
  std::vector<unsigned char> image(*chunkAt + chunks.size() * sizeof(ChunkEntry) + tailBytes, 0);
  if (entryBytes)
    std::memcpy(image.data(), entries, entryBytes);
  if (!chunks.empty())
    std::memcpy(image.data() + *chunkAt, chunks.data(), chunks.size() * sizeof(ChunkEntry));
  return cudaMemcpy(device, image.data(), image.size(), cudaMemcpyHostToDevice);
}

// The chunks of tensors of these element counts.
std::vector<ChunkEntry> chunksOf(const std::vector<AdamwTensors> &tensors) {
  std::vector<TensorEntry> sized(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    sized[i].n = tensors[i].n;
  return chunkList(sized);
}

} // namespace

cudaError_t uploadMultiTensor(const std::vector<TensorEntry> &tensors, void *device, MultiTensorTable *table) {
  const std::vector<ChunkEntry> chunks = chunkList(tensors);
  size_t chunkAt = 0;
  cudaError_t e = uploadTable(tensors.data(), tensors.size() * sizeof(TensorEntry), chunks,
                              (chunks.size() + 1) * sizeof(double), device, &chunkAt);
  if (e != cudaSuccess)
    return e;
  auto *base = static_cast<unsigned char *>(device);
  table->tensors = reinterpret_cast<const TensorEntry *>(base);
  table->chunks = base + chunkAt;
  table->partials = reinterpret_cast<double *>(base + chunkAt + chunks.size() * sizeof(ChunkEntry));
  table->tensorCount = int(tensors.size());
  table->chunkCount = int(chunks.size());
  return cudaSuccess;
}

size_t castTableBytes(const std::vector<TensorEntry> &sources) {
  return align16(2 * sources.size() * sizeof(TensorEntry)) + chunkList(sources, kCastChunk).size() * sizeof(ChunkEntry);
}

cudaError_t uploadCastTable(const std::vector<TensorEntry> &sources, const std::vector<TensorEntry> &destinations,
                            void *device, MultiTensorTable *table) {
  if (sources.size() != destinations.size())
    return cudaErrorInvalidValue;
  std::vector<TensorEntry> entries(sources);
  entries.insert(entries.end(), destinations.begin(), destinations.end());
  const std::vector<ChunkEntry> chunks = chunkList(sources, kCastChunk);
  size_t chunkAt = 0;
  cudaError_t e = uploadTable(entries.data(), entries.size() * sizeof(TensorEntry), chunks, 0, device, &chunkAt);
  if (e != cudaSuccess)
    return e;
  auto *base = static_cast<unsigned char *>(device);
  table->tensors = reinterpret_cast<const TensorEntry *>(base);
  table->chunks = base + chunkAt;
  table->partials = nullptr;
  table->tensorCount = int(sources.size());
  table->chunkCount = int(chunks.size());
  return cudaSuccess;
}

cudaError_t castAll(const MultiTensorTable &t, int fromDt, int toDt, cudaStream_t s) {
  if (t.chunkCount == 0)
    return cudaSuccess;
  return withFloatType(fromDt, [&](auto tin) -> cudaError_t {
    return withFloatType(toDt, [&](auto tout) -> cudaError_t {
      using Tin = typename decltype(tin)::type;
      using Tout = typename decltype(tout)::type;
      if constexpr (std::is_same_v<Tin, Any> || std::is_same_v<Tout, Any>) {
        return cudaErrorInvalidValue;
      } else {
        castAllKernel<Tin, Tout><<<chunkGrid(t.chunkCount), kThreads, 0, s>>>(
            t.tensors, t.tensorCount, static_cast<const ChunkEntry *>(t.chunks), t.chunkCount);
        return cudaGetLastError();
      }
    });
  });
}

size_t adamwTableBytes(const std::vector<AdamwTensors> &tensors) {
  return align16(tensors.size() * sizeof(AdamwEntry)) + chunksOf(tensors).size() * sizeof(ChunkEntry);
}

cudaError_t uploadAdamwTable(const std::vector<AdamwTensors> &tensors, void *device, AdamwTable *table) {
  std::vector<AdamwEntry> entries(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    entries[i] = AdamwEntry{static_cast<float *>(tensors[i].param), static_cast<const float *>(tensors[i].grad),
                            static_cast<float *>(tensors[i].m), static_cast<float *>(tensors[i].v)};
  const std::vector<ChunkEntry> chunks = chunksOf(tensors);
  size_t chunkAt = 0;
  cudaError_t e = uploadTable(entries.data(), entries.size() * sizeof(AdamwEntry), chunks, 0, device, &chunkAt);
  if (e != cudaSuccess)
    return e;
  auto *base = static_cast<unsigned char *>(device);
  table->entries = base;
  table->chunks = base + chunkAt;
  table->chunkCount = int(chunks.size());
  return cudaSuccess;
}

cudaError_t adamwAll(const AdamwTable &t, Ref lr, const int64_t *step, Ref found, double beta1, double beta2,
                     double eps, double weightDecay, cudaStream_t s) {
  if (t.chunkCount == 0)
    return cudaSuccess;
  adamwAllKernel<<<chunkGrid(t.chunkCount), kThreads, 0, s>>>(
      static_cast<const AdamwEntry *>(t.entries), static_cast<const ChunkEntry *>(t.chunks), t.chunkCount, lr, step,
      found, AdamArgs{beta1, beta2, eps, weightDecay});
  return cudaGetLastError();
}

cudaError_t unscaleAll(const MultiTensorTable &t, Ref scale, Ref found, cudaStream_t s) {
  const size_t flagBytes = (found.dt == kF16 || found.dt == kBF16) ? 2 : (found.dt == kF32 ? 4 : 8);
  cudaError_t e = cudaMemsetAsync(found.p, 0, flagBytes, s); // +0 in every float dtype
  if (e != cudaSuccess || t.chunkCount == 0)
    return e;
  unscaleAllKernel<<<chunkGrid(t.chunkCount), kThreads, 0, s>>>(
      t.tensors, static_cast<const ChunkEntry *>(t.chunks), t.chunkCount, scale, found);
  return cudaGetLastError();
}

cudaError_t clipAll(const MultiTensorTable &t, Ref total, double maxNorm, cudaStream_t s) {
  const auto *chunks = static_cast<const ChunkEntry *>(t.chunks);
  if (t.chunkCount > 0)
    sumSquaresAllKernel<<<chunkGrid(t.chunkCount), kThreads, 0, s>>>(t.tensors, chunks, t.chunkCount, t.partials);
  clipFinishKernel<<<1, 1024, 0, s>>>(t.partials, t.chunkCount, total, maxNorm);
  if (t.chunkCount > 0)
    clipApplyAllKernel<<<chunkGrid(t.chunkCount), kThreads, 0, s>>>(t.tensors, chunks, t.chunkCount, t.partials);
  return cudaGetLastError();
}

} // namespace castor::cuda
