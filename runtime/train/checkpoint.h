// Training checkpoints: every PARAMETER and STATE tensor of a session (weights, optimizer
// buffers, BN statistics, counters) as a safetensors file, with metadata that says where the
// run stood: steps done, the data source and its seed and position, and which plan's state it
// is (state_identity.h). Session::create with the file as its weights and
// BatchSource::restorePosition with its metadata continue bit-exactly.
#pragma once

#include "castor/status.h"
#include "core/session.h"
#include "data/batch_source.h"

#include <cstdint>
#include <string>

namespace castor::train {

inline constexpr char kStateFormat[] = "training-state 1";

struct TrainingProgress {
  int64_t step = 0;     // steps done ("castor.step")
  std::string dataKind; // BatchSource::kind() ("castor.data")
  uint64_t dataSeed = 0; // "castor.data.seed"
  // Written: the source's position entries. Read: every metadata entry of the file (a source
  // picks its own).
  data::DataPosition dataPosition;
};

// Writes atomically (a temporary file in the same folder, fsync, rename): a failed write leaves
// the previous file intact. Metadata "castor.format" is kStateFormat, "castor.plan" the plan's
// state identity. The caller checks the state first (state_check.h): this writes what it is given.
Status writeCheckpoint(Session &session, const TrainingProgress &progress, const std::string &path);

// The progress saved in `path`; refuses a file that writeCheckpoint did not write, another
// format version, a step that is not a whole number >= 0, and (with `plan`) the state of
// another plan (state_identity.h).
Expected<TrainingProgress> readCheckpointProgress(const std::string &path, const plan::Plan *plan = nullptr);

} // namespace castor::train
