// A parsed and structurally validated ONNX graph, in execution order.
#pragma once

#include "onnx/onnx.pb.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace castor::onnx_import {

// Collects the import's problems, each prefixed with the model's name.
class ErrorList {
public:
  explicit ErrorList(std::string file) : file_(std::move(file)) {}
  void model(const std::string &reason) { errors_.push_back(file_ + ": " + reason); }
  void node(const onnx::NodeProto &node, const std::string &reason);
  bool empty() const { return errors_.empty(); }
  std::vector<std::string> take() { return std::move(errors_); }

private:
  std::string file_;
  std::vector<std::string> errors_;
};

// A node's name for messages: its ONNX name, or its first output when it has none.
std::string nodeLabel(const onnx::NodeProto &node);

struct OnnxModel {
  onnx::ModelProto proto;
  int64_t opset = 0;
  // Initializers by name (graph inputs that are also initializers count as initializers).
  std::map<std::string, const onnx::TensorProto *> initializers;
  // True graph inputs, in order.
  std::vector<const onnx::ValueInfoProto *> inputs;
  // Nodes in a topological order.
  std::vector<const onnx::NodeProto *> order;
  // How many node inputs and graph outputs read each value.
  std::map<std::string, int> useCount;

  const onnx::GraphProto &graph() const { return proto.graph(); }
};

// Parses `bytes` and checks what every later step relies on: a graph, a supported opset of
// the default domain, names defined once, no dangling input, no cycle. Returns false after
// recording the reasons.
bool parseAndValidate(const std::string &bytes, OnnxModel &model, ErrorList &errors);

} // namespace castor::onnx_import
