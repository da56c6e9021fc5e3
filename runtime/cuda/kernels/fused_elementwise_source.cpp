// Writes the CUDA C++ of a fused_elementwise kernel (see fused_elementwise_source.h).
#include "cuda/kernels/fused_elementwise_source.h"
#include "cuda/kernels/fused_source_parts.h"

#include "plan/elementwise_ops.h"
#include "plan/op_attrs.h"
#include "plan/op_registry.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace castor::cuda::source {
namespace {
using plan::DType;

// What NVRTC lacks for elementwise_ops.h (no standard headers there), and the conversions and
// roundings of each dtype: f16 and bf16 are stored as their 16 bits (cuda_fp16.h is not on every
// machine that runs plans), converted as cuda_fp16.h's __half2float/__float2half_rn and
// cuda_bf16.h's __bfloat162float/__float2bfloat16_rn convert (round to nearest even).
constexpr const char *kPrelude = R"prelude(
#define INFINITY __int_as_float(0x7f800000)
typedef unsigned short castor_h16;
template <typename T, int V> struct alignas(sizeof(T) * V) castor_pack { T v[V]; };
__device__ __forceinline__ float castor_ld_f16(castor_h16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ castor_h16 castor_st_f16(float f) { castor_h16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ castor_h16 castor_st_f16(double d) { castor_h16 h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float castor_ld_bf16(castor_h16 b) { return __uint_as_float((unsigned)b << 16); }
__device__ __forceinline__ castor_h16 castor_st_bf16(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return castor_h16((u >> 16) | 0x40u); // NaN stays NaN
  return castor_h16((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float castor_ld_f32(float v) { return v; }
__device__ __forceinline__ float castor_st_f32(float v) { return v; }
__device__ __forceinline__ float castor_st_f32(double v) { return float(v); }
__device__ __forceinline__ double castor_ld_f64(double v) { return v; }
__device__ __forceinline__ double castor_st_f64(double v) { return v; }
__device__ __forceinline__ double castor_st_f64(float v) { return double(v); }
// A value rounded to a dtype and held in that dtype's accumulation type.
__device__ __forceinline__ float castor_round_f32(float v) { return v; }
__device__ __forceinline__ float castor_round_f32(double v) { return float(v); }
__device__ __forceinline__ float castor_round_f16(float v) { return castor_ld_f16(castor_st_f16(v)); }
__device__ __forceinline__ float castor_round_f16(double v) { return castor_ld_f16(castor_st_f16(v)); }
__device__ __forceinline__ float castor_round_bf16(float v) { return castor_ld_bf16(castor_st_bf16(v)); }
__device__ __forceinline__ double castor_round_f64(double v) { return v; }
__device__ __forceinline__ double castor_round_f64(float v) { return double(v); }
)prelude";

} // namespace

const char *suffix(DType t) {
  switch (t) {
  case plan::F32: return "f32";
  case plan::F16: return "f16";
  case plan::BF16: return "bf16";
  default: return "f64";
  }
}
const char *storageType(DType t) { return t == plan::F32 ? "float" : t == plan::F64 ? "double" : "castor_h16"; }
const char *accType(DType t) { return t == plan::F64 ? "double" : "float"; }
int64_t sizeOf(DType t) { return int64_t(plan::dtypeSize(t)); }

std::string valueName(const plan::ProgramValue &v) { return (v.isInput ? "a" : "t") + std::to_string(v.index); }

// The elementwise_ops.h struct of a unary op or its gradient: its C++ name and the bytes of the
// struct parsed from the instruction's attributes (null name: not such an op).
struct OpStruct {
  const char *name = nullptr;
  bool backward = false;
  std::vector<uint8_t> bytes;
};
namespace {
template <class Op> Expected<OpStruct> opStruct(const plan::Kernel &k, const char *name, bool backward) {
  auto op = plan::parseElementwise<Op>(k);
  if (!op)
    return op.status();
  static_assert(std::is_trivially_copyable_v<Op>, "an op struct is passed to the kernel by its bytes");
  OpStruct s{name, backward, std::vector<uint8_t>(sizeof(Op))};
  std::memcpy(s.bytes.data(), &*op, sizeof(Op));
  return s;
}
Expected<OpStruct> opStructOf(const plan::Kernel &k) {
  const auto op = plan::opFromName(k.op());
  if (!op)
    return OpStruct{};
  switch (*op) {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name)                                                                          \
  case plan::OpId::id:                                                                                           \
    return opStruct<elementwise::id>(k, "castor::elementwise::" #id, false);                                     \
  case plan::OpId::id##Backward:                                                                                 \
    return opStruct<elementwise::id>(k, "castor::elementwise::" #id, true);
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  default:
    return OpStruct{};
  }
}

} // namespace

bool isFlat(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides) {
  int64_t expect = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    if (dims[k] != 1 && strides[k] != expect)
      return false;
    expect *= dims[k];
  }
  return true;
}

std::string indexExpression(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides, bool index64) {
  if (isFlat(dims, strides))
    return "i";
  const char *u = index64 ? "ull" : "u";
  std::string sum;
  int64_t inner = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    if (strides[k] != 0 && dims[k] != 1) {
      std::string term = inner == 1 ? "i" : fmt::format("(i / {}{})", inner, u);
      if (k > 0) // the outermost dimension needs no modulo: i < the element count
        term = fmt::format("({} % {}{})", term, dims[k], u);
      if (strides[k] != 1)
        term = fmt::format("{} * {}{}", term, strides[k], u);
      sum = sum.empty() ? term : term + " + " + sum;
    }
    inner *= dims[k];
  }
  return sum.empty() ? "0" : sum;
}

std::string sourceHeader(const FusedKernelSpec &spec) {
  std::string src = "// Castor fused_elementwise kernel, generated from the program:\n";
  const std::string text = plan::printElementwiseProgram(spec.program);
  for (size_t from = 0, to; from < text.size(); from = to + 1) {
    to = text.find('\n', from);
    to = to == std::string::npos ? text.size() : to;
    src += "//   " + text.substr(from, to - from) + "\n";
  }
  src += "// domain walk:";
  for (int64_t d : spec.dims)
    src += " " + std::to_string(d);
  src += "\n";
  if (!spec.faultOp.empty())
    src += "// PLANTED FAULT (CASTOR_FUSED_ELEMENTWISE_FAULT): the first " + spec.faultOp + " is perturbed\n";
  return src + kPrelude + kElementwiseOpsText;
}

Expected<ProgramBody> programBody(const FusedKernelSpec &spec) {
  const plan::ElementwiseProgram &p = spec.program;
  ProgramBody out;
  std::string &body = out.body, &params = out.params;
  bool faulted = false;
  for (size_t j = 0; j < p.instructions.size(); ++j) {
    const plan::ProgramInstruction &inst = p.instructions[j];
    const std::string op = inst.kernel.op(), A = accType(inst.dtype), t = suffix(inst.dtype);
    auto operand = [&](size_t k) { return valueName(inst.operands[k]); };
    auto typeOf = [&](const plan::ProgramValue &v) {
      return v.isInput ? spec.inputs[size_t(v.index)].dtype : p.instructions[size_t(v.index)].dtype;
    };
    std::string expr;
    if (op == "add" || op == "mul") {
      expr = operand(0) + (op == "add" ? " + " : " * ") + operand(1);
    } else if (op == "cast") {
      const DType from = typeOf(inst.operands[0]);
      if ((from == plan::F64 && inst.dtype == plan::BF16) || (from == plan::BF16 && inst.dtype == plan::F64))
        return Status::error(fmt::format("instruction t{} (cast {} -> {}): a generated kernel casts between f64 and "
                                         "bf16 nowhere (no exact single rounding on every GPU)",
                                         j, suffix(from), t));
      // Through double where either side is f64, else through float (the unfused cast's rule).
      expr = fmt::format("{}({})", from == plan::F64 || inst.dtype == plan::F64 ? "double" : "float", operand(0));
    } else {
      auto s = opStructOf(inst.kernel);
      if (!s)
        return s.status().withContext(fmt::format("instruction t{} ({})", j, op));
      if (!s->name)
        return Status::error(fmt::format("instruction t{}: '{}' has no generated form", j, op));
      const std::string param = "op" + std::to_string(j);
      params += fmt::format(", const {} {}", s->name, param);
      out.opArguments.push_back(std::move(s->bytes));
      expr = s->backward ? fmt::format("{}.backward<{}>({}, {})", param, A, operand(0), operand(1))
                         : fmt::format("{}.forward<{}>({})", param, A, operand(0));
    }
    if (!faulted && op == spec.faultOp) {
      expr = fmt::format("({}) + {}(0.5)", expr, A);
      faulted = true;
    }
    body += fmt::format("      const {} t{} = castor_round_{}({});\n", A, j, t, expr);
  }
  if (!spec.faultOp.empty() && !faulted)
    return Status::error("CASTOR_FUSED_ELEMENTWISE_FAULT names '" + spec.faultOp + "', which the program lacks");

  return out;
}

} // namespace castor::cuda::source

namespace castor::cuda {
using namespace source;

void simplifyWalk(std::vector<int64_t> &dims, std::vector<WalkedOperand *> operands) {
  std::vector<int64_t> d;
  std::vector<std::vector<int64_t>> s(operands.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1)
      continue;
    bool merge = !d.empty();
    for (size_t o = 0; o < operands.size() && merge; ++o)
      merge = s[o].back() == operands[o]->strides[k] * dims[k];
    if (merge) {
      d.back() *= dims[k];
      for (size_t o = 0; o < operands.size(); ++o)
        s[o].back() = operands[o]->strides[k];
      continue;
    }
    d.push_back(dims[k]);
    for (size_t o = 0; o < operands.size(); ++o)
      s[o].push_back(operands[o]->strides[k]);
  }
  dims = d;
  for (size_t o = 0; o < operands.size(); ++o)
    operands[o]->strides = s[o];
}

Expected<FusedKernelSource> writeFusedKernel(const FusedKernelSpec &spec) {
  if (spec.program.reduces())
    return writeReductionKernel(spec);
  FusedKernelSource out;
  const plan::ElementwiseProgram &p = spec.program;
  int64_t count = 1;
  for (int64_t d : spec.dims)
    count *= d;
  out.index64 = count >= int64_t(std::numeric_limits<int32_t>::max());
  const char *I = out.index64 ? "unsigned long long" : "unsigned int";

  // The vector width: 16 bytes of the widest dtype among the operands indexed by i.
  int64_t widest = 0;
  for (auto [operands, flat] : {std::pair(&spec.inputs, &out.inputFlat), std::pair(&spec.outputs, &out.outputFlat)})
    for (const WalkedOperand &o : *operands) {
      flat->push_back(isFlat(spec.dims, o.strides));
      if (flat->back())
        widest = std::max(widest, sizeOf(o.dtype));
    }
  // An output written through strides (another storage order than the domain's) has no vector path.
  const bool allOutputsFlat = std::all_of(out.outputFlat.begin(), out.outputFlat.end(), [](bool b) { return b; });
  out.vector = allOutputsFlat && widest > 0 ? int(16 / widest) : 1;

  const std::string src = sourceHeader(spec);
  auto program = programBody(spec);
  if (!program)
    return program.status();
  const std::string &body = program->body, &params = program->params;
  out.opArguments = std::move(program->opArguments);

  // The signature: inputs, outputs, the op structs, the element count, the vector switch.
  std::string signature = "extern \"C\" __global__ void __launch_bounds__(256) castor_fused_elementwise(";
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    signature += fmt::format("{}const {} *{}in{}", k ? ", " : "", storageType(spec.inputs[k].dtype),
                             spec.inputAliased[k] ? "" : "__restrict__ ", k);
  for (size_t k = 0; k < spec.outputs.size(); ++k)
    signature += fmt::format("{}{} *{}out{}", spec.inputs.empty() && k == 0 ? "" : ", ",
                             storageType(spec.outputs[k].dtype), spec.outputAliased[k] ? "" : "__restrict__ ", k);
  signature += params + ", const unsigned long long count, const int vectorized)";

  // Loads of the inputs at i (scalar) or from the packs (vector path), and the outputs' stores.
  auto loads = [&](bool vec) {
    std::string s;
    for (size_t k = 0; k < spec.inputs.size(); ++k) {
      const WalkedOperand &o = spec.inputs[k];
      const std::string at = vec && out.inputFlat[k] ? fmt::format("p{}.v[e]", k)
                                                     : fmt::format("in{}[{}]", k,
                                                                   indexExpression(spec.dims, o.strides, out.index64));
      s += fmt::format("      const {} a{} = castor_ld_{}({});\n", accType(o.dtype), k, suffix(o.dtype), at);
    }
    return s;
  };
  auto stores = [&](bool vec) {
    std::string s;
    for (size_t k = 0; k < spec.outputs.size(); ++k) {
      const WalkedOperand &o = spec.outputs[k];
      const std::string value = valueName(p.outputs[k]);
      if (vec)
        s += fmt::format("      q{}.v[e] = castor_st_{}({});\n", k, suffix(o.dtype), value);
      else
        s += fmt::format("      out{}[{}] = castor_st_{}({});\n", k, indexExpression(spec.dims, o.strides, out.index64),
                         suffix(o.dtype), value);
    }
    return s;
  };

  std::string kernel = signature + " {\n";
  kernel += fmt::format("  typedef {} I;\n  const I n = I(count);\n", I);
  kernel += "  const I first = I(blockIdx.x) * blockDim.x + threadIdx.x, stride = I(blockDim.x) * gridDim.x;\n";
  kernel += "  I start = 0;\n";
  if (out.vector > 1) {
    const int V = out.vector;
    kernel += fmt::format("  if (vectorized) {{\n    const I nv = n / {};\n    for (I v = first; v < nv; v += stride) {{\n", V);
    for (size_t k = 0; k < spec.inputs.size(); ++k)
      if (out.inputFlat[k])
        kernel += fmt::format("      const castor_pack<{0}, {1}> p{2} = reinterpret_cast<const castor_pack<{0}, {1}> *>(in{2})[v];\n",
                              storageType(spec.inputs[k].dtype), V, k);
    for (size_t k = 0; k < spec.outputs.size(); ++k)
      kernel += fmt::format("      castor_pack<{}, {}> q{};\n", storageType(spec.outputs[k].dtype), V, k);
    kernel += fmt::format("#pragma unroll\n      for (int e = 0; e < {}; ++e) {{\n      const I i = v * {} + I(e);\n", V, V);
    kernel += "      (void)i;\n" + loads(true) + body + stores(true) + "      }\n";
    for (size_t k = 0; k < spec.outputs.size(); ++k)
      kernel += fmt::format("      reinterpret_cast<castor_pack<{0}, {1}> *>(out{2})[v] = q{2};\n",
                            storageType(spec.outputs[k].dtype), V, k);
    kernel += fmt::format("    }}\n    start = nv * {};\n  }}\n", V);
  }
  kernel += "  for (I i = start + first; i < n; i += stride) {\n" + loads(false) + body + stores(false) + "  }\n}\n";
  out.source = src + "\n" + kernel;
  return out;
}

} // namespace castor::cuda
