#include "train/checkpoint.h"

#include "train/state_identity.h"
#include "weights/safetensors.h"

#include <cerrno>
#include <cstdlib>

namespace castor::train {

Status writeCheckpoint(Session &session, const TrainingProgress &progress, const std::string &path) {
  auto state = session.state();
  if (!state)
    return state.status();
  state->metadata["castor.format"] = kStateFormat;
  state->metadata["castor.step"] = std::to_string(progress.step);
  state->metadata["castor.data"] = progress.dataKind;
  state->metadata["castor.data.seed"] = std::to_string(progress.dataSeed);
  state->metadata[kPlanIdentityKey] = planStateIdentity(session.plan());
  state->metadata.insert(progress.dataPosition.begin(), progress.dataPosition.end());
  return weights::writeSafetensors(*state, path); // atomic
}

namespace {
// A whole decimal number, all of `text` (std::stoll would take "7x" and throw on "x").
bool parseWhole(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}
} // namespace

Expected<TrainingProgress> readCheckpointProgress(const std::string &path, const plan::Plan *plan) {
  auto state = weights::readSafetensors(path);
  if (!state)
    return state.status();
  std::map<std::string, std::string> &meta = state->metadata;
  if (!meta.count("castor.format") || !meta.count("castor.step") || !meta.count("castor.data.seed") ||
      !meta.count("castor.data"))
    return Status::error(path + " is not a training state written by castor-run train --save (a weights file "
                                "loads with --weights)");
  if (meta["castor.format"] != kStateFormat)
    return Status::error(path + ": format '" + meta["castor.format"] + "' is not one this castor-run reads ('" +
                         kStateFormat + "'): a newer or another program wrote it");
  TrainingProgress progress;
  int64_t seed = 0;
  if (!parseWhole(meta["castor.step"], progress.step) || progress.step < 0)
    return Status::error(path + ": the step it says it holds, '" + meta["castor.step"] +
                         "', is not a number of steps (a whole number >= 0): the file is damaged");
  if (meta["castor.data.seed"].empty() || meta["castor.data.seed"][0] == '-' ||
      !parseWhole(meta["castor.data.seed"], seed))
    return Status::error(path + ": its data seed '" + meta["castor.data.seed"] + "' is not a number: the file is damaged");
  if (plan)
    CASTOR_RETURN_IF_ERROR(checkStateFitsPlan(*plan, *state, path));
  progress.dataSeed = std::stoull(meta["castor.data.seed"]);
  progress.dataKind = meta["castor.data"];
  progress.dataPosition = std::move(meta);
  return progress;
}

} // namespace castor::train
