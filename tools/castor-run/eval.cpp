// castor-run eval: top-1 and top-5 accuracy of a forward plan over an IDX split or an image
// folder (train/evaluation.h does the work).
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "train/evaluation.h"

#include <fmt/core.h>

namespace castor::run {

int eval(const EvalOptions &o) {
  auto backend = createBackend(o.device, BackendOptions{});
  if (!backend)
    return fail(backend.message());
  if (o.data.rfind("idx:", 0) != 0 && o.data.rfind("folder:", 0) != 0)
    return fail("eval reads --data idx:DIR or folder:DIR, not '" + o.data + "'");
  data::SourceOptions options;
  options.mean = o.mean;
  options.std = o.std;
  options.augment = o.augment == "standard";
  auto evaluator = train::Evaluator::open(o.plan, o.weights, /*requireAllFromFile=*/true, std::move(*backend), o.data,
                                          o.split, options);
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
