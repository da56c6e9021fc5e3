#include "FusionReport.h"

#include "plan/fused_elementwise.h"

#include <fstream>

namespace castor::cli {

std::vector<FusedGroup> fusedGroups(const plan::Plan &p) {
  std::vector<FusedGroup> groups;
  for (int i = 0; i < p.kernels_size(); ++i) {
    const plan::Kernel &k = p.kernels(i);
    if (k.op() != "fused_elementwise")
      continue;
    auto fused = plan::parseFusedElementwise(p, k);
    if (!fused) // the plan was validated: nothing to report rather than a wrong figure
      continue;
    const plan::ElementwiseProgram *program = &fused->program;
    FusedGroup g{i, k.name(), {}, plan::fusedGroupKind(p, k, *fused), k.inputs_size(), k.outputs_size(), 0, 0};
    const uint64_t elements = uint64_t(shape::elementCount(fused->domain).value_or(0));
    auto bytesOf = [&](const plan::ProgramValue &v) {
      return v.isInput ? p.tensors(int(k.inputs(v.index))).bytes()
                       : elements * plan::dtypeSize(program->instructions[size_t(v.index)].dtype);
    };
    g.bytesMoved = plan::fusedBytesMoved(p, k);
    for (size_t n = 0; n < program->instructions.size(); ++n) {
      const plan::ProgramInstruction &inst = program->instructions[n];
      g.ops.push_back(inst.kernel.op());
      for (const plan::ProgramValue &v : inst.operands)
        g.unfusedBytesMoved += bytesOf(v);
      g.unfusedBytesMoved += bytesOf({false, int(n)});
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string writeFusionReport(const std::vector<FusedGroup> &groups, const std::string &dir) {
  std::ofstream out(dir + "/fusion.json");
  out << "{\"groups\": [";
  for (size_t i = 0; i < groups.size(); ++i) {
    const FusedGroup &g = groups[i];
    out << (i ? ",\n  " : "\n  ") << "{\"kernel\": " << g.kernel << ", \"name\": \"";
    for (char c : g.name) // layer names are ONNX node names: escape what JSON needs
      out << (c == '"' || c == '\\' ? "\\" : "") << c;
    out << "\", \"ops\": [";
    for (size_t j = 0; j < g.ops.size(); ++j)
      out << (j ? ", " : "") << '"' << g.ops[j] << '"';
    out << "], \"kind\": \"" << g.kind << "\", \"inputs\": " << g.inputs << ", \"outputs\": " << g.outputs << ", \"bytes_moved\": " << g.bytesMoved
        << ", \"unfused_bytes_moved\": " << g.unfusedBytesMoved << "}";
  }
  out << "\n]}\n";
  out.close();
  return out ? std::string() : "cannot write " + dir + "/fusion.json";
}

} // namespace castor::cli
