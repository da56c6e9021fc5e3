// What the sources that walk a data set epoch by epoch share (idx, folder): the seeded order of
// an epoch and the position (epoch, cursor) a training state keeps.
#pragma once

#include "castor/status.h"
#include "data/batch_source.h"

#include <cstdint>
#include <vector>

namespace castor::data {

// A Fisher-Yates permutation of [0, count) for `epoch`: j = floor(u (i + 1)), u from Philox with
// key {lo32(seed), hi32(seed) ^ tag} and counter {lo32(i), hi32(i), lo32(epoch), 0}.
std::vector<int64_t> shuffledOrder(uint64_t seed, uint32_t tag, int64_t epoch, int64_t count);

// "castor.data.epoch" and "castor.data.cursor" (the next sample of the epoch's order).
void saveEpochPosition(DataPosition &position, int64_t epoch, int64_t cursor);
// Reads them back; `what` names the source in the error when they are missing.
Status restoreEpochPosition(const DataPosition &position, const char *what, int64_t &epoch, int64_t &cursor);

} // namespace castor::data
