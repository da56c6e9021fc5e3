#include "train/evaluation.h"

#include "castor/state_names.h"
#include "data/folder_source.h"
#include "data/idx.h"
#include "data/idx_source.h"
#include "data/shape_text.h"
#include "plan/plan_io.h"
#include "train/plan_index.h"
#include "weights/init.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace castor::train {

// The set's samples in order, a batch of 8-bit pixels at a time.
struct Evaluator::Set {
  int64_t count = 0;
  PixelTransform transform;
  // IDX: the images and labels in memory.
  std::unique_ptr<idx::LabelledImages> idx;
  // Image folders: an evaluation-form source (files in order, the last batch padded).
  std::unique_ptr<data::FolderSource> folder;
  int64_t perImage = 0;

  Status batch(int64_t first, int64_t n, std::vector<uint8_t> &pixels, std::vector<int64_t> &labels) {
    pixels.assign(size_t(n * perImage), 0);
    labels.assign(size_t(n), 0);
    if (folder)
      return folder->nextPixels(0, pixels, labels); // in order, from `first` on
    const int64_t rows = std::min(n, count - first);
    std::copy_n(idx->pixels.data() + first * perImage, rows * perImage, pixels.data());
    for (int64_t r = 0; r < rows; ++r)
      labels[size_t(r)] = int64_t(idx->labels[size_t(first + r)]);
    return Status::ok();
  }
};

Expected<std::unique_ptr<Evaluator>> Evaluator::create(std::unique_ptr<Session> session, const std::string &spec,
                                                       const std::string &split, const data::SourceOptions &options) {
  const plan::Plan &p = session->plan();
  const PlanIndex index(p);
  // "images" and "output", or the single input and output whatever their names (an imported
  // model's).
  const plan::Tensor *images = index.input(names::kImages);
  std::string inputName = images ? names::kImages : "";
  if (!images && p.inputs_size() == 1) {
    images = index.tensor(p.inputs(0).tensor());
    inputName = p.inputs(0).name();
  }
  const plan::Tensor *output = index.output(names::kOutput);
  std::string outputName = output ? names::kOutput : "";
  if (!output && p.outputs_size() == 1) {
    output = index.tensor(p.outputs(0).tensor());
    outputName = p.outputs(0).name();
  }
  if (!images || !output)
    return Status::error("a forward plan binds the input \"images\" and the output \"output\" (logits [N, classes]), "
                         "or has one input and one output");
  if (output->shape_size() != 2)
    return Status::error("the forward plan's output must be logits [N, classes], got " + data::shapeText(shapeOf(*output)));
  const std::vector<int64_t> imageShape = shapeOf(*images);
  auto set = std::make_shared<Set>();
  if (spec.rfind("idx:", 0) == 0) {
    const std::string dir = spec.substr(4);
    if (split != "test" && split != "train")
      return Status::error("the IDX split is test (t10k-* files) or train (train-* files)");
    auto read = idx::readLabelledImages(dir, split == "test" ? "t10k" : "train");
    if (!read)
      return read.status();
    CASTOR_RETURN_IF_ERROR(data::checkIdxImageShape(imageShape, *read, dir));
    if (options.mean.size() > 1 || options.std.size() > 1)
      return Status::error("IDX images have one channel: give --mean and --std one value each");
    set->count = read->count;
    set->transform = pixelTransform(options.mean.empty() ? std::vector<double>{0.2860} : options.mean,
                                    options.std.empty() ? std::vector<double>{0.3530} : options.std, 1);
    set->idx = std::make_unique<idx::LabelledImages>(std::move(*read));
  } else if (spec.rfind("folder:", 0) == 0) {
    data::FolderOptions folder;
    folder.train = false;
    folder.mean = options.mean;
    folder.std = options.std;
    folder.threads = options.threads;
    folder.augment = options.augment;
    auto source = data::FolderSource::open(spec.substr(7), imageShape, output->shape(1), std::move(folder));
    if (!source)
      return source.status();
    set->count = (*source)->files();
    set->transform = (*source)->pixelTransform();
    set->folder = std::move(*source);
  } else {
    return Status::error("unknown evaluation data '" + spec + "' (idx:DIR or folder:DIR)");
  }
  set->perImage = imageShape[1] * imageShape[2] * imageShape[3];
  std::unique_ptr<Evaluator> e(new Evaluator());
  e->session_ = std::move(session);
  e->outputName_ = outputName;
  e->inputName_ = inputName;
  e->classes_ = output->shape(1);
  e->set_ = std::move(set);
  return e;
}

Expected<std::unique_ptr<Evaluator>> Evaluator::open(const std::string &planPath, const std::string &weightsPath,
                                                     bool requireAllFromFile, std::unique_ptr<Backend> backend,
                                                     const std::string &spec, const std::string &split,
                                                     const data::SourceOptions &options) {
  auto read = plan::readPlanFile(planPath);
  if (!read)
    return read.status();
  SessionOptions so;
  auto paired = plan::weightsFileFor(*read, planPath, weightsPath);
  if (!paired)
    return paired.status();
  so.weightsPath = *paired;
  so.requireAllFromFile = requireAllFromFile;
  auto session = Session::create(std::move(*read), std::move(backend), so);
  if (!session)
    return session.status();
  return create(std::move(*session), spec, split, options);
}

Status Evaluator::loadState(Session &training) {
  auto state = training.state();
  if (!state)
    return state.status();
  return session_->setParameters(*state);
}

Expected<Accuracy> Evaluator::run() {
  Accuracy a;
  const auto start = std::chrono::steady_clock::now();
  const int64_t batch = session_->plan().batch() > 0 ? session_->plan().batch() : 1;
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  if (set_->folder)
    CASTOR_RETURN_IF_ERROR(set_->folder->restorePosition({{"castor.data.epoch", "0"}, {"castor.data.cursor", "0"}}));
  for (int64_t first = 0; first < set_->count; first += batch) {
    CASTOR_RETURN_IF_ERROR(set_->batch(first, batch, pixels, labels));
    CASTOR_RETURN_IF_ERROR(session_->setInputPixels(inputName_, pixels.data(), set_->transform));
    CASTOR_RETURN_IF_ERROR(session_->run());
    auto out = session_->output(outputName_);
    if (!out)
      return out.status();
    const std::vector<double> logits = weights::decodeValues(out->dtype, out->data);
    const int64_t rows = std::min(batch, set_->count - first);
    for (int64_t r = 0; r < rows; ++r) {
      const double *row = logits.data() + r * classes_;
      const int64_t label = labels[size_t(r)];
      const int64_t best = std::max_element(row, row + classes_) - row;
      int64_t above = 0;
      for (int64_t j = 0; j < classes_; ++j)
        above += row[j] > row[label] ? 1 : 0;
      a.top1 += best == label ? 1 : 0;
      a.top5 += above < 5 ? 1 : 0;
    }
    a.count += rows;
  }
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return a;
}

} // namespace castor::train
