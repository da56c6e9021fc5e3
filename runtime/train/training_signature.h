// What a training plan must bind for the training loop, and what it may report: inputs
// "images" (float [N, ...]) and "labels" (i64 [N]), output "loss" (float []), optionally
// "correct" (i64 []), the loss scaler's "loss_scale", "steps_since_overflow" and
// "skipped_steps" ([]), and gradient statistics "grad_stats:<param>" (float [3]).
#pragma once

#include "castor/status.h"
#include "plan/plan.h"
#include "train/plan_index.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::train {

// The bindings every training plan has (correct is optional). Only their presence is checked.
struct TrainingBindings {
  const plan::Tensor *images = nullptr, *labels = nullptr, *loss = nullptr, *correct = nullptr;

  static Expected<TrainingBindings> find(const PlanIndex &index);
  // Labels i64 [N] for images [N, ...], N > 0.
  bool batchAgrees() const;
};

// An optional scalar output the loop reports after every step.
struct ReportedScalar {
  std::string name; // "loss_scale", "steps_since_overflow" or "skipped_steps"
  bool integer = false;
};

// Everything the loop needs to know of a plan, by value (it outlives moving the plan into a
// session).
struct TrainingSignature {
  std::vector<int64_t> imageShape; // [N, ...]
  plan::DType imageDType = plan::F32;
  int64_t batch = 0, perImage = 0;
  int64_t classes = 0; // the loss's class count (0: not found)
  bool hasCorrect = false;
  std::vector<ReportedScalar> scalars;  // in the order above, those the plan has
  std::vector<std::string> gradStats;   // output names, in the plan's order

  bool hasScalar(const std::string &name) const {
    for (const ReportedScalar &r : scalars)
      if (r.name == name)
        return true;
    return false;
  }
};

// Checks the bindings, the labels' dtype and shape, the batch and the optional outputs' types.
Expected<TrainingSignature> readTrainingSignature(const plan::Plan &plan);

// The class count of a training plan's loss: the width of the logits its labels are compared
// with (softmax_cross_entropy or count_correct); 0 when not found.
int64_t lossClasses(const PlanIndex &index, uint32_t labelsId);

} // namespace castor::train
