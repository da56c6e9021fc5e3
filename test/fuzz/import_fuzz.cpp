// Seeded mutation fuzzing of the ONNX importer, built with AddressSanitizer.
//
// Usage: castor-import-fuzz ITERATIONS SEED_FILE...
// Each iteration mutates one seed model, either its bytes (flips, inserts, deletions,
// truncation, splices) or its structure (op types, inputs, attributes, dims, data types,
// opset), and imports the result in-process. Any crash or sanitizer report fails the test;
// the importer may accept or reject an input but must always return. The run also fails
// when the mutations never reach the converters (nothing imports, or nothing is rejected
// after parsing), since then it would test nothing.
#include "castor/Frontends/Onnx/Importer.h"

#include "onnx/onnx.pb.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Rng = std::mt19937_64;

const char *kOpTypes[] = {"Conv", "BatchNormalization", "Relu", "Sigmoid", "Clip", "Add", "Mul", "MaxPool",
                          "AveragePool", "GlobalAveragePool", "ReduceMean", "Flatten", "Reshape", "Gemm",
                          "MatMul", "Concat", "Dropout", "Cast", "Softmax", "SoftmaxCrossEntropyLoss",
                          "Identity", "Constant", "Erf", "Elu", "Selu", "Celu", "Softplus", "Mish",
                          "Softsign", "Sqrt", "PRelu", "ReduceSum", "ReduceMax", "ReduceL2", ""};
const int64_t kEdgeInts[] = {0, 1, -1, 2, 3, 7, -2, 1000, int64_t(1) << 31, int64_t(1) << 40, INT64_MAX, INT64_MIN};

int64_t edgeInt(Rng &rng) {
  if (rng() % 2)
    return kEdgeInts[rng() % (sizeof(kEdgeInts) / sizeof(kEdgeInts[0]))];
  return int64_t(rng() % 9) - 2;
}

template <typename T>
T pick(Rng &rng, const std::vector<T> &v) {
  return v[rng() % v.size()];
}

void mutateBytes(std::string &bytes, const std::vector<std::string> &seeds, Rng &rng) {
  int n = 1 + int(rng() % 8);
  for (int k = 0; k < n && !bytes.empty(); ++k) {
    size_t pos = rng() % bytes.size();
    switch (rng() % 6) {
    case 0: bytes[pos] ^= char(1u << (rng() % 8)); break;
    case 1: bytes[pos] = char(rng()); break;
    case 2: bytes.insert(pos, std::string(1 + rng() % 8, char(rng()))); break;
    case 3: bytes.erase(pos, 1 + rng() % 16); break;
    case 4: bytes.resize(pos); break;
    case 5: {
      const std::string &other = pick(rng, seeds);
      size_t from = rng() % other.size();
      bytes.replace(pos, rng() % 64, other.substr(from, rng() % 64));
      break;
    }
    }
  }
}

void mutateAttribute(onnx::AttributeProto &a, Rng &rng) {
  switch (rng() % 6) {
  case 0: a.set_i(edgeInt(rng)); break;
  case 1:
    for (auto &v : *a.mutable_ints())
      if (rng() % 2)
        v = edgeInt(rng);
    break;
  case 2: a.add_ints(edgeInt(rng)); break;
  case 3: a.set_f(rng() % 2 ? -1.0f : 1e30f); break;
  case 4: a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng() % 12)); break;
  case 5: a.set_s(rng() % 2 ? "SAME_UPPER" : "mean"); break;
  }
}

void mutateStructure(onnx::ModelProto &m, Rng &rng) {
  auto *g = m.mutable_graph();
  std::vector<std::string> names;
  for (const auto &n : g->node())
    for (const auto &o : n.output())
      names.push_back(o);
  for (const auto &i : g->initializer())
    names.push_back(i.name());
  int n = 1 + int(rng() % 4);
  for (int k = 0; k < n; ++k) {
    switch (rng() % 9) {
    case 0:
      if (g->node_size())
        g->mutable_node(rng() % g->node_size())->set_op_type(kOpTypes[rng() % (sizeof(kOpTypes) / sizeof(char *))]);
      break;
    case 1:
      if (g->node_size() && !names.empty()) {
        auto *node = g->mutable_node(rng() % g->node_size());
        if (node->input_size() && rng() % 2)
          node->set_input(rng() % node->input_size(), pick(rng, names));
        else if (rng() % 2)
          node->add_input(rng() % 3 ? pick(rng, names) : "");
        else if (node->input_size())
          node->mutable_input()->RemoveLast();
      }
      break;
    case 2:
      if (g->node_size()) {
        auto *node = g->mutable_node(rng() % g->node_size());
        if (node->attribute_size())
          mutateAttribute(*node->mutable_attribute(rng() % node->attribute_size()), rng);
        else {
          auto *a = node->add_attribute();
          a->set_name(rng() % 2 ? "axis" : "pads");
          a->set_type(rng() % 2 ? onnx::AttributeProto::INT : onnx::AttributeProto::INTS);
          a->set_i(edgeInt(rng));
          a->add_ints(edgeInt(rng));
        }
      }
      break;
    case 3:
      if (g->initializer_size()) {
        auto *t = g->mutable_initializer(rng() % g->initializer_size());
        if (t->dims_size())
          t->set_dims(rng() % t->dims_size(), edgeInt(rng));
        else
          t->add_dims(edgeInt(rng));
      }
      break;
    case 4:
      if (g->initializer_size()) {
        auto *t = g->mutable_initializer(rng() % g->initializer_size());
        if (rng() % 2)
          t->set_data_type(int32_t(rng() % 18));
        else
          t->clear_raw_data();
      }
      break;
    case 5:
      if (g->initializer_size()) {
        auto *t = g->mutable_initializer(rng() % g->initializer_size());
        t->set_data_location(onnx::TensorProto::EXTERNAL);
        auto *kv = t->add_external_data();
        kv->set_key(rng() % 2 ? "location" : "offset");
        kv->set_value(rng() % 2 ? "../../etc/passwd" : "-5");
      }
      break;
    case 6:
      if (g->input_size()) {
        auto *shape = g->mutable_input(rng() % g->input_size())->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (shape->dim_size())
          shape->mutable_dim(rng() % shape->dim_size())->set_dim_value(edgeInt(rng));
        else
          shape->add_dim()->set_dim_value(edgeInt(rng));
      }
      break;
    case 7:
      if (m.opset_import_size())
        m.mutable_opset_import(0)->set_version(10 + int64_t(rng() % 14));
      break;
    case 8:
      if (g->node_size() > 1) {
        int a = int(rng() % g->node_size()), b = int(rng() % g->node_size());
        g->mutable_node()->SwapElements(a, b);
        if (rng() % 4 == 0)
          g->mutable_node(a)->set_domain("com.example");
      }
      break;
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s ITERATIONS SEED_FILE...\n", argv[0]);
    return 2;
  }
  long iterations = std::atol(argv[1]);
  std::vector<std::string> seeds;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    if (!in || s.str().empty()) {
      std::fprintf(stderr, "cannot read seed %s\n", argv[i]);
      return 2;
    }
    seeds.push_back(s.str());
  }

  Rng rng(20261129);
  long imported = 0, rejectedAfterParse = 0;
  mlir::MLIRContext context;
  for (long it = 0; it < iterations; ++it) {
    std::string bytes = pick(rng, seeds);
    if (rng() % 3 == 0) {
      mutateBytes(bytes, seeds, rng);
    } else {
      onnx::ModelProto m;
      m.ParseFromString(bytes);
      mutateStructure(m, rng);
      bytes = m.SerializeAsString();
    }
    castor::onnx_import::ImportOptions options;
    options.batch = 1 + int64_t(rng() % 3);
    options.init = rng() % 2 ? castor::onnx_import::WeightInit::Kaiming : castor::onnx_import::WeightInit::File;
    auto result = castor::onnx_import::importOnnxBytes(context, bytes, "fuzz.onnx", "/nonexistent", options);
    if (result.errors.empty())
      ++imported;
    else if (result.errors.front().find("does not parse") == std::string::npos)
      ++rejectedAfterParse;
  }
  std::printf("%ld inputs: %ld imported, %ld rejected after parsing, %ld unparseable\n", iterations, imported,
              rejectedAfterParse, iterations - imported - rejectedAfterParse);
  if (imported == 0 || rejectedAfterParse == 0) {
    std::fprintf(stderr, "the mutations did not exercise both accepting and rejecting paths\n");
    return 1;
  }
  return 0;
}
