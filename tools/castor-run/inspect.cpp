// castor-run inspect: a plan's kernels, tensors (with live ranges), arena and parameters, as
// text tables or one JSON object; the exit code says whether the plan validates.
#include "cli_output.h"
#include "commands.h"

#include "plan/plan_io.h"
#include "plan/plan_validator.h"
#include "train/plan_index.h"
#include "weights/json.h"

#include <fmt/core.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <string>
#include <vector>

namespace castor::run {
namespace {

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

} // namespace

int inspect(const std::string &path, bool asJson) {
  auto read = plan::readPlanFile(path);
  if (!read)
    return fail(read.message());
  const plan::Plan &p = *read;
  Status valid = plan::validatePlan(p);

  const train::PlanIndex index(p);
  auto tensorRef = [&](uint32_t id) {
    const plan::Tensor *t = index.tensor(id);
    if (!t)
      return fmt::format("?{}", id);
    return t->name().empty() ? fmt::format("%{}", id) : fmt::format("{}(%{})", t->name(), id);
  };
  int64_t paramValues = 0;
  uint64_t paramBytes = 0;
  for (const plan::Parameter &par : p.parameters()) {
    if (const plan::Tensor *t = index.tensor(par.tensor())) {
      paramValues += plan::elementCount(*t).value_or(0);
      paramBytes += t->bytes();
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

  // A kernel whose result is a view of its operand moves nothing (Tensor.view_of).
  auto writesView = [&](const plan::Kernel &k) {
    const plan::Tensor *out = k.outputs_size() == 1 ? index.tensor(k.outputs(0)) : nullptr;
    return out && out->has_view_of();
  };
  int viewKernels = 0;
  for (const plan::Kernel &k : p.kernels())
    viewKernels += writesView(k) ? 1 : 0;
  fmt::print("Plan {}\n", path);
  fmt::print("  format version {}, producer \"{}\", target \"{}\", batch {}\n", p.format_version(), p.producer(),
             p.target(), p.batch());
  fmt::print("  arena {} ({} bytes); tensors total {}, {:.0f}% of the arena (above 100%: slots reused)\n",
             humanBytes(p.arena_bytes()), p.arena_bytes(), humanBytes(tensorBytes),
             p.arena_bytes() ? 100.0 * double(tensorBytes) / double(p.arena_bytes()) : 0.0);
  if (p.predicted_peak_bytes() > 0)
    fmt::print("  predicted device peak {} ({} bytes); workspace limit {} of which {} kept for the fused kernels' "
               "reserve\n",
               humanBytes(p.predicted_peak_bytes()), p.predicted_peak_bytes(), humanBytes(p.workspace_limit_bytes()),
               humanBytes(p.reserve_bytes()));
  fmt::print("  {} kernels ({} views: reshapes and transposes that move no bytes), {} tensors, {} parameters ({} values, "
             "{})\n",
             p.kernels_size(), viewKernels, p.tensors_size(), p.parameters_size(), paramValues, humanBytes(paramBytes));
  fmt::print("  validation: {}\n", valid ? std::string("ok") : valid.message());

  auto bindings = [&](const char *title, const auto &list) {
    if (list.empty())
      return;
    fmt::print("\n{}:\n", title);
    Table t{{"name", "tensor", "shape", "dtype"}, {}};
    for (const plan::Binding &b : list) {
      const plan::Tensor *bound = index.tensor(b.tensor());
      t.rows.push_back({b.name(), tensorRef(b.tensor()), bound ? plan::shapeString(*bound) : "?",
                        bound ? plan::dtypeName(bound->dtype()) : "?"});
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
    kt.rows.push_back({std::to_string(i), writesView(k) ? k.op() + " (view)" : k.op(), k.name(), in, out, attrs});
  }
  kt.print();

  fmt::print("\nTensors:\n");
  auto ranges = plan::computeLiveRanges(p);
  Table tt{{"id", "name", "kind", "dtype", "shape", "offset", "bytes", "live", "view of"}, {}};
  for (const plan::Tensor &t : p.tensors()) {
    auto r = ranges[t.id()];
    auto when = [&](int64_t k) {
      return k < 0 ? std::string("start") : k >= p.kernels_size() ? std::string("end") : "#" + std::to_string(k);
    };
    tt.rows.push_back({std::to_string(t.id()), t.name(), plan::kindName(t.kind()), plan::dtypeName(t.dtype()),
                       plan::shapeString(t), std::to_string(t.offset()), std::to_string(t.bytes()),
                       when(r.begin) + ".." + when(r.end), t.has_view_of() ? tensorRef(t.view_of()) : ""});
  }
  tt.print();

  if (!p.parameters().empty()) {
    fmt::print("\nParameters:\n");
    Table pt{{"name", "tensor", "shape", "dtype", "init", "trainable", "fan_in", "fan_out"}, {}};
    for (const plan::Parameter &par : p.parameters()) {
      const plan::Tensor *t = index.tensor(par.tensor());
      pt.rows.push_back({par.name(), fmt::format("%{}", par.tensor()), t ? plan::shapeString(*t) : "?",
                         t ? plan::dtypeName(t->dtype()) : "?", plan::initName(par.init()),
                         par.trainable() ? "yes" : "no", std::to_string(par.fan_in()), std::to_string(par.fan_out())});
    }
    pt.print();
  }
  return valid ? 0 : 1;
}

} // namespace castor::run
