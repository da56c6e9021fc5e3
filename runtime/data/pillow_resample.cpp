#include "data/pillow_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace castor::data::detail {
namespace {

// Pillow's PRECISION_BITS: 8 bits of result and 2 of headroom in an int32 accumulator.
constexpr int kPrecisionBits = kPillowPrecisionBits;
constexpr int32_t kHalf = int32_t(1) << (kPrecisionBits - 1);

// Pillow's clip8: the accumulator's integer part, clamped to a byte.
inline uint8_t clip8(int32_t accumulator) {
  const int32_t v = accumulator >> kPrecisionBits;
  return v < 0 ? 0 : v > 255 ? 255 : uint8_t(v);
}

// kChannels 0: the channel count comes at run time (the decoders only make 1 and 3).
constexpr int kMaxChannels = 16;

// Pillow's horizontal pass over `rows` rows of `src`: output column j of a row reads the columns
// taps.first[j] - firstShift onwards. Written mirrored when `flip`.
template <int kChannels>
void horizontalPass(const uint8_t *src, size_t srcRowBytes, int rows, int runtimeChannels, const ResampleTaps &taps,
                    int firstShift, int outCols, uint8_t *dst, size_t dstRowBytes, bool flip) {
  const int channels = kChannels ? kChannels : runtimeChannels;
  int32_t acc[kMaxChannels];
  for (int y = 0; y < rows; ++y) {
    const uint8_t *in = src + size_t(y) * srcRowBytes;
    uint8_t *o = dst + size_t(y) * dstRowBytes;
    for (int j = 0; j < outCols; ++j) {
      const int32_t *w = taps.weights.data() + size_t(j) * size_t(taps.stride);
      const uint8_t *p = in + size_t(taps.first[size_t(j)] - firstShift) * size_t(channels);
      const int n = taps.count[size_t(j)];
      for (int c = 0; c < channels; ++c)
        acc[c] = kHalf;
      for (int t = 0; t < n; ++t)
        for (int c = 0; c < channels; ++c)
          acc[c] += int32_t(p[t * channels + c]) * w[t];
      uint8_t *px = o + size_t(flip ? outCols - 1 - j : j) * size_t(channels);
      for (int c = 0; c < channels; ++c)
        px[c] = clip8(acc[c]);
    }
  }
}

void horizontalPass(const uint8_t *src, size_t srcRowBytes, int rows, int channels, const ResampleTaps &taps,
                    int firstShift, int outCols, uint8_t *dst, size_t dstRowBytes, bool flip) {
  if (channels == 3)
    horizontalPass<3>(src, srcRowBytes, rows, channels, taps, firstShift, outCols, dst, dstRowBytes, flip);
  else if (channels == 1)
    horizontalPass<1>(src, srcRowBytes, rows, channels, taps, firstShift, outCols, dst, dstRowBytes, flip);
  else
    horizontalPass<0>(src, srcRowBytes, rows, channels, taps, firstShift, outCols, dst, dstRowBytes, flip);
}

// Writes one row of `cols` pixels, mirrored when `flip`.
void storeRow(const uint8_t *row, int cols, int channels, bool flip, uint8_t *out) {
  if (!flip) {
    std::memcpy(out, row, size_t(cols) * size_t(channels));
    return;
  }
  for (int j = 0; j < cols; ++j)
    std::memcpy(out + size_t(cols - 1 - j) * size_t(channels), row + size_t(j) * size_t(channels), size_t(channels));
}

// Pillow's vertical pass: output row i accumulates the rows taps.first[i] - firstShift onwards of
// `src`, each `cols` pixels wide (whole rows at a time: a loop that vectorises).
void verticalPass(const uint8_t *src, size_t srcRowBytes, const ResampleTaps &taps, int firstShift, int outRows,
                  int cols, int channels, uint8_t *dst, size_t dstRowBytes, bool flip) {
  const size_t rowBytes = size_t(cols) * size_t(channels);
  thread_local std::vector<int32_t> acc;
  thread_local std::vector<uint8_t> row;
  acc.resize(rowBytes);
  row.resize(rowBytes);
  for (int i = 0; i < outRows; ++i) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t *w = taps.weights.data() + size_t(i) * size_t(taps.stride);
    for (int t = 0; t < taps.count[size_t(i)]; ++t) {
      const uint8_t *in = src + size_t(taps.first[size_t(i)] + t - firstShift) * srcRowBytes;
      const int32_t weight = w[t];
      int32_t *a = acc.data();
      for (size_t k = 0; k < rowBytes; ++k)
        a[k] += int32_t(in[k]) * weight;
    }
    for (size_t k = 0; k < rowBytes; ++k)
      row[k] = clip8(acc[k]);
    storeRow(row.data(), cols, channels, flip, dst + size_t(i) * dstRowBytes);
  }
}

} // namespace

void pillowResample(const Image &src, const ResampleRequest &r, uint8_t *out) {
  const int channels = src.channels;
  const int outCols = r.colEnd - r.colBegin, outRows = r.rowEnd - r.rowBegin;
  if (outCols <= 0 || outRows <= 0 || channels < 1 || channels > kMaxChannels)
    return;
  const size_t pixelBytes = size_t(channels);
  const size_t srcRowBytes = size_t(src.width) * pixelBytes;
  const uint8_t *region = src.pixels.data() + size_t(r.top) * srcRowBytes + size_t(r.left) * pixelBytes;
  const size_t outRowBytes = r.outRowBytes ? r.outRowBytes : size_t(outCols) * pixelBytes;

  // Pillow skips a pass whose size does not change (its taps would be the identity anyway).
  const bool horizontal = r.outWidth != r.width, vertical = r.outHeight != r.height;
  ResampleTaps colTaps, rowTaps;
  if (horizontal)
    colTaps = pillowBilinearTaps(r.width, r.outWidth, r.colBegin, r.colEnd);
  if (vertical)
    rowTaps = pillowBilinearTaps(r.height, r.outHeight, r.rowBegin, r.rowEnd);
  thread_local std::vector<uint8_t> intermediate;

  // Pillow 13 (python-pillow/Pillow#9549) runs the vertical pass first when the height shrinks by
  // more than twice as many pixels as the width does (measured against Pillow 13.0.0: the 8-bit
  // intermediate makes the order visible).
  ImageResize order;
  order.width = r.width, order.height = r.height, order.outWidth = r.outWidth, order.outHeight = r.outHeight;
  const bool verticalFirst = order.verticalFirst();
  if (verticalFirst) {
    // Vertical pass over the region columns the kept output columns read.
    const int colFirst = colTaps.first.front(), colLast = colTaps.first.back() + colTaps.count.back();
    const int spanCols = colLast - colFirst;
    const size_t spanBytes = size_t(spanCols) * pixelBytes;
    intermediate.resize(size_t(outRows) * spanBytes);
    verticalPass(region + size_t(colFirst) * pixelBytes, srcRowBytes, rowTaps, 0, outRows, spanCols, channels,
                 intermediate.data(), spanBytes, false);
    horizontalPass(intermediate.data(), spanBytes, outRows, channels, colTaps, colFirst, outCols, out, outRowBytes,
                   r.flip);
    return;
  }

  // Horizontal pass first, into an 8-bit intermediate of the region rows the kept output rows
  // read (Pillow's ybox_first..ybox_last trimming).
  const int rowFirst = vertical ? rowTaps.first.front() : r.rowBegin;
  const int rowLast = vertical ? rowTaps.first.back() + rowTaps.count.back() : r.rowEnd;
  const size_t interRowBytes = size_t(outCols) * pixelBytes;
  const uint8_t *firstRow = region + size_t(rowFirst) * srcRowBytes;
  if (!vertical) { // one pass (or none): straight into the output
    if (horizontal) {
      horizontalPass(firstRow, srcRowBytes, outRows, channels, colTaps, 0, outCols, out, outRowBytes, r.flip);
    } else {
      for (int i = 0; i < outRows; ++i)
        storeRow(firstRow + size_t(i) * srcRowBytes + size_t(r.colBegin) * pixelBytes, outCols, channels, r.flip,
                 out + size_t(i) * outRowBytes);
    }
    return;
  }
  const uint8_t *verticalInput = firstRow + size_t(r.colBegin) * pixelBytes;
  size_t verticalInputRowBytes = srcRowBytes;
  if (horizontal) {
    intermediate.resize(size_t(rowLast - rowFirst) * interRowBytes);
    horizontalPass(firstRow, srcRowBytes, rowLast - rowFirst, channels, colTaps, 0, outCols, intermediate.data(),
                   interRowBytes, false);
    verticalInput = intermediate.data();
    verticalInputRowBytes = interRowBytes;
  }
  verticalPass(verticalInput, verticalInputRowBytes, rowTaps, rowFirst, outRows, outCols, channels, out, outRowBytes,
               r.flip);
}

} // namespace castor::data::detail
