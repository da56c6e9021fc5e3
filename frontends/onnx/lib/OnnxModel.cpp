#include "OnnxModel.h"

#include <deque>

namespace castor::onnx_import {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 21;

void ErrorList::node(const onnx::NodeProto &node, const std::string &reason) {
  errors_.push_back(file_ + ": node '" + nodeLabel(node) + "' (" + node.op_type() + "): " + reason);
}

std::string nodeLabel(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  if (node.output_size() > 0 && !node.output(0).empty())
    return "<unnamed, output " + node.output(0) + ">";
  return "<unnamed>";
}

static bool isDefaultDomain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }

static bool checkOpset(OnnxModel &model, ErrorList &errors) {
  for (const auto &opset : model.proto.opset_import())
    if (isDefaultDomain(opset.domain()))
      model.opset = opset.version();
  if (model.opset == 0) {
    errors.model("the model imports no opset of the default ONNX domain");
    return false;
  }
  if (model.opset < kMinOpset || model.opset > kMaxOpset) {
    errors.model("opset " + std::to_string(model.opset) + " is not supported (supported: " +
                 std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
    return false;
  }
  return true;
}

// Records every defined value; a name defined twice is an error.
static bool collectDefinitions(OnnxModel &model, ErrorList &errors, std::set<std::string> &defined) {
  const auto &g = model.graph();
  bool ok = true;
  for (const auto &init : g.initializer()) {
    if (init.name().empty()) {
      errors.model("an initializer has no name");
      ok = false;
      continue;
    }
    if (!defined.insert(init.name()).second) {
      errors.model("initializer '" + init.name() + "' is defined twice");
      ok = false;
    }
    model.initializers[init.name()] = &init;
  }
  std::set<std::string> inputNames;
  for (const auto &in : g.input()) {
    if (model.initializers.count(in.name()))
      continue; // IR < 4 lists initializers among the inputs
    if (in.name().empty() || !inputNames.insert(in.name()).second || !defined.insert(in.name()).second) {
      errors.model("graph input '" + in.name() + "' is unnamed or defined twice");
      ok = false;
      continue;
    }
    model.inputs.push_back(&in);
  }
  for (const auto &node : g.node())
    for (const auto &out : node.output()) {
      if (out.empty())
        continue;
      if (!defined.insert(out).second) {
        errors.node(node, "output '" + out + "' is already defined elsewhere in the graph");
        ok = false;
      }
    }
  return ok;
}

// Kahn's algorithm; reports dangling inputs and the nodes of any cycle.
static bool sortNodes(OnnxModel &model, ErrorList &errors, const std::set<std::string> &defined) {
  const auto &g = model.graph();
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &out : g.node(i).output())
      if (!out.empty())
        producer[out] = i;

  bool ok = true;
  std::vector<int> pending(g.node_size(), 0);
  std::vector<std::vector<int>> consumers(g.node_size());
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &node = g.node(i);
    for (const auto &in : node.input()) {
      if (in.empty())
        continue; // an omitted optional input
      ++model.useCount[in];
      if (!defined.count(in)) {
        errors.node(node, "input '" + in + "' is not produced by any node, initializer or graph input");
        ok = false;
        continue;
      }
      auto p = producer.find(in);
      if (p != producer.end()) {
        ++pending[i];
        consumers[p->second].push_back(i);
      }
    }
  }
  for (const auto &out : g.output()) {
    ++model.useCount[out.name()];
    if (!defined.count(out.name())) {
      errors.model("graph output '" + out.name() + "' is not produced by any node, initializer or input");
      ok = false;
    }
  }
  if (!ok)
    return false;

  std::deque<int> ready;
  for (int i = 0; i < g.node_size(); ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    model.order.push_back(&g.node(i));
    for (int c : consumers[i])
      if (--pending[c] == 0)
        ready.push_back(c);
  }
  if (int(model.order.size()) != g.node_size()) {
    std::string names;
    int listed = 0;
    for (int i = 0; i < g.node_size() && listed < 5; ++i)
      if (pending[i] > 0) {
        names += (listed++ ? ", '" : "'") + nodeLabel(g.node(i)) + "' (" + g.node(i).op_type() + ")";
      }
    errors.model("the graph has a cycle through " + names);
    return false;
  }
  return true;
}

bool parseAndValidate(const std::string &bytes, OnnxModel &model, ErrorList &errors) {
  if (bytes.empty()) {
    errors.model("the file is empty, not an ONNX model");
    return false;
  }
  if (!model.proto.ParseFromString(bytes)) {
    errors.model("not a valid ONNX model (the protobuf does not parse: truncated or not ONNX)");
    return false;
  }
  if (!model.proto.has_graph() || model.proto.ir_version() <= 0) {
    errors.model("not an ONNX model (no graph or no IR version)");
    return false;
  }
  if (model.graph().output_size() == 0) {
    errors.model("the graph has no outputs (truncated file?)");
    return false;
  }
  if (!checkOpset(model, errors))
    return false;
  std::set<std::string> defined;
  if (!collectDefinitions(model, errors, defined))
    return false;
  return sortNodes(model, errors, defined);
}

} // namespace castor::onnx_import
