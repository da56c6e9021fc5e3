// The CPU reference kernels of the training step: training-mode dropout, the backward kernels
// that the autodiff emits, the optimizers, the learning-rate schedule and the counters; and the
// forward conv2d, which shares its tiled loops with conv2d_backward_data.
//
// Same rules as cpu_backend.cpp: operands are read into double precision, every sum accumulates
// in fp64 in a fixed loop order, each result is rounded once into its output's dtype. Every
// kernel reads all of its inputs before it writes an output, so in-place updates (an output with
// the id of an input) are safe.

#include "cpu/cpu_internal.h"
#include "dist/communicator.h"
#include "cpu/tiled_kernels.h"
#include "plan/op_attrs.h"
#include "weights/dropout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

namespace castor::cpu {
namespace {

// --- Dropout --------------------------------------------------------------------------------

// dropout (x [, iteration]) -> y and dropout_backward (dy, iteration) -> dx: with an iteration,
// y = mask * x / (1 - ratio) (weights/dropout.h); without, the identity (inference).
Expected<RunFn> buildDropout(const KernelContext &c) {
  auto p = plan::parseDropout(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  const Tensor *it = c.in.size() > 1 ? c.in[1] : nullptr;
  const plan::DropoutParams d = *p;
  // Elements that share one draw: a whole sample for drop path, else one.
  const size_t group = d.perSample && y->shape_size() > 0 && y->shape(0) > 0
                           ? size_t(*plan::elementCount(*y) / y->shape(0))
                           : 1;
  return RunFn([=]() {
    Values v = b->read(*x);
    if (it) {
      const int64_t iteration = scalarInt(b, it);
      const double scale = d.ratio < 1.0 ? 1.0 / (1.0 - d.ratio) : 0.0;
      for (size_t e = 0; e < v.size(); ++e)
        v[e] = weights::dropoutKeeps(d.ratio, d.seed, d.salt, iteration, e / std::max<size_t>(group, 1)) ? v[e] * scale
                                                                                                         : 0.0;
    }
    b->write(*y, v);
    return Status::ok();
  });
}

// --- Convolution ----------------------------------------------------------------------------

struct ConvGeometry {
  int64_t N, C, H, W, K, Cg, R, S, P, Q, G, Kg;
  shape::Conv2dAttrs a;
  int64_t x(int64_t n, int64_t c, int64_t h, int64_t w) const { return ((n * C + c) * H + h) * W + w; }
  int64_t f(int64_t k, int64_t ci, int64_t r, int64_t s) const { return ((k * Cg + ci) * R + r) * S + s; }
  int64_t y(int64_t n, int64_t k, int64_t p, int64_t q) const { return ((n * K + k) * P + p) * Q + q; }
};

ConvGeometry convGeometry(const Shape &xs, const Shape &ws, const Shape &ys, const shape::Conv2dAttrs &a) {
  ConvGeometry g{xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], ws[3], ys[2], ys[3], a.groups, ws[0] / a.groups, a};
  return g;
}

// The tiled loops: outputs per block of MR = 2*NV channels. NV is chosen from the number of
// output channels per group so that few lanes are wasted.
int chooseNV(int64_t channels) { return channels >= 8 ? 4 : channels >= 3 ? 2 : 1; }

// Calls f(std::integral_constant<int, NV>()) for nv in {1, 2, 4}.
template <typename F> void withNV(int nv, F &&f) {
  if (nv == 4)
    f(std::integral_constant<int, 4>());
  else if (nv == 2)
    f(std::integral_constant<int, 2>());
  else
    f(std::integral_constant<int, 1>());
}

int maxTileFor(int nv) { return nv == 4 ? tiled::maxTile<4>() : nv == 2 ? tiled::maxTile<2>() : tiled::maxTile<1>(); }

// Groups consecutive output pixels of a row with identical valid filter columns into tiles of at
// most `maxNr`; `colTaps(o)` lists (s, input column) of output column o.
template <typename F>
void addTiles(tiled::DirectPlan &plan, const std::vector<int64_t> &columns, int maxNr, F &&colTaps) {
  tiled::ColTile cur;
  cur.nr = 0;
  std::vector<int64_t> curS;
  for (int64_t o : columns) {
    std::vector<std::pair<int64_t, int64_t>> taps = colTaps(o);
    std::vector<int64_t> s;
    for (auto &t : taps)
      s.push_back(t.first);
    if (cur.nr > 0 && (s != curS || cur.nr == maxNr)) {
      plan.tiles.push_back(cur);
      cur.nr = 0;
    }
    if (cur.nr == 0) {
      cur.o0 = o;
      cur.taps = taps;
      curS = s;
    }
    ++cur.nr;
  }
  if (cur.nr > 0)
    plan.tiles.push_back(cur);
}

// conv2d: out [N,K,P,Q] over in x [N,C,H,W].
tiled::DirectPlan forwardPlan(const ConvGeometry &g, int maxNr) {
  tiled::DirectPlan plan;
  plan.outRows = g.P, plan.outCols = g.Q, plan.inRows = g.H, plan.inCols = g.W, plan.R = g.R, plan.S = g.S;
  plan.ostep = 1, plan.istep = g.a.strides[1];
  for (int64_t op = 0; op < g.P; ++op) {
    tiled::RowTaps row{op, {}};
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t h = op * g.a.strides[0] - g.a.pads[0] + r * g.a.dilations[0];
      if (h >= 0 && h < g.H)
        row.taps.push_back({r, h});
    }
    plan.rows.push_back(std::move(row));
  }
  std::vector<int64_t> columns;
  for (int64_t oq = 0; oq < g.Q; ++oq)
    columns.push_back(oq);
  addTiles(plan, columns, maxNr, [&](int64_t oq) {
    std::vector<std::pair<int64_t, int64_t>> taps;
    for (int64_t s = 0; s < g.S; ++s) {
      const int64_t w = oq * g.a.strides[1] - g.a.pads[1] + s * g.a.dilations[1];
      if (w >= 0 && w < g.W)
        taps.push_back({s, w});
    }
    return taps;
  });
  return plan;
}

// conv2d_backward_data: out dx [N,C,H,W] over in dy [N,K,P,Q]. Output position h receives filter
// row r from dy row op when h + pad - r * dilation = op * stride (likewise for columns); pixels
// of a tile are one stride apart in dx and adjacent in dy.
tiled::DirectPlan backwardDataPlan(const ConvGeometry &g, int maxNr) {
  tiled::DirectPlan plan;
  plan.outRows = g.H, plan.outCols = g.W, plan.inRows = g.P, plan.inCols = g.Q, plan.R = g.R, plan.S = g.S;
  const int64_t sh = g.a.strides[0], sw = g.a.strides[1];
  plan.ostep = sw, plan.istep = 1;
  for (int64_t h = 0; h < g.H; ++h) {
    tiled::RowTaps row{h, {}};
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t num = h + g.a.pads[0] - r * g.a.dilations[0];
      if (num >= 0 && num % sh == 0 && num / sh < g.P)
        row.taps.push_back({r, num / sh});
    }
    plan.rows.push_back(std::move(row));
  }
  for (int64_t phase = 0; phase < std::min(sw, g.W); ++phase) {
    std::vector<int64_t> columns;
    for (int64_t w = phase; w < g.W; w += sw)
      columns.push_back(w);
    addTiles(plan, columns, maxNr, [&](int64_t w) {
      std::vector<std::pair<int64_t, int64_t>> taps;
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t num = w + g.a.pads[1] - s * g.a.dilations[1];
        if (num >= 0 && num % sw == 0 && num / sw < g.Q)
          taps.push_back({s, num / sw});
      }
      return taps;
    });
  }
  return plan;
}

// Runs a direct plan for every (image, group, channel block): out channels `outPerGroup` per
// group (K/G forward, C/G backward data), reduction channels `redPerGroup`. `pack(group,
// first channel, lanes, dst)` writes a block's weights [redPerGroup][R*S][MR]; `bias` may be
// empty.
template <int NV, typename Pack>
void runDirect(const tiled::DirectPlan &plan, int64_t N, int64_t G, int64_t outPerGroup, int64_t redPerGroup,
               const double *in, double *out, const Values &bias, Pack &&pack) {
  constexpr int MR = 2 * NV;
  const int64_t blocks = (outPerGroup + MR - 1) / MR;
  const int64_t inPlane = plan.inRows * plan.inCols, outPlane = plan.outRows * plan.outCols;
  const int64_t inChannels = G * redPerGroup, outChannels = G * outPerGroup;
  const double work = 2.0 * double(N * outChannels * outPlane * redPerGroup * plan.R * plan.S);
  // Task order: images innermost, so that neighbouring tasks share a block's weights.
  parallelFor(G * blocks * N, work, [&](int64_t task) {
    const int64_t n = task % N, gb = task / N, grp = gb / blocks, blk = gb % blocks;
    const int64_t k0 = grp * outPerGroup + blk * MR;
    const int lanes = int(std::min<int64_t>(MR, outPerGroup - blk * MR));
    Values wp(size_t(redPerGroup * plan.R * plan.S * MR));
    pack(grp, blk * MR, lanes, wp.data());
    double init[MR] = {};
    for (int l = 0; l < lanes && !bias.empty(); ++l)
      init[l] = bias[size_t(k0 + l)];
    tiled::directBlock<NV>(plan, wp.data(), in + (n * inChannels + grp * redPerGroup) * inPlane, redPerGroup, init,
                           lanes, out + (n * outChannels + k0) * outPlane);
  });
}

// conv2d_backward_data (dy [N,K,P,Q], w [K,C/g,R,S] [, acc]) -> dx [N,C,H,W]: for each dx element,
// the sum over k, then r, then s (ascending) of dy * w, as the reference loop order; with acc,
// that gradient rounded to dx's dtype plus acc, rounded again (the unfused add's result).
Expected<RunFn> buildConvBackwardData(const KernelContext &c) {
  auto p = plan::parseConv2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *w = c.in[1], *acc = c.in.size() > 2 ? c.in[2] : nullptr, *dx = c.out[0];
  ConvGeometry g = convGeometry(shapeOf(*dx), shapeOf(*w), shapeOf(*dy), p->shape);
  const int nv = chooseNV(g.Cg);
  auto plan = std::make_shared<tiled::DirectPlan>(backwardDataPlan(g, maxTileFor(nv)));
  return RunFn([=]() {
    Values DY = b->read(*dy), Wt = b->read(*w), DX(size_t(countOf(*dx)));
    const int64_t RS = g.R * g.S;
    auto run = [&](auto nvTag) {
      constexpr int NV = decltype(nvTag)::value, MR = 2 * NV;
      runDirect<NV>(*plan, g.N, g.G, g.Cg, g.Kg, DY.data(), DX.data(), Values(),
                    [&](int64_t grp, int64_t c0, int lanes, double *dst) {
                      for (int64_t kk = 0; kk < g.Kg; ++kk)
                        for (int64_t rs = 0; rs < RS; ++rs)
                          for (int l = 0; l < MR; ++l)
                            *dst++ = l < lanes ? Wt[size_t(((grp * g.Kg + kk) * g.Cg + c0 + l) * RS + rs)] : 0.0;
                    });
    };
    withNV(nv, run);
    b->write(*dx, DX);
    if (acc) {
      Values rounded = b->read(*dx), A = b->read(*acc);
      for (size_t i = 0; i < rounded.size(); ++i)
        rounded[i] += A[i];
      b->write(*dx, rounded);
    }
    return Status::ok();
  });
}

// conv2d (x [N,C,H,W], w [K,C/g,R,S], optional bias [K]) -> y [N,K,P,Q]: each output is the
// bias (or 0) plus, in order over ci, then r, then s, the products of its valid taps.
Expected<RunFn> buildConv2dTiled(const KernelContext &c) {
  auto p = plan::parseConv2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *w = c.in[1], *bias = c.in.size() > 2 ? c.in[2] : nullptr, *y = c.out[0];
  ConvGeometry g = convGeometry(shapeOf(*x), shapeOf(*w), shapeOf(*y), p->shape);
  const int nv = chooseNV(g.Kg);
  auto plan = std::make_shared<tiled::DirectPlan>(forwardPlan(g, maxTileFor(nv)));
  return RunFn([=]() {
    Values X = b->read(*x), Wt = b->read(*w), B = bias ? b->read(*bias) : Values(), Y(size_t(countOf(*y)));
    const int64_t RS = g.R * g.S;
    withNV(nv, [&](auto nvTag) {
      constexpr int NV = decltype(nvTag)::value, MR = 2 * NV;
      runDirect<NV>(*plan, g.N, g.G, g.Kg, g.Cg, X.data(), Y.data(), B,
                    [&](int64_t grp, int64_t k0, int lanes, double *dst) {
                      for (int64_t ci = 0; ci < g.Cg; ++ci)
                        for (int64_t rs = 0; rs < RS; ++rs)
                          for (int l = 0; l < MR; ++l)
                            *dst++ = l < lanes ? Wt[size_t(((grp * g.Kg + k0 + l) * g.Cg + ci) * RS + rs)] : 0.0;
                    });
    });
    b->write(*y, Y);
    return Status::ok();
  });
}

// Accumulates dw for NR input channels (one plane apart in x) and MR output channels at one
// filter tap over the output pixels [op0, op1) x [oq0, oq1) of one image, in row-major order.
template <int NV, int NR>
void filterTile(const double *__restrict dyp, const double *__restrict x, int64_t xPlane, int64_t W, int64_t Q,
                int64_t op0, int64_t op1, int64_t oq0, int64_t oq1, int64_t sh, int64_t sw, int64_t hOff,
                int64_t wOff, double *__restrict acc, int64_t accStride) {
  constexpr int MR = 2 * NV;
  tiled::v2d a[NR][NV];
  for (int q = 0; q < NR; ++q)
    for (int j = 0; j < NV; ++j)
      a[q][j] = tiled::loadu(acc + q * accStride + 2 * j);
  for (int64_t op = op0; op < op1; ++op) {
    const double *drow = dyp + op * Q * MR;
    const double *xrow = x + (op * sh + hOff) * W + wOff;
    for (int64_t oq = oq0; oq < oq1; ++oq) {
      const double *d = drow + oq * MR;
      const double *xv = xrow + oq * sw;
      tiled::v2d dv[NV];
      for (int j = 0; j < NV; ++j)
        dv[j] = tiled::loadu(d + 2 * j);
      for (int q = 0; q < NR; ++q) {
        const tiled::v2d xb = tiled::splat(xv[q * xPlane]);
        for (int j = 0; j < NV; ++j)
          a[q][j] += dv[j] * xb;
      }
    }
  }
  for (int q = 0; q < NR; ++q)
    for (int j = 0; j < NV; ++j)
      tiled::storeu(acc + q * accStride + 2 * j, a[q][j]);
}

template <int NV> constexpr int filterTileChannels() { return NV >= 4 ? 3 : NV == 2 ? 4 : 6; }

// conv2d_backward_filter for MR output channels starting at k0 (group grp) and input channels
// [ci0, ci1) of the group: dw = sum over n, then op, then oq (ascending) of dy * x.
template <int NV>
void filterBlock(const ConvGeometry &g, const std::vector<std::pair<int64_t, int64_t>> &opRange,
                 const std::vector<std::pair<int64_t, int64_t>> &oqRange, const double *X, const double *DY,
                 int64_t grp, int64_t k0, int lanes, int64_t ci0, int64_t ci1, double *DW) {
  constexpr int MR = 2 * NV, NR = filterTileChannels<NV>();
  const int64_t RS = g.R * g.S, PQ = g.P * g.Q, HW = g.H * g.W;
  // dy of these channels, one image at a time, as [pixel][MR].
  Values dyp(size_t(PQ * MR));
  Values acc(size_t((ci1 - ci0) * RS * MR), 0.0);
  for (int64_t n = 0; n < g.N; ++n) {
    for (int l = 0; l < MR; ++l) {
      const double *src = DY + (n * g.K + k0 + l) * PQ;
      for (int64_t i = 0; i < PQ; ++i)
        dyp[size_t(i * MR + l)] = l < lanes ? src[i] : 0.0;
    }
    const double *xn = X + (n * g.C + grp * g.Cg) * HW;
    for (int64_t ci = ci0; ci < ci1; ci += NR) {
      const int64_t nr = std::min<int64_t>(NR, ci1 - ci);
      for (int64_t r = 0; r < g.R; ++r) {
        const auto [op0, op1] = opRange[size_t(r)];
        for (int64_t s = 0; s < g.S; ++s) {
          const auto [oq0, oq1] = oqRange[size_t(s)];
          if (op0 >= op1 || oq0 >= oq1)
            continue;
          double *a = acc.data() + ((ci - ci0) * RS + r * g.S + s) * MR;
          const int64_t hOff = r * g.a.dilations[0] - g.a.pads[0], wOff = s * g.a.dilations[1] - g.a.pads[1];
          const double *x = xn + ci * HW;
          const int64_t sh = g.a.strides[0], sw = g.a.strides[1];
          auto tile = [&](auto nrTag) {
            constexpr int T = decltype(nrTag)::value;
            filterTile<NV, T>(dyp.data(), x, HW, g.W, g.Q, op0, op1, oq0, oq1, sh, sw, hOff, wOff, a, RS * MR);
          };
          switch (nr) {
          case 1: tile(std::integral_constant<int, 1>()); break;
          case 2: tile(std::integral_constant<int, std::min(2, NR)>()); break;
          case 3: tile(std::integral_constant<int, std::min(3, NR)>()); break;
          case 4: tile(std::integral_constant<int, std::min(4, NR)>()); break;
          case 5: tile(std::integral_constant<int, std::min(5, NR)>()); break;
          default: tile(std::integral_constant<int, NR>()); break;
          }
        }
      }
    }
  }
  for (int64_t ci = ci0; ci < ci1; ++ci)
    for (int64_t rs = 0; rs < RS; ++rs)
      for (int l = 0; l < lanes; ++l)
        DW[size_t(((k0 + l) * g.Cg + ci) * RS + rs)] = acc[size_t(((ci - ci0) * RS + rs) * MR + l)];
}

// conv2d_backward_filter (x [N,C,H,W], dy [N,K,P,Q]) -> dw [K,C/g,R,S].
Expected<RunFn> buildConvBackwardFilter(const KernelContext &c) {
  auto p = plan::parseConv2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *dy = c.in[1], *dw = c.out[0];
  ConvGeometry g = convGeometry(shapeOf(*x), shapeOf(*dw), shapeOf(*dy), p->shape);
  // The output rows (columns) at which filter row r (column s) reads inside the input.
  std::vector<std::pair<int64_t, int64_t>> opRange, oqRange;
  auto range = [](int64_t outSize, int64_t inSize, int64_t stride, int64_t off) {
    int64_t lo = outSize, hi = 0;
    for (int64_t o = 0; o < outSize; ++o) {
      const int64_t i = o * stride + off;
      if (i >= 0 && i < inSize) {
        lo = std::min(lo, o);
        hi = o + 1;
      }
    }
    return std::make_pair(lo, std::max(lo, hi));
  };
  for (int64_t r = 0; r < g.R; ++r)
    opRange.push_back(range(g.P, g.H, g.a.strides[0], r * g.a.dilations[0] - g.a.pads[0]));
  for (int64_t s = 0; s < g.S; ++s)
    oqRange.push_back(range(g.Q, g.W, g.a.strides[1], s * g.a.dilations[1] - g.a.pads[1]));
  const int nv = chooseNV(g.Kg);
  return RunFn([=]() {
    Values X = b->read(*x), DY = b->read(*dy), DW(size_t(countOf(*dw)), 0.0);
    withNV(nv, [&](auto nvTag) {
      constexpr int NV = decltype(nvTag)::value, MR = 2 * NV, NR = filterTileChannels<NV>();
      const int64_t blocks = (g.Kg + MR - 1) / MR;
      // Split the input channels too when there are few (group, block) pairs.
      const int64_t tiles = (g.Cg + NR - 1) / NR;
      const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(tiles, (16 + g.G * blocks - 1) / (g.G * blocks)));
      const int64_t perChunk = (tiles + chunks - 1) / chunks * NR;
      const double work = 2.0 * double(g.N * g.K * g.Cg * g.R * g.S * g.P * g.Q);
      parallelFor(g.G * blocks * chunks, work, [&](int64_t task) {
        const int64_t chunk = task % chunks, gb = task / chunks, grp = gb / blocks, blk = gb % blocks;
        const int64_t ci0 = chunk * perChunk, ci1 = std::min(g.Cg, ci0 + perChunk);
        if (ci0 >= ci1)
          return;
        const int lanes = int(std::min<int64_t>(MR, g.Kg - blk * MR));
        filterBlock<NV>(g, opRange, oqRange, X.data(), DY.data(), grp, grp * g.Kg + blk * MR, lanes, ci0, ci1,
                        DW.data());
      });
    });
    b->write(*dw, DW);
    return Status::ok();
  });
}

// conv2d_backward_bias (dy [N,K,...]) -> db [K].
Expected<RunFn> buildConvBackwardBias(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *db = c.out[0];
  Shape s = shapeOf(*dy);
  const int64_t N = s[0], K = s[1], inner = span(s, 2, s.size());
  return RunFn([=]() {
    Values DY = b->read(*dy), DB(size_t(K), 0.0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < inner; ++i)
          DB[k] += DY[(n * K + k) * inner + i];
    b->write(*db, DB);
    return Status::ok();
  });
}

// reduce_sum_to (x) -> y: y broadcasts to x (numpy rules); y = scale * the sum of x over the
// broadcast dimensions.
Expected<RunFn> buildReduceSumTo(const KernelContext &c) {
  auto p = plan::parseReduceSumTo(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *y = c.out[0];
  std::vector<int64_t> map = broadcastIndex(shapeOf(*y), shapeOf(*x));
  const double scale = p->scale;
  return RunFn([=]() {
    Values X = b->read(*x), Y(size_t(countOf(*y)), 0.0);
    for (size_t i = 0; i < X.size(); ++i)
      Y[map[i]] += X[i];
    for (double &e : Y)
      e *= scale;
    b->write(*y, Y);
    return Status::ok();
  });
}

// --- Batch normalization ----------------------------------------------------------------------

// batch_norm_training_backward (dy, x, scale, batch_mean, batch_inv_std) -> (dx, dscale, dbias),
// with m = N * spatial elements per channel and xhat = (x - mean) * inv_std:
//   dbias = sum dy;  dscale = sum dy * xhat;
//   dx = scale * inv_std / m * (m * dy - dbias - xhat * dscale).
Expected<RunFn> buildBatchNormBackward(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  Shape xs = shapeOf(*in[1]);
  // Synchronized: dx from the sums over every replica's batch, as the forward's statistics were
  // (SyncBatchNorm); dscale and dbias stay this replica's, which the step averages with the
  // other gradients.
  dist::Communicator *replicas = p->sync ? c.replicas : nullptr;
  return RunFn([=]() -> Status {
    Values gamma = b->read(*in[2]), mean = b->read(*in[3]), invStd = b->read(*in[4]);
    const Channels chans(xs);
    const int world = replicas ? replicas->worldSize() : 1;
    const int64_t C = chans.C, count = chans.N * chans.inner;
    const double m = double(count * world);
    Values dScale(size_t(C), 0.0), dBias(size_t(C), 0.0);
    // The channel's sum dy and sum dy xhat (its dbias and dscale).
    auto sums = [&](const Values &dyc, const Values &xc, int64_t ch) {
      double sdy = 0, sdyx = 0;
      for (int64_t i = 0; i < count; ++i) {
        sdy += dyc[i];
        sdyx += dyc[i] * (xc[i] - mean[ch]) * invStd[ch];
      }
      dBias[ch] = sdy;
      dScale[ch] = sdyx;
    };
    // dx in place of the channel's dy, from the sums over the whole batch.
    auto inputGradient = [&](Values &dyc, const Values &xc, int64_t ch, double sdy, double sdyx) {
      const double k = m > 0 ? gamma[ch] * invStd[ch] / m : 0.0;
      for (int64_t i = 0; i < count; ++i) {
        const double xhat = (xc[i] - mean[ch]) * invStd[ch];
        dyc[i] = k * (m * dyc[i] - sdy - xhat * sdyx);
      }
      chans.write(b, *out[0], ch, dyc.data());
    };
    auto readChannel = [&](int64_t ch, Values &dyc, Values &xc) {
      chans.read(b, *in[0], ch, dyc.data());
      chans.read(b, *in[1], ch, xc.data());
    };
    if (world == 1) {
      // One channel at a time: its N slices of dy and x, the sums, then dx in place of dy.
      parallelFor(C, 6.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        sums(dyc, xc, ch);
        inputGradient(dyc, xc, ch, dBias[ch], dScale[ch]);
      });
    } else {
      parallelFor(C, 3.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        sums(dyc, xc, ch);
      });
      std::vector<double> total(size_t(2 * C)); // sum dy, then sum dy xhat, of every replica
      for (int64_t ch = 0; ch < C; ++ch)
        total[size_t(ch)] = dBias[ch], total[size_t(C + ch)] = dScale[ch];
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(total.data(), total.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch-norm gradient sums"));
      parallelFor(C, 4.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        inputGradient(dyc, xc, ch, total[size_t(ch)], total[size_t(C + ch)]);
      });
    }
    b->write(*out[1], dScale);
    b->write(*out[2], dBias);
    return Status::ok();
  });
}

// batch_norm_running_update (running_mean, running_var, batch_mean, batch_inv_std)
//   -> (running_mean, running_var), in place, PyTorch's convention:
//   running_mean = (1 - m) running_mean + m batch_mean
//   running_var  = (1 - m) running_var + m var_biased * count / (count - 1),
//   var_biased = 1 / inv_std^2 - epsilon (count 1: the biased variance).
Expected<RunFn> buildBatchNormRunningUpdate(const KernelContext &c) {
  auto p = plan::parseBatchNormRunningUpdate(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::BatchNormRunningUpdateParams a = *p;
  dist::Communicator *replicas = a.sync ? c.replicas : nullptr; // statistics over every replica's batch
  return RunFn([=]() {
    Values rm = b->read(*in[0]), rv = b->read(*in[1]), mean = b->read(*in[2]), invStd = b->read(*in[3]);
    const int64_t count = a.count * (replicas ? replicas->worldSize() : 1);
    const double correction = count > 1 ? double(count) / double(count - 1) : 1.0;
    for (size_t ch = 0; ch < rm.size(); ++ch) {
      const double varBiased = 1.0 / (invStd[ch] * invStd[ch]) - a.epsilon;
      rm[ch] = (1 - a.momentum) * rm[ch] + a.momentum * mean[ch];
      rv[ch] = (1 - a.momentum) * rv[ch] + a.momentum * varBiased * correction;
    }
    b->write(*out[0], rm);
    b->write(*out[1], rv);
    return Status::ok();
  });
}

// --- Elementwise backward ---------------------------------------------------------------------

// (dy, saved) -> dx = f(dy, saved) elementwise, chunk by chunk; make(kernel) parses the
// attributes into the functor.
template <typename Make> Builder elementwiseBackward(Make make) {
  return [make](const KernelContext &c) -> Expected<RunFn> {
    auto f = make(c.kernel);
    if (!f)
      return f.status();
    Memory *b = &c.backend;
    const Tensor *dy = c.in[0], *s = c.in[1], *dx = c.out[0];
    return sameShapeBinaryRun(b, dy, s, dx, *f);
  };
}

struct ReluBackward {
  double operator()(double dy, double y) const { return y > 0 ? dy : 0.0; }
};
struct SigmoidBackward {
  double operator()(double dy, double y) const { return dy * y * (1.0 - y); }
};
struct ClipBackward {
  double lo, hi;
  double operator()(double dy, double x) const { return (x >= lo && x <= hi) ? dy : 0.0; }
};
struct HardSigmoidBackward {
  double alpha, beta;
  double operator()(double dy, double x) const {
    const double z = alpha * x + beta;
    return (z > 0.0 && z < 1.0) ? dy * alpha : 0.0;
  }
};
struct HardSwishBackward { // PyTorch's hardswish_backward, boundaries included
  double operator()(double dy, double x) const {
    if (x < -3.0)
      return 0.0;
    return x <= 3.0 ? dy * (x / 3.0 + 0.5) : dy;
  }
};

struct ErfBackward {
  double operator()(double dy, double x) const { return dy * (2.0 / std::sqrt(M_PI)) * std::exp(-x * x); }
};

struct GeluBackward {
  bool tanhForm;
  double operator()(double dy, double x) const {
    if (tanhForm) {
      const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
      return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x));
    }
    const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))), pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    return dy * (cdf + x * pdf);
  }
};

Expected<GeluBackward> geluBackward(const Kernel &k) {
  auto p = plan::parseGelu(k);
  if (!p)
    return p.status();
  return GeluBackward{p->tanh};
}

Expected<ErfBackward> erfBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return ErfBackward{};
}

Expected<ReluBackward> reluBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return ReluBackward{};
}

Expected<SigmoidBackward> sigmoidBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return SigmoidBackward{};
}

Expected<ClipBackward> clipBackward(const Kernel &k) {
  auto p = plan::parseClip(k);
  if (!p)
    return p.status();
  return ClipBackward{p->min ? *p->min : -std::numeric_limits<double>::infinity(),
                      p->max ? *p->max : std::numeric_limits<double>::infinity()};
}

Expected<HardSigmoidBackward> hardSigmoidBackward(const Kernel &k) {
  auto p = plan::parseHardSigmoid(k);
  if (!p)
    return p.status();
  return HardSigmoidBackward{p->alpha, p->beta};
}

Expected<HardSwishBackward> hardSwishBackward(const Kernel &k) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(k));
  return HardSwishBackward{};
}

// --- Pooling backward ---------------------------------------------------------------------

// max_pool2d_backward (dy, x) -> dx: each window's gradient goes to its first maximum in
// row-major window order (the element the forward selects), accumulating across overlapping
// windows. avg_pool2d_backward (dy) -> dx (shape from the output): each window's gradient is
// spread over its valid elements, divided by the forward's divisor.
Expected<RunFn> buildPoolBackward(const KernelContext &c, bool isMax) {
  auto p = plan::parsePool2d(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *x = isMax ? c.in[1] : nullptr, *dx = c.out[0];
  Shape xs = shapeOf(*dx), ys = shapeOf(*dy);
  auto a = p->shape;
  const bool includePad = p->countIncludePad;
  return RunFn([=]() {
    Values DY = b->read(*dy), X = isMax ? b->read(*x) : Values(), DX(size_t(countOf(*dx)), 0.0);
    const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
    const auto rows = windowRanges(P, H, a.kernel[0], a.strides[0], a.pads[0], a.dilations[0]);
    const auto cols = windowRanges(Q, W, a.kernel[1], a.strides[1], a.pads[1], a.dilations[1]);
    parallelFor(NC, 4.0 * double(DX.size()), [&](int64_t nc) {
      for (int64_t op = 0; op < P; ++op)
        for (int64_t oq = 0; oq < Q; ++oq) {
          const int64_t h0 = op * a.strides[0] - a.pads[0], w0 = oq * a.strides[1] - a.pads[1];
          const double g = DY[(nc * P + op) * Q + oq];
          if (isMax) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t at = -1;
            const auto [r0, r1] = rows[size_t(op)];
            const auto [s0, s1] = cols[size_t(oq)];
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t base = (nc * H + h0 + r * a.dilations[0]) * W + w0;
              for (int64_t s = s0; s < s1; ++s) {
                const int64_t i = base + s * a.dilations[1];
                const double v = X[i];
                // As the forward (the last NaN wins), branch-free.
                const bool take = (at < 0) | (v > best) | (v != v);
                best = selectBits(take, v, best);
                at += (i - at) & (int64_t(0) - int64_t(take));
              }
            }
            if (at >= 0)
              DX[at] += g;
            continue;
          }
          int64_t valid = 0;
          for (int64_t r = 0; r < a.kernel[0]; ++r) {
            const int64_t h = h0 + r;
            for (int64_t s = 0; s < a.kernel[1]; ++s) {
              const int64_t w = w0 + s;
              valid += (h >= 0 && h < H && w >= 0 && w < W) ? 1 : 0;
            }
          }
          int64_t divisor = valid;
          if (includePad) {
            int64_t h1 = std::min(h0 + a.kernel[0], H + a.pads[2]);
            int64_t w1 = std::min(w0 + a.kernel[1], W + a.pads[3]);
            divisor = (h1 - h0) * (w1 - w0);
          }
          if (divisor <= 0)
            continue;
          const double share = g / double(divisor);
          for (int64_t r = 0; r < a.kernel[0]; ++r) {
            const int64_t h = h0 + r;
            if (h < 0 || h >= H)
              continue;
            for (int64_t s = 0; s < a.kernel[1]; ++s) {
              const int64_t w = w0 + s;
              if (w >= 0 && w < W)
                DX[(nc * H + h) * W + w] += share;
            }
          }
        }
    });
    b->write(*dx, DX);
    return Status::ok();
  });
}

// global_avg_pool_backward (dy [N,C,1...]) -> dx [N,C,d...] = dy / prod(d).
Expected<RunFn> buildGlobalAvgPoolBackward(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *dx = c.out[0];
  Shape xs = shapeOf(*dx);
  const int64_t NC = xs[0] * xs[1], inner = span(xs, 2, xs.size());
  return RunFn([=]() {
    Values DY = b->read(*dy), DX(size_t(NC * inner));
    for (int64_t i = 0; i < NC; ++i)
      for (int64_t j = 0; j < inner; ++j)
        DX[i * inner + j] = DY[i] / double(inner);
    b->write(*dx, DX);
    return Status::ok();
  });
}

// --- Softmax and the loss ---------------------------------------------------------------------

// softmax_backward (dy, y) -> dx = y * (dy - sum(dy * y, axis)).
Expected<RunFn> buildSoftmaxBackward(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *dy = c.in[0], *y = c.in[1], *dx = c.out[0];
  auto split = splitAtAxis(c.kernel, -1, shapeOf(*y));
  if (!split)
    return split.status();
  const int64_t outer = split->outer, n = split->n, inner = split->inner;
  return RunFn([=]() {
    Values DY = b->read(*dy), Y = b->read(*y), DX(Y.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner + i;
          dot += DY[at] * Y[at];
        }
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner + i;
          DX[at] = Y[at] * (DY[at] - dot);
        }
      }
    b->write(*dx, DX);
    return Status::ok();
  });
}

// softmax_cross_entropy_backward (dloss, logits [N,C], labels [N]) -> dlogits [N,C]:
//   dlogits[n] = w_n * (softmax(logits[n]) - target_n),  target = (1 - s) onehot + s / C,
//   w_n = dloss / N (mean), dloss (sum), dloss[n] (none).
Expected<RunFn> buildSoftmaxCrossEntropyBackward(const KernelContext &c) {
  auto p = plan::parseSoftmaxCrossEntropy(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *dloss = c.in[0], *x = c.in[1], *labels = c.in[2], *dx = c.out[0];
  const int64_t N = x->shape(0), C = x->shape(1);
  const double eps = p->labelSmoothing;
  const shape::Reduction reduction = p->reduction;
  return RunFn([=]() {
    Values X = b->read(*x), DL = b->read(*dloss), DX(X.size());
    std::vector<int64_t> y = b->readInts(*labels);
    for (int64_t n = 0; n < N; ++n) {
      CASTOR_RETURN_IF_ERROR(checkLabel(y[n], n, C));
      const double w = reduction == shape::Reduction::None ? DL[n]
                       : reduction == shape::Reduction::Mean ? DL[0] / double(N)
                                                             : DL[0];
      const double *row = X.data() + n * C;
      const double logZ = logSumExp(row, C);
      for (int64_t j = 0; j < C; ++j) {
        const double target = (j == y[n] ? 1.0 - eps : 0.0) + eps / double(C);
        DX[n * C + j] = w * (std::exp(row[j] - logZ) - target);
      }
    }
    b->write(*dx, DX);
    return Status::ok();
  });
}

// count_correct (logits [N,C], labels [N]) -> [] i64: rows whose first maximum is the label.
Expected<RunFn> buildCountCorrect(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *x = c.in[0], *labels = c.in[1], *out = c.out[0];
  const int64_t N = x->shape(0), C = x->shape(1);
  return RunFn([=]() {
    Values X = b->read(*x);
    std::vector<int64_t> y = b->readInts(*labels);
    int64_t correct = 0;
    for (int64_t n = 0; n < N; ++n) {
      int64_t best = 0;
      for (int64_t j = 1; j < C; ++j)
        if (X[n * C + j] > X[n * C + best])
          best = j;
      correct += (C > 0 && best == y[n]) ? 1 : 0;
    }
    b->write(*out, Values{double(correct)});
    return Status::ok();
  });
}

// split (x) -> (y0, y1, ...): consecutive slices of x along `axis`, each as thick as its output.
Expected<RunFn> buildSplit(const KernelContext &c) {
  Memory *b = &c.backend;
  const Tensor *x = c.in[0];
  auto out = c.out;
  auto split = splitAtAxis(c.kernel, 0, shapeOf(*x));
  if (!split)
    return split.status();
  const int64_t ax = split->axis, outer = split->outer;
  const uint64_t innerBytes = uint64_t(split->inner) * plan::dtypeSize(x->dtype());
  return RunFn([=]() {
    std::vector<uint8_t> src(b->slot(*x), b->slot(*x) + x->bytes());
    const uint8_t *from = src.data();
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor *t : out) {
        const uint64_t chunk = uint64_t(t->shape(int(ax))) * innerBytes;
        std::memcpy(b->slot(*t) + o * chunk, from, chunk);
        from += chunk;
      }
    return Status::ok();
  });
}

// --- Optimizers, schedule, counters -----------------------------------------------------------

// sgd_update (param, grad, momentum_buffer, lr [] [, step i64 []]) -> (param, momentum_buffer),
// in place, as torch.optim.SGD:
//   g = grad + weight_decay * param
//   momentum != 0: buf = g on the first step (step == 1), else momentum * buf + (1 - dampening) g;
//                  g = g + momentum * buf (nesterov) or buf
//   param -= lr * g
Expected<RunFn> buildSgd(const KernelContext &c) {
  auto p = plan::parseSgd(c.kernel);
  if (!p)
    return p.status();
  if (p->momentum != 0 && c.in.size() < 5)
    return Status::error("sgd with momentum needs the step counter as its 5th input");
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::SgdParams a = *p;
  return RunFn([=]() {
    Values W = b->read(*in[0]), G = b->read(*in[1]);
    const double lr = scalar(b, in[3]);
    Values buf = a.momentum != 0 ? b->read(*in[2]) : Values();
    const bool first = a.momentum != 0 && scalarInt(b, in[4]) <= 1;
    for (size_t i = 0; i < W.size(); ++i) {
      double g = G[i] + a.weightDecay * W[i];
      if (a.momentum != 0) {
        buf[i] = first ? g : a.momentum * buf[i] + (1 - a.dampening) * g;
        g = a.nesterov ? g + a.momentum * buf[i] : buf[i];
      }
      W[i] -= lr * g;
    }
    b->write(*out[0], W);
    if (a.momentum != 0)
      b->write(*out[1], buf);
    return Status::ok();
  });
}

// adamw_update (param, grad, exp_avg, exp_avg_sq, lr [], step i64 []) -> (param, exp_avg,
// exp_avg_sq), in place, as torch.optim.AdamW:
//   param *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   param -= lr / (1 - b1^step) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
Expected<RunFn> buildAdamW(const KernelContext &c) {
  auto p = plan::parseAdamW(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::AdamWParams a = *p;
  return RunFn([=]() {
    Values W = b->read(*in[0]), G = b->read(*in[1]), M = b->read(*in[2]), V = b->read(*in[3]);
    const double lr = scalar(b, in[4]);
    const double step = double(scalarInt(b, in[5]));
    const double bc1 = 1 - std::pow(a.beta1, step), bc2Sqrt = std::sqrt(1 - std::pow(a.beta2, step));
    const double stepSize = lr / bc1;
    for (size_t i = 0; i < W.size(); ++i) {
      W[i] *= 1 - lr * a.weightDecay;
      M[i] = a.beta1 * M[i] + (1 - a.beta1) * G[i];
      V[i] = a.beta2 * V[i] + (1 - a.beta2) * G[i] * G[i];
      W[i] -= stepSize * M[i] / (std::sqrt(V[i]) / bc2Sqrt + a.eps);
    }
    b->write(*out[0], W);
    b->write(*out[1], M);
    b->write(*out[2], V);
    return Status::ok();
  });
}

double learningRate(const plan::LrScheduleParams &p, int64_t it) {
  using Kind = plan::LrScheduleParams::Kind;
  if (it < p.warmupSteps)
    return p.baseLr * double(it + 1) / double(p.warmupSteps);
  switch (p.kind) {
  case Kind::Constant:
    return p.baseLr;
  case Kind::Step:
    return p.baseLr * std::pow(p.gamma, double(it / p.stepSize));
  case Kind::Cosine: {
    const double T = double(p.totalSteps - p.warmupSteps);
    if (T <= 0)
      return p.minLr;
    const double t = std::min(std::max(double(it - p.warmupSteps), 0.0), T);
    const double pi = 3.14159265358979323846;
    return p.minLr + (p.baseLr - p.minLr) * (1 + std::cos(pi * t / T)) / 2;
  }
  }
  return p.baseLr;
}

// lr_schedule (iteration i64 []) -> lr [].
Expected<RunFn> buildLrSchedule(const KernelContext &c) {
  auto p = plan::parseLrSchedule(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *it = c.in[0], *lr = c.out[0];
  const plan::LrScheduleParams a = *p;
  return RunFn([=]() {
    b->write(*lr, Values{learningRate(a, scalarInt(b, it))});
    return Status::ok();
  });
}

// fill () -> y: every element = value.
Expected<RunFn> buildFill(const KernelContext &c) {
  auto p = plan::parseFill(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *y = c.out[0];
  const double v = p->value;
  return RunFn([=]() {
    b->write(*y, Values(size_t(countOf(*y)), v));
    return Status::ok();
  });
}

} // namespace

Expected<RunFn> buildConv2d(const KernelContext &c) { return buildConv2dTiled(c); }
Expected<RunFn> buildSgdUpdate(const KernelContext &c) { return buildSgd(c); }
Expected<RunFn> buildAdamwUpdate(const KernelContext &c) { return buildAdamW(c); }

const KernelTable &trainingKernels() {
  static const KernelTable table = {
      {OpId::Dropout, buildDropout},
      {OpId::DropoutBackward, buildDropout},
      {OpId::Conv2dBackwardData, buildConvBackwardData},
      {OpId::Conv2dBackwardFilter, buildConvBackwardFilter},
      {OpId::Conv2dBackwardBias, buildConvBackwardBias},
      {OpId::ReduceSumTo, buildReduceSumTo},
      {OpId::BatchNormTrainingBackward, buildBatchNormBackward},
      {OpId::BatchNormRunningUpdate, buildBatchNormRunningUpdate},
      {OpId::ReluBackward, elementwiseBackward(reluBackward)},
      {OpId::SigmoidBackward, elementwiseBackward(sigmoidBackward)},
      {OpId::ClipBackward, elementwiseBackward(clipBackward)},
      {OpId::HardSigmoidBackward, elementwiseBackward(hardSigmoidBackward)},
      {OpId::HardSwishBackward, elementwiseBackward(hardSwishBackward)},
      {OpId::ErfBackward, elementwiseBackward(erfBackward)},
      {OpId::GeluBackward, elementwiseBackward(geluBackward)},
      {OpId::MaxPool2dBackward, [](const KernelContext &c) { return buildPoolBackward(c, true); }},
      {OpId::AvgPool2dBackward, [](const KernelContext &c) { return buildPoolBackward(c, false); }},
      {OpId::GlobalAvgPoolBackward, buildGlobalAvgPoolBackward},
      {OpId::SoftmaxBackward, buildSoftmaxBackward},
      {OpId::SoftmaxCrossEntropyBackward, buildSoftmaxCrossEntropyBackward},
      {OpId::CountCorrect, buildCountCorrect},
      {OpId::Split, buildSplit},
      {OpId::LrSchedule, buildLrSchedule},
      {OpId::Fill, buildFill},
  };
  return table;
}

} // namespace castor::cpu
