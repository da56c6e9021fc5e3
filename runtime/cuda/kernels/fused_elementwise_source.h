// The CUDA C++ source of one `fused_elementwise` kernel, written from its program
// (plan/elementwise_program.h) for NVRTC (cuda/kernels/nvrtc_module.h). Host code only: CI
// compiles the sources it writes without a GPU.
//
// What the kernel computes is what the unfused CUDA kernels compute (cuda/kernels/elementwise.cu):
// each instruction in the accumulation type of its dtype (float for f32, f16 and bf16; double for
// f64) with the formulas of plan/elementwise_ops.h, whose text the source embeds, and its result
// rounded to its dtype as the unfused kernel's store rounds it; a cast converts through double
// where either side is f64, else through float.
//
// The domain is walked in its storage order (the CUDA backend's: rank-4 tensors may be
// channels-last), flat index i. Each operand's index is specialised when the source is written
// from its strides in that order: `i` for a tensor laid out as the domain, a constant 0 for a
// scalar, and otherwise a sum of (i / inner) % extent * stride terms with constant divisors
// (a per-channel vector of a channels-last domain reads i % C). When every tensor indexed by `i`
// is 16-byte aligned (checked at each launch), each thread loads and stores V elements of them at
// once (16 bytes of the widest dtype: 8 f16/bf16 or 4 f32 where the widest is f32), with a scalar
// tail for the elements that do not fill a vector.
#pragma once

#include "castor/status.h"
#include "plan/elementwise_program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::cuda {

// One operand as the kernel walks it: its dtype and its element stride per dimension of the
// walk (0 where it broadcasts).
struct WalkedOperand {
  plan::DType dtype = plan::DTYPE_UNSPECIFIED;
  std::vector<int64_t> strides;
};

struct FusedKernelSpec {
  plan::ElementwiseProgram program;
  // The domain's dimensions in storage order, outermost first, and the operands' strides over
  // them (simplified: dims of one merged where every operand walks them contiguously).
  std::vector<int64_t> dims;
  std::vector<WalkedOperand> inputs, outputs;
  // Inputs that are also outputs (in-place updates; same tensor id): not marked __restrict__.
  std::vector<bool> inputAliased, outputAliased;
  // A planted fault for the GPU test of the generator: the first instruction of this op has its
  // result perturbed (+0.5 before rounding). Empty: none. Set from CASTOR_FUSED_ELEMENTWISE_FAULT.
  std::string faultOp;
};

// How a kernel with reduction outputs (fused_reduction_source.cpp) is launched. The walk is seen
// as rows of `inner` contiguous elements (the innermost walked dimension), each row one pair of
// a kept index (over the outer dims the reductions keep, `keptOuter` of them) and a reduced
// index (`reducedOuter`). innerKept (channels-last per-channel or per-sample-per-channel sums):
// a block is a tile of tileThreads x rowThreads threads, each thread holding the partial sums of
// `vector` consecutive columns over its rows in registers. Else (the inner dim reduced) a block
// of 256 threads sums one kept index's slab of rows. Launch one block per (column tile, kept
// index, slab) (innerKept) or per (kept index, slab); with one slab the block writes the
// outputs, else its partial sums (workspace: partialBytes(slabs)) that `finishEntry` adds up in
// slab order: deterministic, no atomics.
struct ReductionLaunch {
  bool innerKept = true;
  int64_t keptOuter = 1, reducedOuter = 1, inner = 1;
  int64_t outCount = 1; // elements of each reduction output
  int tileThreads = 256, rowThreads = 1;
  int64_t tiles = 1;
  int reductions = 0;
  int accBytes = 4; // of a partial sum: float, or double for f64 data
  std::string finishEntry = "castor_fused_reduce_finish";
  // The most slabs worth launching (each thread has a row at least), and the workspace of `slabs`.
  int64_t maxSlabs() const;
  size_t partialBytes(int64_t slabs) const { return slabs > 1 ? size_t(reductions * slabs * outCount * accBytes) : 0; }
};

struct FusedKernelSource {
  std::string source;
  std::string entry = "castor_fused_elementwise"; // the kernel's (extern "C") name
  int vector = 1;       // elements per thread on the vector path (1: no vector path)
  bool index64 = false; // the flat index is 64-bit (else 32-bit)
  // The operands indexed by `i` whose alignment the vector path needs: inputs first.
  std::vector<bool> inputFlat, outputFlat;
  // The kernel's op-parameter arguments after the tensor pointers, in order: the bytes of the
  // elementwise_ops.h struct of each instruction that is a unary op or its gradient, parsed
  // from its attributes (the kernel receives the struct itself).
  std::vector<std::vector<uint8_t>> opArguments;
  // Set for a program with reduction outputs: then the kernel's parameters end with
  // (void *partial, unsigned slabs, unsigned long long rowsPerSlab, int vectorized) instead of
  // (count, vectorized), and the finish kernel takes (outputs..., const void *partial, unsigned slabs).
  bool reduces = false;
  ReductionLaunch reduction;
};

// Merges adjacent dimensions that every operand walks contiguously and drops dimensions of 1.
void simplifyWalk(std::vector<int64_t> &dims, std::vector<WalkedOperand *> operands);

// The source of the kernel; refuses what it cannot write (a cast between f64 and bf16), naming
// the instruction.
Expected<FusedKernelSource> writeFusedKernel(const FusedKernelSpec &spec);

// The text of plan/elementwise_ops.h, embedded when the runtime is built (elementwise_ops_text.cpp).
extern const char *const kElementwiseOpsText;

} // namespace castor::cuda
