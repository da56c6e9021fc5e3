#include "plan/fused_elementwise.h"

#include "plan/op_attrs.h"

#include <algorithm>

namespace castor::plan {

Expected<FusedElementwise> parseFusedElementwise(const Kernel &k, const std::vector<const Tensor *> &in,
                                                 const std::vector<const Tensor *> &out) {
  AttrReader attrs(k);
  const std::string text = attrs.string("program", "");
  CASTOR_RETURN_IF_ERROR(attrs.finish());
  if (text.empty())
    return Status::error("needs its element-wise program, the string attribute 'program'");
  if (out.empty())
    return Status::error("produces no output");
  std::vector<shape::Shape> inShapes, outShapes;
  std::vector<DType> inTypes, outTypes;
  for (auto [tensors, shapes, types] : {std::tuple(&in, &inShapes, &inTypes), std::tuple(&out, &outShapes, &outTypes)})
    for (const Tensor *t : *tensors) {
      shapes->emplace_back(t->shape().begin(), t->shape().end());
      types->push_back(t->dtype());
    }
  return checkFusedElementwise(text, inShapes, inTypes, outShapes, outTypes);
}

Expected<FusedElementwise> checkFusedElementwise(const std::string &text, const std::vector<shape::Shape> &inShapes,
                                                 const std::vector<DType> &inTypes,
                                                 const std::vector<shape::Shape> &outShapes,
                                                 const std::vector<DType> &outTypes) {
  // The parser checks that every operand is a float type where an instruction reads it, and that
  // each output's type is the type of the value the out line lists for it.
  auto program = parseElementwiseProgram(text, inTypes, &outTypes);
  if (!program)
    return program.status();
  std::vector<bool> reduced;
  for (size_t j = 0; j < outShapes.size(); ++j)
    reduced.push_back(program->reduction(j).kind != ReduceKind::None);
  shape::ShapeResult domain = shape::fusedElementwise(inShapes, outShapes, reduced);
  if (!domain)
    return Status::error(domain.error);
  for (size_t j = 0; j < outShapes.size(); ++j) {
    if (!reduced[j])
      continue;
    // The listed axes: every axis the output's shape reduces, and maybe axes of size 1 (a batch
    // of one) where the output is 1 too.
    const std::vector<int64_t> &listed = program->reduction(j).axes;
    const shape::Shape &d = domain.shape, &o = outShapes[j];
    const std::vector<int64_t> needed = shape::reducedAxes(o, d);
    bool same = std::includes(listed.begin(), listed.end(), needed.begin(), needed.end());
    const size_t off = d.size() - std::min(d.size(), o.size());
    for (int64_t a : listed)
      same = same && a < int64_t(d.size()) && (size_t(a) < off || o[size_t(a) - off] == 1);
    if (!same)
      return Status::error("output " + std::to_string(j) + " " + shape::toString(o) +
                           " reduces other axes of the domain " + shape::toString(d) + " than the program lists");
  }
  return FusedElementwise{std::move(*program), std::move(domain.shape)};
}

Expected<FusedElementwise> parseFusedElementwise(const Plan &plan, const Kernel &k) {
  std::vector<const Tensor *> in, out;
  for (uint32_t id : k.inputs())
    in.push_back(&plan.tensors(int(id)));
  for (uint32_t id : k.outputs())
    out.push_back(&plan.tensors(int(id)));
  return parseFusedElementwise(k, in, out);
}

uint64_t fusedBytesMoved(const Plan &plan, const Kernel &k) {
  uint64_t bytes = 0;
  for (uint32_t id : k.inputs())
    bytes += plan.tensors(int(id)).bytes();
  for (uint32_t id : k.outputs())
    bytes += plan.tensors(int(id)).bytes();
  return bytes;
}

const char *fusedGroupKind(const Plan &plan, const Kernel &k) {
  auto group = parseFusedElementwise(plan, k);
  return group ? fusedGroupKind(plan, k, *group) : "invalid";
}

const char *fusedGroupKind(const Plan &plan, const Kernel &k, const FusedElementwise &group) {
  if (group.program.reduces())
    return "reduce";
  const int64_t domain = shape::elementCount(group.domain).value_or(0);
  for (uint32_t id : k.inputs())
    if (elementCount(plan.tensors(int(id))).value_or(0) < domain)
      return "broadcast";
  return "map";
}

} // namespace castor::plan
