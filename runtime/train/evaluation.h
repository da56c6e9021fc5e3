// Accuracy of a forward plan over a labelled set: what `castor-run eval` reports and what
// `castor-run train --val-data` logs every few steps. The forward plan (input "images", output
// "output" logits [N, classes], or its single input and output) runs with the weights of a file or of a
// training session's current state (BN running statistics included), over every sample of the
// set once, in batches of the plan's N; the last batch is padded and its padded rows ignored.
//
// Sets: "idx:DIR" (the t10k-* files, or train-* with split "train") and "folder:DIR" (an image
// folder in evaluation form: files in order, Resize(H * 8 / 7) + CenterCrop(H)), both as 8-bit
// pixels normalised as in training. Top-1: the first largest logit is the label's. Top-5: fewer
// than five logits are strictly larger than the label's.
#pragma once

#include "castor/status.h"
#include "core/session.h"
#include "data/batch_source.h"

#include <memory>
#include <string>

namespace castor::train {

struct Accuracy {
  int64_t count = 0, top1 = 0, top5 = 0;
  double seconds = 0;
  double top1Rate() const { return count ? double(top1) / double(count) : 0.0; }
  double top5Rate() const { return count ? double(top5) / double(count) : 0.0; }
};

class Evaluator {
public:
  // `session` runs a forward plan; `spec` names the set ("idx:DIR" or "folder:DIR").
  static Expected<std::unique_ptr<Evaluator>> create(std::unique_ptr<Session> session, const std::string &spec,
                                                     const std::string &split, const data::SourceOptions &options);
  // The forward plan in the file `planPath` on `backend`, its parameters from `weightsPath`, else
  // from the weights file the plan names, else from their initializers (with
  // `requireAllFromFile`, every one from a file).
  static Expected<std::unique_ptr<Evaluator>> open(const std::string &planPath, const std::string &weightsPath,
                                                   bool requireAllFromFile, std::unique_ptr<Backend> backend,
                                                   const std::string &spec, const std::string &split,
                                                   const data::SourceOptions &options);
  // The forward plan's parameters from a training session's state (by name).
  Status loadState(Session &training);
  // One pass over the set.
  Expected<Accuracy> run();
  Session &session() { return *session_; }

private:
  struct Set;
  Evaluator() = default;
  std::unique_ptr<Session> session_;
  std::string inputName_, outputName_;
  int64_t classes_ = 0;
  std::shared_ptr<Set> set_;
};

} // namespace castor::train
