// conv2d and its backward ops (data, filter, bias) on the CPU reference. conv2d and
// conv2d_backward_data share the tiled direct loops (tiled_kernels.h); each output sums its terms
// in the reference loop order.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "cpu/tiled_kernels.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <cstring>

namespace castor::cpu {
namespace {

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

// Runs a direct plan for every (image, group, channel block of MR = mr lanes): out channels
// `outPerGroup` per group (K/G forward, C/G backward data), reduction channels `redPerGroup`.
// `pack(group, first channel, lanes, dst)` writes a block's weights [redPerGroup][R*S][MR]; `bias`
// may be empty.
template <typename Pack>
void runDirect(const tiled::DirectPlan &plan, int mr, int64_t N, int64_t G, int64_t outPerGroup, int64_t redPerGroup,
               const double *in, double *out, const Values &bias, Pack &&pack) {
  const int64_t blocks = (outPerGroup + mr - 1) / mr;
  const int64_t inPlane = plan.inRows * plan.inCols, outPlane = plan.outRows * plan.outCols;
  const int64_t inChannels = G * redPerGroup, outChannels = G * outPerGroup;
  const double work = 2.0 * double(N * outChannels * outPlane * redPerGroup * plan.R * plan.S);
  // Task order: images innermost, so that neighbouring tasks share a block's weights.
  parallelFor(G * blocks * N, work, [&](int64_t task) {
    const int64_t n = task % N, gb = task / N, grp = gb / blocks, blk = gb % blocks;
    const int64_t k0 = grp * outPerGroup + blk * mr;
    const int lanes = int(std::min<int64_t>(mr, outPerGroup - blk * mr));
    Values wp = unsetValues(size_t(redPerGroup * plan.R * plan.S * mr)); // pack writes every weight
    pack(grp, blk * mr, lanes, wp.data());
    double init[8] = {};
    for (int l = 0; l < lanes && !bias.empty(); ++l)
      init[l] = bias[size_t(k0 + l)];
    tiled::directBlock(plan, mr, wp.data(), in + (n * inChannels + grp * redPerGroup) * inPlane, redPerGroup, init,
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
  const int mr = tiled::lanesFor(g.Cg);
  const int maxNr = tiled::tileKernels(mr).directMax;
  auto plan = std::make_shared<tiled::DirectPlan>(backwardDataPlan(g, maxNr));
  tiled::indexTaps(*plan, mr, maxNr);
  return RunFn([=]() {
    // The plan's rows and tiles cover every output element.
    Values DY = b->read(*dy), Wt = b->read(*w), DX = unsetValues(size_t(countOf(*dx)));
    const int64_t RS = g.R * g.S;
    runDirect(*plan, mr, g.N, g.G, g.Cg, g.Kg, DY.data(), DX.data(), Values(),
              [&](int64_t grp, int64_t c0, int lanes, double *dst) {
                for (int64_t kk = 0; kk < g.Kg; ++kk)
                  for (int64_t rs = 0; rs < RS; ++rs)
                    for (int l = 0; l < mr; ++l)
                      *dst++ = l < lanes ? Wt[size_t(((grp * g.Kg + kk) * g.Cg + c0 + l) * RS + rs)] : 0.0;
              });
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
  const int mr = tiled::lanesFor(g.Kg);
  const int maxNr = tiled::tileKernels(mr).directMax;
  auto plan = std::make_shared<tiled::DirectPlan>(forwardPlan(g, maxNr));
  tiled::indexTaps(*plan, mr, maxNr);
  return RunFn([=]() {
    // The plan's rows and tiles cover every output element.
    Values X = b->read(*x), Wt = b->read(*w), B = bias ? b->read(*bias) : Values(),
           Y = unsetValues(size_t(countOf(*y)));
    const int64_t RS = g.R * g.S;
    runDirect(*plan, mr, g.N, g.G, g.Kg, g.Cg, X.data(), Y.data(), B,
              [&](int64_t grp, int64_t k0, int lanes, double *dst) {
                for (int64_t ci = 0; ci < g.Cg; ++ci)
                  for (int64_t rs = 0; rs < RS; ++rs)
                    for (int l = 0; l < mr; ++l)
                      *dst++ = l < lanes ? Wt[size_t(((grp * g.Kg + k0 + l) * g.Cg + ci) * RS + rs)] : 0.0;
              });
    b->write(*y, Y);
    return Status::ok();
  });
}

// conv2d_backward_filter for MR = mr output channels starting at k0 (group grp) and input
// channels [ci0, ci1) of the group: dw = sum over n, then op, then oq (ascending) of dy * x.
void filterBlock(const ConvGeometry &g, int mr, const std::vector<std::pair<int64_t, int64_t>> &opRange,
                 const std::vector<std::pair<int64_t, int64_t>> &oqRange, const double *X, const double *DY,
                 int64_t grp, int64_t k0, int lanes, int64_t ci0, int64_t ci1, double *DW) {
  const tiled::TileKernels &kern = tiled::tileKernels(mr);
  const int NR = kern.filterMax;
  const int64_t RS = g.R * g.S, PQ = g.P * g.Q, HW = g.H * g.W;
  // dy of these channels, one image at a time, as [pixel][MR].
  Values dyp = unsetValues(size_t(PQ * mr)); // written whole per image
  Values acc(size_t((ci1 - ci0) * RS * mr), 0.0);
  for (int64_t n = 0; n < g.N; ++n) {
    // Pixel by pixel: dyp is written in order (lane-major writes, a cache line each, were slower).
    const double *src = DY + (n * g.K + k0) * PQ;
    for (int64_t i = 0; i < PQ; ++i)
      for (int l = 0; l < mr; ++l)
        dyp[size_t(i * mr + l)] = l < lanes ? src[l * PQ + i] : 0.0;
    const double *xn = X + (n * g.C + grp * g.Cg) * HW;
    for (int64_t ci = ci0; ci < ci1; ci += NR) {
      const int nr = int(std::min<int64_t>(NR, ci1 - ci));
      for (int64_t r = 0; r < g.R; ++r) {
        const auto [op0, op1] = opRange[size_t(r)];
        for (int64_t s = 0; s < g.S; ++s) {
          const auto [oq0, oq1] = oqRange[size_t(s)];
          if (op0 >= op1 || oq0 >= oq1)
            continue;
          double *a = acc.data() + ((ci - ci0) * RS + r * g.S + s) * mr;
          const int64_t hOff = r * g.a.dilations[0] - g.a.pads[0], wOff = s * g.a.dilations[1] - g.a.pads[1];
          kern.filter(nr, dyp.data(), xn + ci * HW, HW, g.W, g.Q, op0, op1, oq0, oq1, g.a.strides[0], g.a.strides[1],
                      hOff, wOff, a, RS * mr);
        }
      }
    }
  }
  for (int64_t ci = ci0; ci < ci1; ++ci)
    for (int64_t rs = 0; rs < RS; ++rs)
      for (int l = 0; l < lanes; ++l)
        DW[size_t(((k0 + l) * g.Cg + ci) * RS + rs)] = acc[size_t(((ci - ci0) * RS + rs) * mr + l)];
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
  const int mr = tiled::lanesFor(g.Kg);
  return RunFn([=]() {
    Values X = b->read(*x), DY = b->read(*dy), DW(size_t(countOf(*dw)), 0.0);
    const int64_t NR = tiled::tileKernels(mr).filterMax;
    const int64_t blocks = (g.Kg + mr - 1) / mr;
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
      const int lanes = int(std::min<int64_t>(mr, g.Kg - blk * mr));
      filterBlock(g, mr, opRange, oqRange, X.data(), DY.data(), grp, grp * g.Kg + blk * mr, lanes, ci0, ci1, DW.data());
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

} // namespace

const KernelTable &convolutionKernels() {
  static const KernelTable table = {
      {OpId::Conv2d, buildConv2dTiled},
      {OpId::Conv2dBackwardData, buildConvBackwardData},
      {OpId::Conv2dBackwardFilter, buildConvBackwardFilter},
      {OpId::Conv2dBackwardBias, buildConvBackwardBias},
  };
  return table;
}

} // namespace castor::cpu
