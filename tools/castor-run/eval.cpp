// castor-run eval: the accuracy of a forward plan (input "images", output "output" logits
// [N, classes]) over an IDX split, in batches of the plan's N; the last partial batch is
// zero-padded and its padded rows ignored. Pixels are normalised as in training.
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "core/session.h"
#include "data/idx.h"
#include "data/idx_source.h"
#include "data/shape_text.h"
#include "plan/plan_io.h"
#include "train/plan_index.h"
#include "weights/init.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>

namespace castor::run {

int eval(const EvalOptions &o) {
  auto backend = createBackend(o.device, BackendOptions{});
  if (!backend)
    return fail(backend.message());
  const std::string dir = o.data.rfind("idx:", 0) == 0 ? o.data.substr(4) : "";
  if (dir.empty())
    return fail("eval reads --data idx:DIR");
  if (o.split != "test" && o.split != "train")
    return fail("--split is test (t10k-* files) or train (train-* files)");
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  const train::PlanIndex index(p);
  const plan::Tensor *images = index.input("images");
  const plan::Tensor *output = index.output("output");
  // A plan with a single output may name it otherwise.
  const std::string outputName = output ? "output" : p.outputs_size() == 1 ? p.outputs(0).name() : "";
  if (!output && p.outputs_size() == 1)
    output = index.tensor(p.outputs(0).tensor());
  if (!images || !output)
    return fail("a forward plan binds the input \"images\" and the output \"output\" (logits [N, classes])");
  if (output->shape_size() != 2)
    return fail("the plan's output must be logits [N, classes], got " + data::shapeText(train::shapeOf(*output)));
  const std::vector<int64_t> imageShape = train::shapeOf(*images);
  auto set = idx::readLabelledImages(dir, o.split == "test" ? "t10k" : "train");
  if (!set)
    return fail(set.message());
  if (Status shape = data::checkIdxImageShape(imageShape, *set, dir); !shape)
    return fail(shape.message());
  const int64_t batch = imageShape[0], classes = output->shape(1), pixels = set->rows * set->cols;
  if (o.mean.size() != 1 || o.std.size() != 1)
    return fail("IDX images have one channel: give --mean and --std one value each");
  const PixelTransform transform = pixelTransform(o.mean, o.std, 1);

  SessionOptions so;
  auto paired = plan::weightsFileFor(p, o.plan, o.weights);
  if (!paired)
    return fail(paired.message());
  so.weightsPath = *paired;
  so.requireAllFromFile = true;
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return fail(created.message());
  Session &s = **created;

  int64_t correct = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> batchPixels(size_t(batch * pixels));
  for (int64_t first = 0; first < set->count; first += batch) {
    const int64_t rows = std::min(batch, set->count - first);
    std::fill(batchPixels.begin(), batchPixels.end(), uint8_t(0)); // padding rows of the last batch
    std::copy_n(set->pixels.data() + first * pixels, rows * pixels, batchPixels.data());
    Status st = s.setInputPixels("images", batchPixels.data(), transform); // as training feeds them
    if (st)
      st = s.run();
    if (!st)
      return fail(st.message());
    auto out = s.output(outputName);
    if (!out)
      return fail(out.message());
    std::vector<double> logits = weights::decodeValues(out->dtype, out->data);
    for (int64_t b = 0; b < rows; ++b) {
      int64_t best = 0;
      for (int64_t j = 1; j < classes; ++j)
        if (logits[size_t(b * classes + j)] > logits[size_t(b * classes + best)])
          best = j;
      correct += best == int64_t(set->labels[size_t(first + b)]) ? 1 : 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double accuracy = set->count ? double(correct) / double(set->count) : 0.0;
  const double rate = seconds > 0 ? double(set->count) / seconds : 0.0;
  if (o.json)
    fmt::print("{{\"split\": \"{}\", \"accuracy\": {}, \"correct\": {}, \"count\": {}, \"img_per_s\": {}}}\n", o.split,
               jsonNumber(accuracy), correct, set->count, jsonNumber(rate));
  else
    fmt::print("{} accuracy {:.4f} ({}/{}), {:.1f} img/s\n", o.split, accuracy, correct, set->count, rate);
  return 0;
}

} // namespace castor::run
