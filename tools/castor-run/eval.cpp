// castor-run eval: top-1 and top-5 accuracy of a forward plan over an IDX split or an image
// folder (train/evaluation.h does the work).
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "plan/plan_io.h"
#include "train/evaluation.h"

#include <fmt/core.h>

namespace castor::run {

int eval(const EvalOptions &o) {
  auto backend = createBackend(o.device, BackendOptions{});
  if (!backend)
    return fail(backend.message());
  if (o.data.rfind("idx:", 0) != 0 && o.data.rfind("folder:", 0) != 0)
    return fail("eval reads --data idx:DIR or folder:DIR, not '" + o.data + "'");
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  SessionOptions so;
  auto paired = plan::weightsFileFor(p, o.plan, o.weights);
  if (!paired)
    return fail(paired.message());
  so.weightsPath = *paired;
  so.requireAllFromFile = true;
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return fail(created.message());
  data::SourceOptions options;
  options.mean = o.mean;
  options.std = o.std;
  options.augment = o.augment == "standard";
  auto evaluator = train::Evaluator::create(std::move(*created), o.data, o.split, options);
  if (!evaluator)
    return fail(evaluator.message());
  auto a = (*evaluator)->run();
  if (!a)
    return fail(a.message());
  const double rate = a->seconds > 0 ? double(a->count) / a->seconds : 0.0;
  if (o.json)
    fmt::print("{{\"split\": \"{}\", \"accuracy\": {}, \"top5\": {}, \"correct\": {}, \"correct_top5\": {}, \"count\": {}, "
               "\"img_per_s\": {}}}\n",
               o.split, jsonNumber(a->top1Rate()), jsonNumber(a->top5Rate()), a->top1, a->top5, a->count,
               jsonNumber(rate));
  else
    fmt::print("{} accuracy {:.4f} ({}/{}), top-5 {:.4f}, {:.1f} img/s\n", o.split, a->top1Rate(), a->top1, a->count,
               a->top5Rate(), rate);
  return 0;
}

} // namespace castor::run
