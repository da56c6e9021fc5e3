#include "plan_builder.h"

#include "plan/plan_validator.h"
#include "weights/init.h"

namespace castor::test {

static const plan::Tensor &find(const plan::Plan &p, uint32_t id) {
  for (const plan::Tensor &t : p.tensors())
    if (t.id() == id)
      return t;
  FAIL("no tensor " << id);
  return p.tensors(0);
}

void uploadValues(Backend &b, const plan::Plan &p, uint32_t id, const std::vector<double> &values) {
  const plan::Tensor &t = find(p, id);
  auto bytes = weights::encodeValues(t.dtype(), values);
  Status s = b.upload(id, bytes.data(), bytes.size());
  REQUIRE(s.message() == "");
}

std::vector<double> downloadValues(Backend &b, const plan::Plan &p, uint32_t id) {
  const plan::Tensor &t = find(p, id);
  std::vector<uint8_t> bytes(t.bytes());
  Status s = b.download(id, bytes.data(), bytes.size());
  REQUIRE(s.message() == "");
  return weights::decodeValues(t.dtype(), bytes);
}

std::unique_ptr<Backend> loadOnCpu(const plan::Plan &p) {
  Status v = plan::validatePlan(p);
  INFO(v.message());
  REQUIRE(v.isOk());
  auto backend = createCpuBackend();
  Status l = backend->load(p);
  INFO(l.message());
  REQUIRE(l.isOk());
  return backend;
}

void runOk(Backend &b) {
  Status r = b.run();
  INFO(r.message());
  REQUIRE(r.isOk());
}

std::vector<std::vector<double>> runKernel(const std::string &op, const std::vector<Operand> &inputs,
                                           const std::vector<Operand> &outputs,
                                           std::map<std::string, plan::Attr> attrs) {
  PlanBuilder pb;
  std::vector<uint32_t> in, out;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(pb.tensor("in" + std::to_string(i), inputs[i].shape, plan::Tensor::INPUT, inputs[i].dtype));
  for (size_t i = 0; i < outputs.size(); ++i)
    out.push_back(pb.tensor("out" + std::to_string(i), outputs[i].shape, plan::Tensor::OUTPUT, outputs[i].dtype));
  pb.kernel(op, in, out, attrs);
  auto backend = loadOnCpu(pb.plan);
  for (size_t i = 0; i < inputs.size(); ++i)
    uploadValues(*backend, pb.plan, in[i], inputs[i].values);
  runOk(*backend);
  std::vector<std::vector<double>> results;
  for (uint32_t id : out)
    results.push_back(downloadValues(*backend, pb.plan, id));
  return results;
}

} // namespace castor::test
