// The register-resident layer norm kernels (layer_norm_rows.cu): a group of G threads per row
// (G = 4..32 lanes of a warp, or a block of up to 512 threads for long rows), the row held in
// registers between its statistics and its results, 16-byte loads and stores where the rows are
// 16-byte aligned, fp32 arithmetic. layer_norm.cu dispatches to them and keeps an fp64 kernel for
// what they do not take (f64 or mixed data dtypes, rows longer than RowPlan covers).
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda::rows {

// How a row of `length` elements is spread over a group: `vec` elements a load, `items` loads a
// thread at most, `group` threads a row, `threads` a block (groups = threads / group).
struct RowPlan {
  int vec = 0, items = 0, group = 0, threads = 0;
  bool ok() const { return group > 0; }
  int groups() const { return threads / group; }
};

// The plan for data of dtype dt (f32/f16/bf16) with parameters of dtype pt (f32, or dt), rows of
// `length`, `vector` when every operand is 16-byte aligned; !ok() when these kernels do not take it.
RowPlan planRows(int dt, int pt, int64_t length, bool vector);

// Bytes of workspace backward() needs at most for rows x length (the per-block column sums).
size_t backwardScratch(int64_t rows, int64_t length);

cudaError_t forward(const RowPlan &p, Ref x, Ref scale, Ref bias, Ref y, Ref mean, Ref invStd, int64_t rows,
                    int64_t length, double eps, cudaStream_t s);

// dx per row; each block sums dy * xhat and dy over its rows per column into `scratch` (fp32,
// [blocks][length] twice), a second kernel sums the blocks in a fixed order: no atomics,
// deterministic. Fails (cudaErrorInvalidValue) when scratchBytes is below backwardScratch().
cudaError_t backward(const RowPlan &p, Ref dy, Ref x, Ref scale, Ref mean, Ref invStd, Ref dx, Ref dscale, Ref dbias,
                     int64_t rows, int64_t length, void *scratch, size_t scratchBytes, cudaStream_t s);

} // namespace castor::cuda::rows
