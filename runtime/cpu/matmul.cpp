// gemm and matmul on the CPU reference, register-tiled (tiled_kernels.h) with each output's terms
// summed in the order of the plain loop.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "cpu/tiled_kernels.h"
#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <algorithm>
#include <memory>

namespace castor::cpu {
namespace {

// y[i][j] = sum over p (ascending) of a[i][p] * b[p][j] for an [M,K] x [K,N] product; element
// (i, p) of a is at a[i * aRow + p * aCol], (p, j) of b at b[p * bRow + j * bCol]. Rows of y are
// computed in tiles of a few, columns in blocks of MR lanes (tiled::lanesFor(N));
// `store(i, j0, lanes, acc)` receives each finished tile row.
template <typename Store>
void tiledProduct(int64_t M, int64_t N, int64_t K, const double *a, int64_t aRow, int64_t aCol, const double *b,
                  int64_t bRow, int64_t bCol, Store &&store) {
  const int MR = tiled::lanesFor(N);
  const tiled::TileKernels &kern = tiled::tileKernels(MR);
  const int NR = kern.directMax;
  const int64_t blocks = (N + MR - 1) / MR;
  const int64_t rowTiles = (M + NR - 1) / NR;
  // Tasks: column blocks x groups of row tiles (each task packs its block of b once).
  const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(rowTiles, 64 / blocks));
  const int64_t tilesPerGroup = (rowTiles + groups - 1) / groups;
  parallelFor(blocks * groups, 2.0 * double(M * N * K), [&](int64_t task) {
    const int64_t blk = task / groups, grp = task % groups;
    const int64_t j0 = blk * MR;
    const int lanes = int(std::min<int64_t>(MR, N - j0));
    Values bp(size_t(K * MR));
    for (int64_t p = 0; p < K; ++p)
      for (int l = 0; l < MR; ++l)
        bp[size_t(p * MR + l)] = l < lanes ? b[p * bRow + (j0 + l) * bCol] : 0.0;
    const tiled::Tap tap{0, 0};
    double acc[tiled::kMaxTile * 8];
    for (int64_t t = grp * tilesPerGroup; t < std::min(rowTiles, (grp + 1) * tilesPerGroup); ++t) {
      const int64_t i0 = t * NR;
      const int nr = int(std::min<int64_t>(NR, M - i0));
      std::fill(acc, acc + NR * MR, 0.0);
      kern.direct(nr, bp.data(), MR, a + i0 * aRow, aCol, K, &tap, 1, aRow, acc);
      for (int q = 0; q < nr; ++q)
        store(i0 + q, j0, lanes, acc + q * MR);
    }
  });
}

Expected<RunFn> buildGemm(const KernelContext &c) {
  auto p = plan::parseGemm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  const Tensor *A = c.in[0], *B = c.in[1], *Ct = c.in.size() > 2 ? c.in[2] : nullptr, *Yt = c.out[0];
  Shape as = shapeOf(*A), ys = shapeOf(*Yt);
  const int64_t M = ys[0], N = ys[1], K = p->transA ? as[0] : as[1];
  std::vector<int64_t> ci = Ct ? broadcastIndex(shapeOf(*Ct), ys) : std::vector<int64_t>();
  auto g = *p;
  return RunFn([=]() {
    Values a = b->read(*A), bb = b->read(*B), cc = Ct ? b->read(*Ct) : Values(), y(size_t(M * N));
    tiledProduct(M, N, K, a.data(), g.transA ? 1 : K, g.transA ? M : 1, bb.data(), g.transB ? 1 : N, g.transB ? K : 1,
                 [&](int64_t i, int64_t j0, int lanes, const double *acc) {
                   for (int l = 0; l < lanes; ++l) {
                     const int64_t j = j0 + l;
                     double v = g.alpha * acc[l];
                     if (Ct)
                       v += g.beta * cc[size_t(ci[size_t(i * N + j)])];
                     y[size_t(i * N + j)] = v;
                   }
                 });
    b->write(*Yt, y);
    return Status::ok();
  });
}

Expected<RunFn> buildMatmul(const KernelContext &c) {
  CASTOR_RETURN_IF_ERROR(plan::parseNoAttrs(c.kernel));
  Memory *b = &c.backend;
  const Tensor *A = c.in[0], *B = c.in[1], *Yt = c.out[0];
  Shape as = shapeOf(*A), bs = shapeOf(*B);
  Shape pa = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape pb = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  const int64_t M = pa[pa.size() - 2], K = pa.back(), N = pb.back();
  Shape batchA(pa.begin(), pa.end() - 2), batchB(pb.begin(), pb.end() - 2);
  auto batch = shape::broadcast(batchA, batchB);
  if (!batch)
    return Status::error(batch.error);
  auto ia = broadcastIndex(batchA, batch.shape), ib = broadcastIndex(batchB, batch.shape);
  // One b for every product, and a's matrices back to back (ia[t] = t): the products are the rows
  // of one [T*M, K] x [K, N] product, which packs b once instead of T times (the sequence-first
  // projections of attention: [197, 1, 768] x [768, 2304]). Each sum keeps its order.
  bool oneB = true, aInOrder = true;
  for (size_t t = 0; t < ia.size(); ++t) {
    oneB &= ib[t] == ib[0];
    aInOrder &= ia[t] == int64_t(t);
  }
  if (ia.size() > 1 && oneB && aInOrder) {
    const int64_t rows = int64_t(ia.size()) * M, b0 = ib[0];
    return RunFn([=]() {
      Values a = b->read(*A), bb = b->read(*B), y(size_t(rows * N));
      tiledProduct(rows, N, K, a.data(), K, 1, bb.data() + b0 * K * N, N, 1,
                   [&](int64_t i, int64_t j0, int lanes, const double *acc) {
                     std::copy(acc, acc + lanes, y.data() + i * N + j0);
                   });
      b->write(*Yt, y);
      return Status::ok();
    });
  }
  return RunFn([=]() {
    Values a = b->read(*A), bb = b->read(*B), y(ia.size() * size_t(M * N));
    for (size_t t = 0; t < ia.size(); ++t) {
      double *py = y.data() + t * M * N;
      tiledProduct(
          M, N, K, a.data() + ia[t] * M * K, K, 1, bb.data() + ib[t] * K * N, N, 1,
          [&](int64_t i, int64_t j0, int lanes, const double *acc) { std::copy(acc, acc + lanes, py + i * N + j0); });
    }
    b->write(*Yt, y);
    return Status::ok();
  });
}

} // namespace

const KernelTable &matmulKernels() {
  static const KernelTable table = {
      {OpId::Gemm, buildGemm},
      {OpId::Matmul, buildMatmul},
  };
  return table;
}

} // namespace castor::cpu
