// Synthetic N(0, 1) values and uniform labels, a function of (seed, step) only, made on all host
// cores: castor-run bench's inputs. (Training's synthetic source feeds 8-bit pixels instead,
// synthetic_source.h.)
#pragma once

#include "host/parallel.h"

#include <cstdint>
#include <vector>

namespace castor::data {

// Deterministic N(0, 1) images and uniform labels in [0, classes), a function of (seed, step) only:
// values 4b .. 4b+3 of step s are Box-Muller (in float, both outputs of each pair of words) of
// Philox(counter {b, s}, key (seed, images tag)): one Philox block and two logarithms per four
// values, so that a ResNet-50 batch takes less host time than the GPU's step.
void syntheticBatch(uint64_t seed, int64_t step, int64_t batch, int64_t perImage, int64_t classes,
                    std::vector<double> &images, std::vector<int64_t> &labels, int threads = host::hostThreads());

} // namespace castor::data
