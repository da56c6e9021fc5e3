// Training checkpoints: every PARAMETER and STATE tensor of a session (weights, optimizer
// buffers, BN statistics, counters) as a safetensors file, with metadata that says where the
// run stood: steps done, the data source and its seed and position. Session::create with the
// file as its weights and BatchSource::restorePosition with its metadata continue bit-exactly.
#pragma once

#include "castor/status.h"
#include "core/session.h"
#include "data/batch_source.h"

#include <cstdint>
#include <string>

namespace castor::train {

struct TrainingProgress {
  int64_t step = 0;     // steps done ("castor.step")
  std::string dataKind; // BatchSource::kind() ("castor.data")
  uint64_t dataSeed = 0; // "castor.data.seed"
  // Written: the source's position entries. Read: every metadata entry of the file (a source
  // picks its own).
  data::DataPosition dataPosition;
};

// Writes atomically (a temporary file in the same folder, fsync, rename): a failed write leaves
// the previous file intact. Metadata "castor.format" is "training-state 1".
Status writeCheckpoint(Session &session, const TrainingProgress &progress, const std::string &path);

// The progress saved in `path`; refuses a file that writeCheckpoint did not write.
Expected<TrainingProgress> readCheckpointProgress(const std::string &path);

} // namespace castor::train
