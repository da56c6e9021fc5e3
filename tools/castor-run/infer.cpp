// castor-run infer: one run of a plan on inputs from .npy files, its outputs written as .npy.
#include "cli_output.h"
#include "commands.h"
#include "device.h"

#include "core/session.h"
#include "data/npy.h"
#include "plan/plan_io.h"

#include <fmt/core.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace castor::run {
namespace {

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

} // namespace

int infer(const InferOptions &o) {
  BackendOptions bo;
  bo.poison = o.poison;
  auto backend = createBackend(o.device, bo);
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
  auto paired = plan::weightsFileFor(p, o.plan, o.weights);
  if (!paired)
    return fail(paired.message());
  so.weightsPath = *paired;
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

} // namespace castor::run
