// A fused element-wise group as a plan carries it: the `program` attribute of a
// `fused_elementwise` kernel, a straight-line program over the elements of one domain.
//
// The domain is the shape every output of the kernel has. Each kernel input broadcasts to it as
// in NumPy (per channel [1,C,1,1], per sample and channel [N,C,1,1], per token, or the whole
// shape); every value the program computes has the domain's shape. Text, one line each:
//
//   t0 = sigmoid(i0) : f16            instruction k defines tk; operands are inputs iK or earlier tK
//   t1 = mul(i0, t0) : f16
//   t2 = clip(t1) {max=6, min=0} : f16
//   out t1, t2                        kernel output j is the j-th value listed (the last line)
//
// An output may instead be a reduction of a value over some axes of the domain, computed as the
// unfused reduce op computes it (one rounding to the value's type, at the end):
//
//   out t1, sum(t2)[0,2,3]            reduce_sum_to: the sum over axes 0, 2, 3 ({scale=s}: times s)
//   out mean(t1)[2,3]                 global_avg_pool: the sum divided by the number of elements summed
//
// Such an output's shape broadcasts to the domain along exactly the listed axes (keepdims or not:
// [1,C,1,1], [C,1,1] or [N,C,1,1] of an [N,C,H,W] domain). Reductions only leave the program: no
// instruction reads one. Every reduction of a program reduces the same axes (one walk of the
// domain computes them all). Reductions accumulate in f64 on the CPU reference (as reduce.cpp and
// pooling.cpp do) and in the accumulation type of their value on CUDA (f32, f64 for f64 data).
//
// An instruction is an op of the registry with its plan attributes: add and mul (two operands
// of the result's type), cast (one operand of any float type), a unary element-wise op of
// elementwise_ops.h (one operand) or its `_backward` (dy and the saved value). Each result is
// computed as the op's kernel computes it and rounded to its element type, as if stored: a
// group computes exactly what its ops compute one by one, and the CPU reference checks it bit
// for bit against the unfused plan.
//
// The compiler's verifier (castor.fused_elementwise), the plan validator, the CPU reference and
// the CUDA code generator read programs through this one parser.
#pragma once

#include "castor/status.h"
#include "plan/plan.pb.h"

#include <string>
#include <vector>

namespace castor::plan {

struct ProgramValue {
  bool isInput = false; // an input iK of the kernel, else the result tK of instruction K
  int index = 0;
  bool operator==(const ProgramValue &o) const { return isInput == o.isInput && index == o.index; }
};

struct ProgramInstruction {
  Kernel kernel; // the op and its attributes, as an unfused plan would hold them (no tensors)
  std::vector<ProgramValue> operands;
  DType dtype = DTYPE_UNSPECIFIED; // of the result
};

enum class ReduceKind { None, Sum, Mean };

// How kernel output j leaves the program: the value itself (None), or its reduction.
struct ProgramReduction {
  ReduceKind kind = ReduceKind::None;
  std::vector<int64_t> axes; // of the domain, ascending
  double scale = 1.0;        // Sum only: reduce_sum_to's factor
};

struct ElementwiseProgram {
  std::vector<ProgramInstruction> instructions;
  std::vector<ProgramValue> outputs;
  std::vector<ProgramReduction> reductions; // one per output (missing ones: None)
  const ProgramReduction &reduction(size_t j) const;
  bool reduces() const;
  // The axes every reduction output reduces (empty: none reduces).
  std::vector<int64_t> reducedAxes() const;
};

// Whether a plan op may stand in a program (add, mul, cast, the unary element-wise ops and their
// gradients).
bool isProgramOp(const std::string &op);

// Parses and checks `text` for a kernel whose inputs have `inputTypes`: the grammar, each op's
// operand count and attributes (the op's own parser), operand types, every value defined before
// use; `outputTypes`, when given, must be the types of the values `out` lists. The message
// names the line.
Expected<ElementwiseProgram> parseElementwiseProgram(const std::string &text, const std::vector<DType> &inputTypes,
                                                     const std::vector<DType> *outputTypes = nullptr);

// The text parseElementwiseProgram reads (attributes in name order, reals exactly).
std::string printElementwiseProgram(const ElementwiseProgram &program);

// "i3", "t0".
std::string programValueName(const ProgramValue &value);

} // namespace castor::plan
