#include "plan/fused_elementwise.h"

#include "plan/op_attrs.h"

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
  shape::ShapeResult domain = shape::fusedElementwise(inShapes, outShapes);
  if (!domain)
    return Status::error(domain.error);
  // The parser checks that every operand is a float type where an instruction reads it, and that
  // each output's type is the type of the value the out line lists for it.
  auto program = parseElementwiseProgram(text, inTypes, &outTypes);
  if (!program)
    return program.status();
  return FusedElementwise{std::move(*program), std::move(domain.shape)};
}

uint64_t fusedBytesMoved(const Plan &plan, const Kernel &k) {
  uint64_t bytes = 0;
  for (uint32_t id : k.inputs())
    bytes += plan.tensors(int(id)).bytes();
  for (uint32_t id : k.outputs())
    bytes += plan.tensors(int(id)).bytes();
  return bytes;
}

} // namespace castor::plan
