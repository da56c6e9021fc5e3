// Host-side work spread over the host's cores: a ResNet-50 batch holds tens of millions of values,
// its weights tens of millions more, too many for one thread to make and convert while the device
// waits.
#pragma once

#include <cstddef>
#include <functional>

namespace castor::host {

// Threads for host-side work: the host's cores, at least 1, at most 32 (beyond that the
// conversions are bound by memory bandwidth and a batch is split too finely to gain).
int hostThreads();

// Runs body(begin, end) over [0, count) cut into contiguous chunks, one per thread, on up to
// `threads` threads; a thread gets at least `minChunk` values, since below that starting it
// costs more than it saves. The caller's thread takes the first chunk.
void parallelChunks(size_t count, size_t minChunk, const std::function<void(size_t, size_t)> &body,
                    int threads = hostThreads());

} // namespace castor::host
