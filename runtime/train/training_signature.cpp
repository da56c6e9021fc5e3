#include "train/training_signature.h"

#include "castor/state_names.h"
#include "plan/op_registry.h"

#include "data/shape_text.h"

namespace castor::train {

Expected<TrainingBindings> TrainingBindings::find(const PlanIndex &index) {
  TrainingBindings b;
  b.images = index.input(names::kImages);
  b.labels = index.input(names::kLabels);
  b.loss = index.output(names::kLoss);
  b.correct = index.output(names::kCorrect);
  if (!b.images || !b.labels || !b.loss)
    return Status::error("a training plan binds inputs \"images\" and \"labels\" and the output \"loss\"");
  return b;
}

bool TrainingBindings::batchAgrees() const {
  const int64_t batch = images->shape_size() ? images->shape(0) : 0;
  return batch > 0 && labels->dtype() == plan::I64 && labels->shape_size() == 1 && labels->shape(0) == batch;
}

int64_t lossClasses(const PlanIndex &index, uint32_t labelsId) {
  for (const plan::Kernel &k : index.plan().kernels())
    if (const auto op = plan::opFromName(k.op());
        (op == plan::OpId::SoftmaxCrossEntropy || op == plan::OpId::CountCorrect) && k.inputs_size() >= 2 &&
        k.inputs(1) == labelsId)
      if (const plan::Tensor *logits = index.tensor(k.inputs(0)))
        if (logits->shape_size() == 2)
          return logits->shape(1);
  return 0;
}

Expected<TrainingSignature> readTrainingSignature(const plan::Plan &plan) {
  const PlanIndex index(plan);
  auto bound = TrainingBindings::find(index);
  if (!bound)
    return bound.status();
  const plan::Tensor &images = *bound->images, &labels = *bound->labels;
  if (labels.dtype() != plan::I64 || labels.shape_size() != 1)
    return Status::error("the plan's labels input must be i64 [N]");
  TrainingSignature sig;
  sig.imageShape = shapeOf(images);
  sig.imageDType = images.dtype();
  sig.batch = sig.imageShape.empty() ? 0 : sig.imageShape[0];
  if (sig.batch <= 0 || labels.shape(0) != sig.batch)
    return Status::error("the plan's images " + data::shapeText(sig.imageShape) + " and labels " +
                         data::shapeText(shapeOf(labels)) + " disagree on the batch");
  sig.perImage = *plan::elementCount(images) / sig.batch;
  sig.classes = lossClasses(index, labels.id());
  sig.hasCorrect = bound->correct != nullptr;

  // The learning rate and the loss scaler's state, when the plan reports them.
  for (auto [name, integer] :
       {std::pair{names::kLr, false}, std::pair{names::kLossScaleOutput, false},
        std::pair{names::kStepsSinceOverflow, true}, std::pair{names::kSkippedStepsOutput, true}}) {
    const plan::Tensor *t = index.output(name);
    if (!t)
      continue;
    if (t->shape_size() != 0 || (integer ? t->dtype() != plan::I64 : t->dtype() == plan::I64))
      return Status::error(std::string("the plan's output \"") + name + "\" must be " + (integer ? "i64" : "float") +
                           " []");
    sig.scalars.push_back({name, integer});
  }
  for (const plan::Binding &b : plan.outputs())
    if (b.name().rfind(names::kGradStatsPrefix, 0) == 0) {
      const plan::Tensor *t = index.tensor(b.tensor());
      if (!t || t->dtype() == plan::I64 || shapeOf(*t) != std::vector<int64_t>{3})
        return Status::error("the plan's output \"" + b.name() + "\" must be float [3]");
      sig.gradStats.push_back(b.name());
    }
  return sig;
}

} // namespace castor::train
