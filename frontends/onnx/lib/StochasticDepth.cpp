#include "StochasticDepth.h"
#include "TensorData.h"

#include <cmath>

namespace castor::onnx_import {
namespace {

struct Graph {
  std::map<std::string, const onnx::NodeProto *> producer;
  std::map<std::string, std::vector<const onnx::NodeProto *>> consumers;
};

// The one node reading `name`, when nothing else (no other node, no graph output) reads it.
const onnx::NodeProto *soleConsumer(const OnnxModel &model, const Graph &g, const std::string &name) {
  auto uses = model.useCount.find(name);
  auto it = g.consumers.find(name);
  if (uses == model.useCount.end() || uses->second != 1 || it == g.consumers.end() || it->second.size() != 1)
    return nullptr;
  return it->second.front();
}

// A tensor known from the file: an initializer or a Constant node's `value`.
const onnx::TensorProto *knownTensor(const OnnxModel &model, const Graph &g, const std::string &name) {
  if (auto init = model.initializers.find(name); init != model.initializers.end())
    return init->second;
  auto p = g.producer.find(name);
  if (p == g.producer.end() || p->second->op_type() != "Constant")
    return nullptr;
  for (const auto &a : p->second->attribute())
    if (a.name() == "value" && a.has_t())
      return &a.t();
  return nullptr;
}

std::optional<double> knownScalar(const OnnxModel &model, const Graph &g, const std::string &name,
                                  const std::string &baseDir) {
  const onnx::TensorProto *t = knownTensor(model, g, name);
  std::vector<double> v;
  std::string why;
  if (!t || !readDoubles(*t, baseDir, v, why) || v.size() != 1)
    return std::nullopt;
  return v[0];
}

bool isOp(const onnx::NodeProto *n, const char *type) {
  return n && n->op_type() == type && (n->domain().empty() || n->domain() == "ai.onnx");
}

} // namespace

DropPaths findDropPaths(const OnnxModel &model, const std::string &baseDir) {
  Graph g;
  for (const auto *node : model.order) {
    for (const auto &out : node->output())
      g.producer[out] = node;
    for (const auto &in : node->input())
      if (!in.empty())
        g.consumers[in].push_back(node);
  }
  DropPaths found;
  for (const auto *uniform : model.order) {
    if (!isOp(uniform, "RandomUniformLike") || uniform->input_size() != 1 || uniform->output_size() != 1)
      continue;
    double low = 0, high = 1;
    for (const auto &a : uniform->attribute()) {
      if (a.name() == "low")
        low = a.f();
      else if (a.name() == "high")
        high = a.f();
    }
    const auto *less = soleConsumer(model, g, uniform->output(0));
    if (low != 0.0 || high != 1.0 || !isOp(less, "Less") ||
        less->input_size() != 2 || less->input(0) != uniform->output(0))
      continue;
    const auto *cast = soleConsumer(model, g, less->output(0));
    const auto *div = cast && isOp(cast, "Cast") ? soleConsumer(model, g, cast->output(0)) : nullptr;
    const auto *mul = div && isOp(div, "Div") && div->input(0) == cast->output(0)
                          ? soleConsumer(model, g, div->output(0))
                          : nullptr;
    if (!isOp(mul, "Mul") || mul->input_size() != 2)
      continue;
    auto keep = knownScalar(model, g, less->input(1), baseDir);
    auto divisor = knownScalar(model, g, div->input(1), baseDir);
    if (!keep || !divisor || std::fabs(*keep - *divisor) > 1e-6 * std::fabs(*keep) || !(*keep > 0.0 && *keep <= 1.0))
      continue;
    DropPath p;
    p.dataInput = mul->input(0) == div->output(0) ? 1 : 0;
    p.ratio = 1.0 - *keep;
    p.maskLike = uniform->input(0);
    found.absorbed.insert({uniform, less, cast, div});
    found.replaced[mul] = p;
  }
  return found;
}

} // namespace castor::onnx_import
