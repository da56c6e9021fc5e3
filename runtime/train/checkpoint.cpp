#include "train/checkpoint.h"

#include "weights/safetensors.h"

namespace castor::train {

Status writeCheckpoint(Session &session, const TrainingProgress &progress, const std::string &path) {
  auto state = session.state();
  if (!state)
    return state.status();
  state->metadata["castor.format"] = "training-state 1";
  state->metadata["castor.step"] = std::to_string(progress.step);
  state->metadata["castor.data"] = progress.dataKind;
  state->metadata["castor.data.seed"] = std::to_string(progress.dataSeed);
  state->metadata.insert(progress.dataPosition.begin(), progress.dataPosition.end());
  return weights::writeSafetensors(*state, path); // atomic
}

Expected<TrainingProgress> readCheckpointProgress(const std::string &path) {
  auto state = weights::readSafetensors(path);
  if (!state)
    return state.status();
  std::map<std::string, std::string> &meta = state->metadata;
  if (!meta.count("castor.step") || !meta.count("castor.data.seed") || !meta.count("castor.data"))
    return Status::error(path + " is not a training state written by castor-run train --save");
  TrainingProgress progress;
  progress.step = std::stoll(meta["castor.step"]);
  progress.dataSeed = std::stoull(meta["castor.data.seed"]);
  progress.dataKind = meta["castor.data"];
  progress.dataPosition = std::move(meta);
  return progress;
}

} // namespace castor::train
