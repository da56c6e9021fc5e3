// castor-run: inspects and executes Castor plans without the compiler.
//
//   castor-run inspect model.plan [--json]
//   castor-run infer model.plan --input x.npy --output y.npy [--weights w.safetensors]
//                               [--init-seed 0] [--device cpu] [--poison]
//   castor-run train train.plan --steps N [--data synthetic|idx:DIR|npy:DIR] [--seed S] [--weights W]
//                               [--log-json FILE] [--save STATE] [--save-every K] [--resume STATE]
//                               [--grad-stats K]
//   castor-run eval forward.plan --weights STATE --data idx:DIR [--split test] [--json]

#include "castor/backend.h"
#include "device.h"
#include "core/npy.h"
#include "core/session.h"
#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "train.h"
#include "weights/json.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace castor;

int fail(const std::string &message) {
  fmt::print(stderr, "castor-run: error: {}\n", message);
  return 1;
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

// A plain text table with columns sized to their contents.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  void print() const {
    std::vector<size_t> width(header.size(), 0);
    for (size_t i = 0; i < header.size(); ++i)
      width[i] = header[i].size();
    for (const auto &r : rows)
      for (size_t i = 0; i < r.size() && i < width.size(); ++i)
        width[i] = std::max(width[i], r[i].size());
    auto line = [&](const std::vector<std::string> &cells) {
      std::string s = " ";
      for (size_t i = 0; i < cells.size(); ++i)
        s += " " + (i + 1 < cells.size() ? fmt::format("{:<{}}", cells[i], width[i]) : cells[i]);
      while (!s.empty() && s.back() == ' ')
        s.pop_back();
      fmt::print("{}\n", s);
    };
    line(header);
    for (const auto &r : rows)
      line(r);
  }
};

int inspect(const std::string &path, bool asJson) {
  auto read = plan::readPlanFile(path);
  if (!read)
    return fail(read.message());
  const plan::Plan &p = *read;
  Status valid = plan::validatePlan(p);

  std::map<uint32_t, const plan::Tensor *> byId;
  for (const plan::Tensor &t : p.tensors())
    byId[t.id()] = &t;
  auto tensorRef = [&](uint32_t id) {
    auto it = byId.find(id);
    if (it == byId.end())
      return fmt::format("?{}", id);
    return it->second->name().empty() ? fmt::format("%{}", id) : fmt::format("{}(%{})", it->second->name(), id);
  };
  int64_t paramValues = 0;
  uint64_t paramBytes = 0;
  for (const plan::Parameter &par : p.parameters()) {
    auto it = byId.find(par.tensor());
    if (it != byId.end()) {
      paramValues += plan::elementCount(*it->second).value_or(0);
      paramBytes += it->second->bytes();
    }
  }
  uint64_t tensorBytes = 0;
  for (const plan::Tensor &t : p.tensors())
    tensorBytes += t.bytes();

  if (asJson) {
    std::string planJson;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(p, &planJson, options).ok())
      return fail("cannot render the plan as JSON");
    std::map<std::string, int> opCounts;
    for (const plan::Kernel &k : p.kernels())
      ++opCounts[k.op()];
    std::string ops;
    for (const auto &[op, n] : opCounts)
      ops += fmt::format("{}\"{}\": {}", ops.empty() ? "" : ", ", op, n);
    fmt::print("{{\"file\": {}, \"valid\": {}, \"validation_error\": {}, "
               "\"summary\": {{\"kernels\": {}, \"tensors\": {}, \"parameters\": {}, "
               "\"parameter_values\": {}, \"parameter_bytes\": {}, \"arena_bytes\": {}, "
               "\"tensor_bytes\": {}, \"ops\": {{{}}}}}, \"plan\": {}}}\n",
               json::quote(path), valid.isOk() ? "true" : "false", json::quote(valid.message()), p.kernels_size(), p.tensors_size(),
               p.parameters_size(), paramValues, paramBytes, p.arena_bytes(), tensorBytes, ops, planJson);
    return valid ? 0 : 1;
  }

  fmt::print("Plan {}\n", path);
  fmt::print("  format version {}, producer \"{}\", target \"{}\", batch {}\n", p.format_version(), p.producer(),
             p.target(), p.batch());
  fmt::print("  arena {} ({} bytes); tensors total {}, {:.0f}% of the arena (above 100%: slots reused)\n",
             humanBytes(p.arena_bytes()), p.arena_bytes(), humanBytes(tensorBytes),
             p.arena_bytes() ? 100.0 * double(tensorBytes) / double(p.arena_bytes()) : 0.0);
  fmt::print("  {} kernels, {} tensors, {} parameters ({} values, {})\n", p.kernels_size(), p.tensors_size(),
             p.parameters_size(), paramValues, humanBytes(paramBytes));
  fmt::print("  validation: {}\n", valid ? std::string("ok") : valid.message());

  auto bindings = [&](const char *title, const auto &list) {
    if (list.empty())
      return;
    fmt::print("\n{}:\n", title);
    Table t{{"name", "tensor", "shape", "dtype"}, {}};
    for (const plan::Binding &b : list) {
      auto it = byId.find(b.tensor());
      t.rows.push_back({b.name(), tensorRef(b.tensor()), it != byId.end() ? plan::shapeString(*it->second) : "?",
                        it != byId.end() ? plan::dtypeName(it->second->dtype()) : "?"});
    }
    t.print();
  };
  bindings("Inputs", p.inputs());
  bindings("Outputs", p.outputs());

  fmt::print("\nKernels:\n");
  Table kt{{"#", "op", "name", "inputs", "outputs", "attributes"}, {}};
  for (int i = 0; i < p.kernels_size(); ++i) {
    const plan::Kernel &k = p.kernels(i);
    std::string in, out, attrs;
    for (uint32_t id : k.inputs())
      in += (in.empty() ? "" : ", ") + tensorRef(id);
    for (uint32_t id : k.outputs())
      out += (out.empty() ? "" : ", ") + tensorRef(id);
    std::map<std::string, std::string> sorted;
    for (const auto &[name, a] : k.attrs())
      sorted[name] = plan::attrString(a);
    for (const auto &[name, v] : sorted)
      attrs += (attrs.empty() ? "" : " ") + name + "=" + v;
    kt.rows.push_back({std::to_string(i), k.op(), k.name(), in, out, attrs});
  }
  kt.print();

  fmt::print("\nTensors:\n");
  auto ranges = plan::computeLiveRanges(p);
  Table tt{{"id", "name", "kind", "dtype", "shape", "offset", "bytes", "live"}, {}};
  for (const plan::Tensor &t : p.tensors()) {
    auto r = ranges[t.id()];
    auto when = [&](int64_t k) {
      return k < 0 ? std::string("start") : k >= p.kernels_size() ? std::string("end") : "#" + std::to_string(k);
    };
    tt.rows.push_back({std::to_string(t.id()), t.name(), plan::kindName(t.kind()), plan::dtypeName(t.dtype()),
                       plan::shapeString(t), std::to_string(t.offset()), std::to_string(t.bytes()),
                       when(r.begin) + ".." + when(r.end)});
  }
  tt.print();

  if (!p.parameters().empty()) {
    fmt::print("\nParameters:\n");
    Table pt{{"name", "tensor", "shape", "dtype", "init", "trainable", "fan_in", "fan_out"}, {}};
    for (const plan::Parameter &par : p.parameters()) {
      auto it = byId.find(par.tensor());
      pt.rows.push_back({par.name(), fmt::format("%{}", par.tensor()),
                         it != byId.end() ? plan::shapeString(*it->second) : "?",
                         it != byId.end() ? plan::dtypeName(it->second->dtype()) : "?", plan::initName(par.init()),
                         par.trainable() ? "yes" : "no", std::to_string(par.fan_in()), std::to_string(par.fan_out())});
    }
    pt.print();
  }
  return valid ? 0 : 1;
}

// "name=path" or "path" (when the plan has exactly one binding of that direction).
Expected<std::map<std::string, std::string>> bindFiles(const std::vector<std::string> &args,
                                                       const google::protobuf::RepeatedPtrField<plan::Binding> &bindings,
                                                       const char *what) {
  std::map<std::string, std::string> out;
  for (const std::string &arg : args) {
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      std::string name = arg.substr(0, eq);
      bool known = false;
      for (const plan::Binding &b : bindings)
        known = known || b.name() == name;
      if (known) {
        out[name] = arg.substr(eq + 1);
        continue;
      }
    }
    if (bindings.size() != 1) {
      std::string names;
      for (const plan::Binding &b : bindings)
        names += (names.empty() ? "" : ", ") + b.name();
      return Status::error(fmt::format("the plan has {} {}s ({}): pass --{} NAME=FILE", bindings.size(), what,
                                       names.empty() ? "none" : names, what));
    }
    out[bindings.Get(0).name()] = arg;
  }
  for (const plan::Binding &b : bindings)
    if (!out.count(b.name()))
      return Status::error(fmt::format("no file given for {} '{}' (--{} {}=FILE)", what, b.name(), what, b.name()));
  return out;
}

struct InferOptions {
  std::string plan;
  std::vector<std::string> inputs, outputs;
  std::string weights;
  uint64_t seed = 0;
  std::string device = "cpu";
  bool poison = false;
};

int infer(const InferOptions &o) {
  BackendOptions bo;
  bo.poison = o.poison;
  auto backend = run::createBackend(o.device, bo);
  if (!backend)
    return fail(backend.message());
  auto read = plan::readPlanFile(o.plan);
  if (!read)
    return fail(read.message());
  plan::Plan p = std::move(*read);
  auto inputs = bindFiles(o.inputs, p.inputs(), "input");
  if (!inputs)
    return fail(inputs.message());
  auto outputs = bindFiles(o.outputs, p.outputs(), "output");
  if (!outputs)
    return fail(outputs.message());

  SessionOptions so;
  so.weightsPath = o.weights;
  so.seed = o.seed;
  auto session = Session::create(std::move(p), std::move(*backend), so);
  if (!session)
    return fail(session.message());
  Session &s = **session;
  for (const auto &[name, file] : *inputs) {
    auto array = npy::readNpy(file);
    if (!array)
      return fail(array.message());
    Status st = s.setInput(name, *array);
    if (!st)
      return fail(st.message());
  }
  auto start = std::chrono::steady_clock::now();
  Status st = s.run();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!st)
    return fail(st.message());
  fmt::print(stderr, "castor-run: ran {} kernels on {} in {:.1f} ms ({} parameters from file, {} initialized)\n",
             s.plan().kernels_size(), o.device, ms, s.parametersFromFile(), s.parametersInitialized());
  for (const auto &[name, file] : *outputs) {
    auto value = s.output(name);
    if (!value)
      return fail(value.message());
    HostTensor out = std::move(*value);
    if (out.dtype == plan::BF16) { // numpy has no bfloat16
      auto f = convertTensor(out, plan::F32);
      if (!f)
        return fail(f.message());
      out = std::move(*f);
    }
    Status w = npy::writeNpy(out, file);
    if (!w)
      return fail(w.message());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"castor-run: inspect and run Castor plans (runtime only)"};
  app.require_subcommand(1);

  std::string inspectPath;
  bool json = false;
  auto *inspectCmd = app.add_subcommand("inspect", "Show a plan's kernels, tensors, arena and parameters");
  inspectCmd->add_option("plan", inspectPath, "Plan file")->required();
  inspectCmd->add_flag("--json", json, "Machine-readable output");

  InferOptions io;
  auto *inferCmd = app.add_subcommand("infer", "Run a plan once on inputs from .npy files");
  inferCmd->add_option("plan", io.plan, "Plan file")->required();
  inferCmd->add_option("--input,-i", io.inputs, "Input .npy file, or NAME=FILE for a plan with several inputs")
      ->required();
  inferCmd->add_option("--output,-o", io.outputs, "Output .npy file, or NAME=FILE")->required();
  inferCmd->add_option("--weights,-w", io.weights, "safetensors file with parameter values (by name)");
  inferCmd->add_option("--init-seed", io.seed, "Seed of the initializers of parameters not in --weights");
  inferCmd->add_option("--device", io.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  inferCmd->add_flag("--poison", io.poison, "Fill each tensor's arena slot with NaN after its last use");

  castor::run::TrainOptions to;
  auto *trainCmd = app.add_subcommand("train", "Run a training plan for a number of steps");
  trainCmd->add_option("plan", to.plan, "Training plan (inputs images, labels; outputs loss [, correct])")->required();
  trainCmd->add_option("--steps", to.steps, "Number of steps to run")->required();
  trainCmd->add_option("--data", to.data,
                       "synthetic (N(0,1) images, uniform labels), idx:DIR (train-images-idx3-ubyte[.gz], "
                       "train-labels-idx1-ubyte[.gz]) or npy:DIR (images.npy float [M,C,H,W], labels.npy int64 [M], "
                       "in file order, wrapping around)");
  trainCmd->add_option("--device", to.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  trainCmd->add_option("--seed", to.seed,
                       "Seed of the parameter initializers and of the data (synthetic batches, shuffling); "
                       "a resumed run keeps the data seed of its state file");
  auto *weightsOpt = trainCmd->add_option("--weights", to.weights, "safetensors file with initial parameter values");
  trainCmd->add_option("--log-json", to.logJson, "Append one JSON line per step (step, loss, accuracy, img_per_s)");
  trainCmd->add_option("--save", to.save, "Write the training state here at the end (atomically)");
  trainCmd->add_option("--save-every", to.saveEvery, "Also write it every K steps");
  trainCmd->add_option("--resume", to.resume, "Continue from a state written by --save")->excludes(weightsOpt);
  trainCmd->add_option("--classes", to.classes, "Class count of synthetic labels (default: from the plan's loss, else 10)");
  trainCmd->add_option("--mean", to.mean, "IDX pixel normalization mean (after scaling to [0, 1])");
  trainCmd->add_option("--std", to.std, "IDX pixel normalization standard deviation");
  trainCmd->add_flag("--poison", to.poison, "Fill each tensor's arena slot with NaN after its last use");
  trainCmd->add_option("--grad-stats", to.gradStats,
                       "Every K steps, print the plan's grad_stats:<param> outputs (mean |g|, max |g|, non-finite "
                       "count) to stderr and the JSON log");

  castor::run::BenchOptions bo;
  auto *benchCmd = app.add_subcommand("bench", "Time a training plan on synthetic data resident on the device");
  benchCmd->add_option("plan", bo.plan, "Training plan (inputs images, labels; output loss)")->required();
  benchCmd->add_option("--steps", bo.steps, "Timed steps (the median gives img/s)");
  benchCmd->add_option("--warmup", bo.warmup, "Untimed steps first");
  benchCmd->add_option("--device", bo.device, "cuda (default) or cpu");
  benchCmd->add_option("--seed", bo.seed, "Seed of the parameter initializers and the synthetic batch");
  benchCmd->add_flag("--json", bo.json, "One JSON line");

  castor::run::EvalOptions eo;
  auto *evalCmd = app.add_subcommand("eval", "Accuracy of a forward plan on an IDX data set");
  evalCmd->add_option("plan", eo.plan, "Forward plan (input images, output logits \"output\")")->required();
  evalCmd->add_option("--weights", eo.weights, "safetensors state (parameters by name)")->required();
  evalCmd->add_option("--data", eo.data, "idx:DIR")->required();
  evalCmd->add_option("--split", eo.split, "test (t10k-* files) or train");
  evalCmd->add_option("--device", eo.device, "cpu or cuda (cuda: builds with -DCASTOR_ENABLE_CUDA=ON)");
  evalCmd->add_option("--mean", eo.mean, "Pixel normalization mean (after scaling to [0, 1])");
  evalCmd->add_option("--std", eo.std, "Pixel normalization standard deviation");
  evalCmd->add_flag("--json", eo.json, "One JSON line");

  CLI11_PARSE(app, argc, argv);
  if (*inspectCmd)
    return inspect(inspectPath, json);
  if (*trainCmd)
    return castor::run::train(to);
  if (*evalCmd)
    return castor::run::eval(eo);
  if (*benchCmd)
    return castor::run::bench(bo);
  return infer(io);
}
