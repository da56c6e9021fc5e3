#include "train.h"
#include "device.h"
#include "host_data.h"

#include "castor/backend.h"
#include "core/idx.h"
#include "core/npy.h"
#include "core/session.h"
#include "plan/plan_io.h"
#include "weights/init.h"
#include "weights/philox.h"
#include "weights/safetensors.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <unistd.h>

namespace castor::run {
namespace {

int fail(const std::string &message) {
  fmt::print(stderr, "castor-run: error: {}\n", message);
  return 1;
}

const plan::Tensor *tensorById(const plan::Plan &p, uint32_t id) {
  for (const plan::Tensor &t : p.tensors())
    if (t.id() == id)
      return &t;
  return nullptr;
}

const plan::Tensor *binding(const plan::Plan &p, const google::protobuf::RepeatedPtrField<plan::Binding> &list,
                            const std::string &name) {
  for (const plan::Binding &b : list)
    if (b.name() == name)
      return tensorById(p, b.tensor());
  return nullptr;
}

std::vector<int64_t> shapeOf(const plan::Tensor &t) { return {t.shape().begin(), t.shape().end()}; }

std::string shapeText(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The class count of the plan's loss: the width of the logits its labels are compared with.
int64_t classesOf(const plan::Plan &p, uint32_t labelsId) {
  for (const plan::Kernel &k : p.kernels())
    if ((k.op() == "softmax_cross_entropy" || k.op() == "count_correct") && k.inputs_size() >= 2 &&
        k.inputs(1) == labelsId)
      if (const plan::Tensor *logits = tensorById(p, k.inputs(0)))
        if (logits->shape_size() == 2)
          return logits->shape(1);
  return 0;
}

// A source of training batches. The position it needs to continue is saved with the state.
class Batches {
public:
  virtual ~Batches() = default;
  // Images (batch x per-image values) and labels of global step `step` (0-based).
  virtual Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) = 0;
  virtual std::string kind() const = 0;
  virtual void save(std::map<std::string, std::string> &) const {}
  virtual Status restore(const std::map<std::string, std::string> &) { return Status::ok(); }
  virtual int64_t epoch() const { return 0; }
};

// Deterministic N(0, 1) images and uniform labels, a function of (seed, step) only (syntheticBatch),
// each step's made in the background while the previous one runs.
class SyntheticBatches final : public Batches {
public:
  SyntheticBatches(uint64_t seed, int64_t batch, int64_t perImage, int64_t classes)
      : stream_(seed, batch, perImage, classes) {}
  std::string kind() const override { return "synthetic"; }
  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override {
    stream_.next(step, images, labels);
    return Status::ok();
  }

private:
  SyntheticStream stream_;
};

// IDX images in a seeded random order, reshuffled every epoch; an epoch's last partial batch is
// dropped. Pixels are scaled to [0, 1], then normalized with (x - mean) / std.
class IdxBatches final : public Batches {
public:
  IdxBatches(idx::LabelledImages data, uint64_t seed, int64_t batch, double mean, double stddev)
      : data_(std::move(data)), seed_(seed), batch_(batch), mean_(mean), std_(stddev) {}
  std::string kind() const override { return "idx"; }
  int64_t epoch() const override { return epoch_; }

  Status next(int64_t, std::vector<double> &images, std::vector<int64_t> &labels) override {
    if (cursor_ + batch_ > data_.count) {
      ++epoch_;
      cursor_ = 0;
    }
    if (permEpoch_ != epoch_)
      shuffle();
    const int64_t pixels = data_.rows * data_.cols;
    images.resize(size_t(batch_ * pixels));
    labels.resize(size_t(batch_));
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t i = perm_[size_t(cursor_ + b)];
      for (int64_t p = 0; p < pixels; ++p)
        images[size_t(b * pixels + p)] = (double(data_.pixels[size_t(i * pixels + p)]) / 255.0 - mean_) / std_;
      labels[size_t(b)] = data_.labels[size_t(i)];
    }
    cursor_ += batch_;
    return Status::ok();
  }

  void save(std::map<std::string, std::string> &m) const override {
    m["castor.data.epoch"] = std::to_string(epoch_);
    m["castor.data.cursor"] = std::to_string(cursor_);
  }
  Status restore(const std::map<std::string, std::string> &m) override {
    auto e = m.find("castor.data.epoch"), c = m.find("castor.data.cursor");
    if (e == m.end() || c == m.end())
      return Status::error("the state file holds no IDX loader position (castor.data.epoch, castor.data.cursor)");
    epoch_ = std::stoll(e->second);
    cursor_ = std::stoll(c->second);
    return Status::ok();
  }

private:
  // Fisher-Yates with j = floor(u * (i + 1)), u from Philox(counter {i, 0, epoch, 0}).
  void shuffle() {
    perm_.resize(size_t(data_.count));
    std::iota(perm_.begin(), perm_.end(), 0);
    const auto key = dataKey(seed_, kShuffleTag);
    for (int64_t i = data_.count - 1; i > 0; --i) {
      auto w = weights::philox4x32_10({uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(epoch_), 0}, key);
      int64_t j = std::min(int64_t(u53(w[0], w[1]) * double(i + 1)), i);
      std::swap(perm_[size_t(i)], perm_[size_t(j)]);
    }
    permEpoch_ = epoch_;
  }

  idx::LabelledImages data_;
  uint64_t seed_;
  int64_t batch_;
  double mean_, std_;
  int64_t epoch_ = 0, cursor_ = 0, permEpoch_ = -1;
  std::vector<int64_t> perm_;
};

// Preprocessed arrays from DIR/images.npy (float [M, C, H, W]) and DIR/labels.npy (integer [M]),
// fed in file order without shuffling: the batch of global step s holds samples
// (s * N + b) mod M, b = 0..N-1, so the position is a function of the step alone.
class NpyBatches final : public Batches {
public:
  NpyBatches(std::vector<double> images, std::vector<int64_t> labels, int64_t count, int64_t batch, int64_t perImage)
      : images_(std::move(images)), labels_(std::move(labels)), count_(count), batch_(batch), perImage_(perImage) {}
  std::string kind() const override { return "npy"; }
  int64_t epoch() const override { return epoch_; }

  Status next(int64_t step, std::vector<double> &images, std::vector<int64_t> &labels) override {
    images.resize(size_t(batch_ * perImage_));
    labels.resize(size_t(batch_));
    const int64_t first = int64_t((uint64_t(step) * uint64_t(batch_)) % uint64_t(count_));
    epoch_ = int64_t((uint64_t(step) * uint64_t(batch_)) / uint64_t(count_));
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t i = (first + b) % count_;
      std::copy_n(images_.begin() + i * perImage_, perImage_, images.begin() + b * perImage_);
      labels[size_t(b)] = labels_[size_t(i)];
    }
    return Status::ok();
  }

private:
  std::vector<double> images_;
  std::vector<int64_t> labels_;
  int64_t count_, batch_, perImage_, epoch_ = 0;
};

// "npy:DIR" -> DIR; "" when `data` is not of that form.
std::string npyDir(const std::string &data) { return data.rfind("npy:", 0) == 0 ? data.substr(4) : ""; }

Expected<std::unique_ptr<Batches>> loadNpy(const std::string &dir, const std::vector<int64_t> &imageShape,
                                           int64_t classes) {
  const std::string imagesPath = dir + "/images.npy", labelsPath = dir + "/labels.npy";
  auto images = npy::readNpy(imagesPath);
  if (!images)
    return images.status();
  auto labels = npy::readNpy(labelsPath);
  if (!labels)
    return labels.status();
  if (images->dtype == plan::I64)
    return Status::error(imagesPath + " holds integers; images must be floating point [M, C, H, W]");
  if (labels->dtype != plan::I64)
    return Status::error(labelsPath + " must hold integer labels (int64 or int32) [M]");
  std::vector<int64_t> want(imageShape);
  want[0] = images->shape.empty() ? 0 : images->shape[0];
  if (images->shape != want) {
    std::string perSample;
    for (size_t i = 1; i < imageShape.size(); ++i)
      perSample += ", " + std::to_string(imageShape[i]);
    return Status::error("the plan's images input is " + shapeText(imageShape) + ", so " + imagesPath +
                         " must be [M" + perSample + "], but it is " + shapeText(images->shape));
  }
  const int64_t count = images->shape[0];
  if (labels->shape.size() != 1 || labels->shape[0] != count)
    return Status::error(labelsPath + " must be [" + std::to_string(count) + "] (one label per image in " +
                         imagesPath + "), but it is " + shapeText(labels->shape));
  if (count <= 0)
    return Status::error(imagesPath + " holds no images");
  std::vector<int64_t> labelValues(static_cast<size_t>(count));
  std::memcpy(labelValues.data(), labels->data.data(), labelValues.size() * 8);
  for (int64_t i = 0; i < count; ++i)
    if (labelValues[size_t(i)] < 0 || (classes > 0 && labelValues[size_t(i)] >= classes))
      return Status::error(fmt::format("{}: label {} of sample {} is outside [0, {})", labelsPath,
                                       labelValues[size_t(i)], i, classes));
  const int64_t batch = imageShape[0], perImage = std::accumulate(imageShape.begin() + 1, imageShape.end(),
                                                                  int64_t(1), std::multiplies<int64_t>());
  return std::unique_ptr<Batches>(std::make_unique<NpyBatches>(weights::decodeValues(images->dtype, images->data),
                                                               std::move(labelValues), count, batch, perImage));
}

// "idx:DIR" -> DIR; "" when `data` is not of that form.
std::string idxDir(const std::string &data) { return data.rfind("idx:", 0) == 0 ? data.substr(4) : ""; }

Status checkImageShape(const std::vector<int64_t> &plan, const idx::LabelledImages &d, const std::string &dir) {
  std::vector<int64_t> want{plan.empty() ? 0 : plan[0], 1, d.rows, d.cols};
  if (plan != want)
    return Status::error("the plan's images input is " + shapeText(plan) + ", but the images in " + dir + " are " +
                         std::to_string(d.rows) + "x" + std::to_string(d.cols) + " with one channel (the plan needs " +
                         shapeText(want) + ")");
  return Status::ok();
}

std::string jsonNumber(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }

std::string jsonString(const std::string &v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\')
      out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20)
      out += fmt::format("\\u{:04x}", int(ch));
    else
      out += ch;
  }
  return out + "\"";
}

// The optional outputs of a mixed-precision training plan that train reports: the dynamic loss
// scale and its counters, and gradient statistics ("grad_stats:<param>", f32 [3]: mean |g|,
// max |g|, non-finite count).
struct ReportedOutputs {
  const plan::Tensor *lossScale = nullptr, *sinceOverflow = nullptr, *skipped = nullptr;
  std::vector<std::string> gradStats; // output names, in the plan's order

  Status find(const plan::Plan &p) {
    lossScale = binding(p, p.outputs(), "loss_scale");
    sinceOverflow = binding(p, p.outputs(), "steps_since_overflow");
    skipped = binding(p, p.outputs(), "skipped_steps");
    auto scalarOf = [](const plan::Tensor *t, bool integer, const char *name) -> Status {
      if (t && (t->shape_size() != 0 || (integer ? t->dtype() != plan::I64 : t->dtype() == plan::I64)))
        return Status::error(fmt::format("the plan's output \"{}\" must be {} []", name, integer ? "i64" : "float"));
      return Status::ok();
    };
    CASTOR_RETURN_IF_ERROR(scalarOf(lossScale, false, "loss_scale"));
    CASTOR_RETURN_IF_ERROR(scalarOf(sinceOverflow, true, "steps_since_overflow"));
    CASTOR_RETURN_IF_ERROR(scalarOf(skipped, true, "skipped_steps"));
    for (const plan::Binding &b : p.outputs())
      if (b.name().rfind("grad_stats:", 0) == 0) {
        const plan::Tensor *t = tensorById(p, b.tensor());
        if (!t || t->dtype() == plan::I64 || shapeOf(*t) != std::vector<int64_t>{3})
          return Status::error("the plan's output \"" + b.name() + "\" must be float [3]");
        gradStats.push_back(b.name());
      }
    return Status::ok();
  }
};

Expected<double> outputScalar(Session &s, const std::string &name) {
  auto t = s.output(name);
  if (!t)
    return t.status();
  if (t->dtype == plan::I64) {
    int64_t v;
    std::memcpy(&v, t->data.data(), 8);
    return double(v);
  }
  return weights::decodeValues(t->dtype, t->data)[0];
}

} // namespace

int64_t lossClasses(const plan::Plan &p, uint32_t labelsId) { return classesOf(p, labelsId); }

const plan::Tensor *findBinding(const plan::Plan &p, bool input, const std::string &name) {
  return binding(p, input ? p.inputs() : p.outputs(), name);
}

int train(const TrainOptions &o) {
  BackendOptions bo;
  bo.poison = o.poison;
  auto backend = run::createBackend(o.device, bo);
  if (!backend)
    return fail(backend.message());
  if (o.steps < 0)
    return fail("--steps must be non-negative");
  if (!o.weights.empty() && !o.resume.empty())
    return fail("--weights and --resume exclude each other (a saved state holds the weights)");
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  const plan::Tensor *images = binding(p, p.inputs(), "images"), *labels = binding(p, p.inputs(), "labels");
  const plan::Tensor *lossT = binding(p, p.outputs(), "loss"), *correctT = binding(p, p.outputs(), "correct");
  if (!images || !labels || !lossT)
    return fail("a training plan binds inputs \"images\" and \"labels\" and the output \"loss\"");
  if (labels->dtype() != plan::I64 || labels->shape_size() != 1)
    return fail("the plan's labels input must be i64 [N]");
  const std::vector<int64_t> imageShape = shapeOf(*images);
  const plan::DType imageDType = images->dtype();
  const int64_t batch = imageShape.empty() ? 0 : imageShape[0];
  if (batch <= 0 || labels->shape(0) != batch)
    return fail("the plan's images " + shapeText(imageShape) + " and labels " + shapeText(shapeOf(*labels)) +
                " disagree on the batch");
  const int64_t perImage = *plan::elementCount(*images) / batch;
  const uint32_t labelsId = labels->id();
  if (o.gradStats < 0)
    return fail("--grad-stats must be non-negative");
  ReportedOutputs reported;
  if (Status r = reported.find(p); !r)
    return fail(r.message());
  if (o.gradStats > 0 && reported.gradStats.empty())
    return fail("--grad-stats: the plan has no outputs named \"grad_stats:<param>\"");

  // The saved state, when resuming: its metadata says where training stopped.
  std::map<std::string, std::string> meta;
  uint64_t dataSeed = o.seed;
  int64_t firstStep = 0;
  if (!o.resume.empty()) {
    auto state = weights::readSafetensors(o.resume);
    if (!state)
      return fail(state.message());
    meta = state->metadata;
    if (!meta.count("castor.step") || !meta.count("castor.data.seed") || !meta.count("castor.data"))
      return fail(o.resume + " is not a training state written by castor-run train --save");
    firstStep = std::stoll(meta["castor.step"]);
    dataSeed = std::stoull(meta["castor.data.seed"]);
  }

  std::unique_ptr<Batches> data;
  std::string dir = idxDir(o.data);
  if (o.data == "synthetic") {
    int64_t classes = o.classes > 0 ? o.classes : classesOf(p, labelsId);
    if (classes <= 0)
      classes = 10;
    data = std::make_unique<SyntheticBatches>(dataSeed, batch, perImage, classes);
  } else if (!dir.empty()) {
    auto set = idx::readLabelledImages(dir, "train");
    if (!set)
      return fail(set.message());
    Status shape = checkImageShape(imageShape, *set, dir);
    if (!shape)
      return fail(shape.message());
    if (set->count < batch)
      return fail(fmt::format("{} holds {} training images, fewer than one batch of {}", dir, set->count, batch));
    data = std::make_unique<IdxBatches>(std::move(*set), dataSeed, batch, o.mean, o.std);
  } else if (std::string npy = npyDir(o.data); !npy.empty()) {
    auto loaded = loadNpy(npy, imageShape, classesOf(p, labelsId));
    if (!loaded)
      return fail(loaded.message());
    data = std::move(*loaded);
  } else {
    return fail("unknown --data '" + o.data + "' (synthetic, idx:DIR or npy:DIR)");
  }
  if (!o.resume.empty()) {
    if (meta["castor.data"] != data->kind())
      return fail(fmt::format("{} was trained on {} data, not {}", o.resume, meta["castor.data"], data->kind()));
    Status r = data->restore(meta);
    if (!r)
      return fail(r.message());
  }

  SessionOptions so;
  so.weightsPath = !o.resume.empty() ? o.resume : o.weights;
  so.seed = o.seed;
  so.requireAllFromFile = !o.resume.empty();
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return fail(created.message());
  Session &s = **created;

  int64_t step = firstStep;
  // The next step's batch goes into the session while the device runs the current step (see the
  // loop); `fed` says it did, and `positionBeforeNext` is where the data source stood before it.
  bool fed = false;
  std::map<std::string, std::string> positionBeforeNext;
  auto saveState = [&](const std::string &path) -> Status {
    auto state = s.state();
    if (!state)
      return state.status();
    state->metadata["castor.format"] = "training-state 1";
    state->metadata["castor.step"] = std::to_string(step);
    state->metadata["castor.data"] = data->kind();
    state->metadata["castor.data.seed"] = std::to_string(dataSeed);
    if (fed)
      state->metadata.insert(positionBeforeNext.begin(), positionBeforeNext.end());
    else
      data->save(state->metadata);
    return weights::writeSafetensors(*state, path);
  };

  std::FILE *log = nullptr;
  if (!o.logJson.empty()) {
    log = std::fopen(o.logJson.c_str(), o.resume.empty() ? "w" : "a");
    if (!log)
      return fail("cannot open " + o.logJson + " for writing");
  }
  const bool terminal = ::isatty(STDERR_FILENO);
  std::vector<double> imageValues;
  std::vector<int64_t> labelValues;
  // Encoded straight to the plan's dtype, into one buffer kept across steps: the session then
  // uploads the bytes as they are (no f64 copy and second conversion of every value).
  HostTensor in{"images", hostImageDType(imageDType), imageShape, {}};
  HostTensor lb{"labels", plan::I64, {batch}, {}};
  auto feed = [&](int64_t k) -> Status {
    CASTOR_RETURN_IF_ERROR(data->next(k, imageValues, labelValues));
    encodeValuesParallel(in.dtype, imageValues, in.data);
    lb.data.resize(labelValues.size() * 8);
    std::memcpy(lb.data.data(), labelValues.data(), lb.data.size());
    CASTOR_RETURN_IF_ERROR(s.setInput("images", in));
    return s.setInput("labels", lb);
  };
  double lastLoss = NAN, lastAccuracy = NAN, totalSeconds = 0;
  const int64_t lastStep = firstStep + o.steps;
  int rc = 0;
  for (; step < lastStep; ++step) {
    auto start = std::chrono::steady_clock::now();
    Status st = fed ? Status::ok() : feed(step);
    if (st)
      st = s.run().withContext(fmt::format("step {}", step + 1));
    // A device backend returns from run() with the step enqueued: the next batch is prepared and
    // its transfer started now, overlapping the step, before this step's outputs are read.
    fed = false;
    if (st && step + 1 < lastStep) {
      positionBeforeNext.clear();
      data->save(positionBeforeNext);
      st = feed(step + 1).withContext(fmt::format("step {}", step + 2));
      fed = bool(st);
    }
    if (!st) {
      rc = fail(st.message());
      break;
    }
    auto loss = s.output("loss");
    if (!loss) {
      rc = fail(loss.message());
      break;
    }
    lastLoss = weights::decodeValues(loss->dtype, loss->data)[0];
    int64_t correct = -1;
    if (correctT) {
      auto c = s.output("correct");
      if (!c) {
        rc = fail(c.message());
        break;
      }
      correct = int64_t(weights::decodeValues(c->dtype, c->data)[0]);
    }
    lastAccuracy = correct >= 0 ? double(correct) / double(batch) : NAN;
    // Loss scaling: the scale and counters after this step, as JSON members and progress text.
    std::string extraJson, extraText;
    Status rs;
    for (auto [t, name, label] : {std::tuple{reported.lossScale, "loss_scale", "scale"},
                                  std::tuple{reported.sinceOverflow, "steps_since_overflow", "clean"},
                                  std::tuple{reported.skipped, "skipped_steps", "skipped"}}) {
      if (!t || !rs)
        continue;
      auto v = outputScalar(s, name);
      if (!v) {
        rs = v.status();
        continue;
      }
      const bool integer = t->dtype() == plan::I64;
      extraJson += fmt::format(", \"{}\": {}", name, integer ? std::to_string(int64_t(*v)) : jsonNumber(*v));
      extraText += fmt::format("  {} {}", label, integer ? std::to_string(int64_t(*v)) : fmt::format("{:g}", *v));
    }
    // Gradient statistics every --grad-stats steps: a table on stderr and a JSON object.
    if (rs && o.gradStats > 0 && (step + 1) % o.gradStats == 0) {
      std::string rows, members;
      for (const std::string &name : reported.gradStats) {
        auto t = s.output(name);
        if (!t) {
          rs = t.status();
          break;
        }
        const std::vector<double> v = weights::decodeValues(t->dtype, t->data);
        const std::string param = name.substr(std::strlen("grad_stats:"));
        rows += fmt::format("  {:<40} {:>12.4e} {:>12.4e} {:>10}\n", param, v[0], v[1], int64_t(v[2]));
        members += fmt::format("{}{}: [{}, {}, {}]", members.empty() ? "" : ", ", jsonString(param), jsonNumber(v[0]),
                               jsonNumber(v[1]), int64_t(v[2]));
      }
      if (rs) {
        fmt::print(stderr, "{}gradient statistics after step {}:\n  {:<40} {:>12} {:>12} {:>10}\n{}",
                   terminal ? "\n" : "", step + 1, "param", "mean |g|", "max |g|", "non-finite", rows);
        extraJson += ", \"grad_stats\": {" + members + "}";
      }
    }
    if (!rs) {
      rc = fail(rs.message());
      break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    totalSeconds += seconds;
    const double rate = seconds > 0 ? double(batch) / seconds : 0.0;
    if (log) {
      fmt::print(log, "{{\"step\": {}, \"epoch\": {}, \"loss\": {}, \"accuracy\": {}, \"correct\": {}, \"img_per_s\": {}{}}}\n",
                 step + 1, data->epoch(), jsonNumber(lastLoss), jsonNumber(lastAccuracy), correct,
                 jsonNumber(rate), extraJson);
      std::fflush(log);
    }
    if (terminal)
      fmt::print(stderr, "\rstep {}/{}  loss {:.4f}  accuracy {:.3f}{}  {:.1f} img/s   ", step + 1, lastStep, lastLoss,
                 lastAccuracy, extraText, rate);
    if (!o.save.empty() && o.saveEvery > 0 && (step + 1) % o.saveEvery == 0 && step + 1 < lastStep) {
      Status w = saveState(o.save);
      if (!w) {
        ++step;
        rc = fail(w.message());
        break;
      }
    }
  }
  if (terminal)
    fmt::print(stderr, "\n");
  if (log)
    std::fclose(log);
  if (rc != 0)
    return rc;
  if (!o.save.empty()) {
    Status w = saveState(o.save);
    if (!w)
      return fail(w.message());
  }
  fmt::print("trained steps {}..{} on {} data: last loss {:.6f}, last batch accuracy {:.4f}, {:.1f} img/s\n",
             firstStep + 1, lastStep, data->kind(), lastLoss, lastAccuracy,
             totalSeconds > 0 ? double(batch * o.steps) / totalSeconds : 0.0);
  return 0;
}

int eval(const EvalOptions &o) {
  auto backend = run::createBackend(o.device, BackendOptions{});
  if (!backend)
    return fail(backend.message());
  std::string dir = idxDir(o.data);
  if (dir.empty())
    return fail("eval reads --data idx:DIR");
  if (o.split != "test" && o.split != "train")
    return fail("--split is test (t10k-* files) or train (train-* files)");
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  const plan::Tensor *images = binding(p, p.inputs(), "images");
  const plan::Tensor *output = binding(p, p.outputs(), "output");
  if (!output && p.outputs_size() == 1)
    output = tensorById(p, p.outputs(0).tensor());
  if (!images || !output)
    return fail("a forward plan binds the input \"images\" and the output \"output\" (logits [N, classes])");
  if (output->shape_size() != 2)
    return fail("the plan's output must be logits [N, classes], got " + shapeText(shapeOf(*output)));
  const std::vector<int64_t> imageShape = shapeOf(*images);
  auto set = idx::readLabelledImages(dir, o.split == "test" ? "t10k" : "train");
  if (!set)
    return fail(set.message());
  Status shape = checkImageShape(imageShape, *set, dir);
  if (!shape)
    return fail(shape.message());
  const int64_t batch = imageShape[0], classes = output->shape(1), pixels = set->rows * set->cols;

  SessionOptions so;
  so.weightsPath = o.weights;
  so.requireAllFromFile = true;
  auto created = Session::create(std::move(p), std::move(*backend), so);
  if (!created)
    return fail(created.message());
  Session &s = **created;

  int64_t correct = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<double> values(size_t(batch * pixels));
  for (int64_t first = 0; first < set->count; first += batch) {
    const int64_t rows = std::min(batch, set->count - first);
    std::fill(values.begin(), values.end(), 0.0); // padding rows of the last batch
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t q = 0; q < pixels; ++q)
        values[size_t(b * pixels + q)] =
            (double(set->pixels[size_t((first + b) * pixels + q)]) / 255.0 - o.mean) / o.std;
    Status st = s.setInput("images", {"images", plan::F64, imageShape, weights::encodeValues(plan::F64, values)});
    if (st)
      st = s.run();
    if (!st)
      return fail(st.message());
    auto out = s.output(binding(s.plan(), s.plan().outputs(), "output") ? "output" : s.plan().outputs(0).name());
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
