// Writes the CUDA C++ of a fused_elementwise kernel whose program has reduction outputs
// (ReductionLaunch in fused_elementwise_source.h): the element-wise part and the sums in one
// pass over the domain, the partial sums in registers, combined in shared memory in a fixed
// order, then per block either the outputs (one slab) or partial sums that a second, tiny kernel
// adds in slab order. Accumulation in f32 (f64 where a reduced value is f64); each output rounded
// once to its dtype, after the scale (sum) or the division by the count (mean).
#include "cuda/kernels/fused_source_parts.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <limits>

namespace castor::cuda {

int64_t ReductionLaunch::maxSlabs() const {
  if (innerKept)
    return std::max<int64_t>(1, (reducedOuter + rowThreads - 1) / rowThreads);
  const int64_t perRow = (inner + 255) / 256;
  return std::max<int64_t>(1, std::min<int64_t>(reducedOuter, (reducedOuter * perRow + 255) / 256 * 4));
}

namespace source {
namespace {

// `var` unravelled over the walk dims `which` (outermost first): each dim's index expression.
std::vector<std::pair<size_t, std::string>> unravel(const std::string &var, const std::vector<size_t> &which,
                                                    const std::vector<int64_t> &dims, const char *u) {
  std::vector<std::pair<size_t, std::string>> out;
  int64_t inner = 1;
  for (size_t k = which.size(); k-- > 0;) {
    std::string e = inner == 1 ? var : fmt::format("({} / {}{})", var, inner, u);
    if (k > 0)
      e = fmt::format("({} % {}{})", e, dims[which[k]], u);
    out.push_back({which[k], e});
    inner *= dims[which[k]];
  }
  return out;
}

// sum of index * stride terms, "0" when none.
std::string linear(const std::vector<std::pair<size_t, std::string>> &indices, const std::vector<int64_t> &strides,
                   const char *u) {
  std::string sum;
  for (const auto &[d, e] : indices)
    if (strides[d] != 0)
      sum += (sum.empty() ? "" : " + ") + (strides[d] == 1 ? e : fmt::format("{} * {}{}", e, strides[d], u));
  return sum.empty() ? "0" : sum;
}

} // namespace

Expected<FusedKernelSource> writeReductionKernel(const FusedKernelSpec &spec) {
  const plan::ElementwiseProgram &p = spec.program;
  FusedKernelSource out;
  out.reduces = true;
  ReductionLaunch &r = out.reduction;
  const size_t m = spec.dims.size();
  std::vector<size_t> reductions;
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (p.reduction(k).kind != plan::ReduceKind::None)
      reductions.push_back(k);
  if (m == 0 || reductions.empty())
    return Status::error("a reduction kernel needs a domain and a reduction output");
  r.reductions = int(reductions.size());
  // Kept dims: where the reduction outputs have a stride (every reduction reduces the same axes).
  auto kept = [&](size_t d) { return spec.outputs[reductions[0]].strides[d] != 0; };
  for (size_t k : reductions)
    for (size_t d = 0; d < m; ++d)
      if ((spec.outputs[k].strides[d] != 0) != kept(d))
        return Status::error("the reductions of a generated kernel keep one set of dimensions");
  r.innerKept = kept(m - 1);
  r.inner = spec.dims[m - 1];
  std::vector<size_t> keptOuter, reducedOuter;
  for (size_t d = 0; d + 1 < m; ++d) {
    (kept(d) ? keptOuter : reducedOuter).push_back(d);
    (kept(d) ? r.keptOuter : r.reducedOuter) *= spec.dims[d];
  }
  r.outCount = r.keptOuter * (r.innerKept ? r.inner : 1);
  const int64_t terms = r.reducedOuter * (r.innerKept ? 1 : r.inner);
  int64_t count = 1;
  for (int64_t d : spec.dims)
    count *= d;
  out.index64 = count >= int64_t(std::numeric_limits<int32_t>::max());
  const char *I = out.index64 ? "unsigned long long" : "unsigned int";
  const char *u = out.index64 ? "ull" : "u";

  // Vector loads and stores of the operands indexed by i (reduction outputs are not).
  int64_t widest = 0;
  bool elementwiseFlat = true;
  for (const WalkedOperand &o : spec.inputs) {
    out.inputFlat.push_back(isFlat(spec.dims, o.strides));
    if (out.inputFlat.back())
      widest = std::max(widest, sizeOf(o.dtype));
  }
  bool f64 = false;
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    const bool reduced = p.reduction(k).kind != plan::ReduceKind::None;
    out.outputFlat.push_back(!reduced && isFlat(spec.dims, spec.outputs[k].strides));
    if (out.outputFlat.back())
      widest = std::max(widest, sizeOf(spec.outputs[k].dtype));
    elementwiseFlat = elementwiseFlat && (reduced || out.outputFlat.back());
    f64 = f64 || spec.outputs[k].dtype == plan::F64;
  }
  const char *acc = f64 ? "double" : "float";
  r.accBytes = f64 ? 8 : 4;
  int V = elementwiseFlat && widest > 0 ? int(16 / widest) : 1;
  // The block's partial sums in shared memory stay within 48 KiB.
  while (V > 1 && r.reductions * 256 * V * r.accBytes > 48 * 1024)
    V /= 2;
  out.vector = V;
  const int perThread = r.innerKept ? V : 1;
  if (r.innerKept) {
    const int64_t columns = (r.inner + V - 1) / V;
    int tx = 1;
    while (tx < columns && tx < 256)
      tx *= 2;
    r.tileThreads = tx;
    r.rowThreads = 256 / tx;
    r.tiles = (columns + tx - 1) / tx;
  }

  auto program = programBody(spec);
  if (!program)
    return program.status();
  out.opArguments = std::move(program->opArguments);

  // Row of (ko, ro); each reduction output's element of (ko, l).
  std::vector<std::pair<size_t, std::string>> rowIndices = unravel("ko", keptOuter, spec.dims, u);
  for (auto &e : unravel("ro", reducedOuter, spec.dims, u))
    rowIndices.push_back(e);
  std::vector<int64_t> rowStrides(m, 0);
  for (size_t d = m - 1, stride = 1; d-- > 0;)
    rowStrides[d] = int64_t(stride), stride *= size_t(spec.dims[d]);
  const std::string rowExpr = linear(rowIndices, rowStrides, u);
  auto offsetOf = [&](size_t k) {
    auto indices = unravel("ko", keptOuter, spec.dims, u);
    if (r.innerKept)
      indices.push_back({m - 1, "l"});
    return linear(indices, spec.outputs[k].strides, u);
  };
  auto finish = [&](size_t k) {
    const plan::ProgramReduction &red = p.reduction(k);
    if (red.kind == plan::ReduceKind::Mean)
      return fmt::format("s / {}({})", acc, terms);
    return red.scale == 1.0 ? std::string("s") : fmt::format("s * {}({:.17g})", acc, red.scale);
  };

  // The element at i: loads, the program, the element-wise stores, the sums.
  auto element = [&](bool vec, const std::string &slot) {
    std::string s;
    for (size_t k = 0; k < spec.inputs.size(); ++k) {
      const WalkedOperand &o = spec.inputs[k];
      const std::string at = vec && out.inputFlat[k]
                                 ? fmt::format("p{}.v[e]", k)
                                 : fmt::format("in{}[{}]", k, indexExpression(spec.dims, o.strides, out.index64));
      s += fmt::format("        const {} a{} = castor_ld_{}({});\n", accType(o.dtype), k, suffix(o.dtype), at);
    }
    s += program->body;
    for (size_t k = 0; k < spec.outputs.size(); ++k) {
      const WalkedOperand &o = spec.outputs[k];
      const std::string value = valueName(p.outputs[k]);
      if (p.reduction(k).kind != plan::ReduceKind::None)
        s += fmt::format("        r{}{} += {}({});\n", k, slot, acc, value);
      else if (vec)
        s += fmt::format("        q{}.v[e] = castor_st_{}({});\n", k, suffix(o.dtype), value);
      else
        s += fmt::format("        out{}[{}] = castor_st_{}({});\n", k,
                         indexExpression(spec.dims, o.strides, out.index64), suffix(o.dtype), value);
    }
    return s;
  };
  auto packs = [&](bool load) {
    std::string s;
    if (load) {
      for (size_t k = 0; k < spec.inputs.size(); ++k)
        if (out.inputFlat[k])
          s += fmt::format("      const castor_pack<{0}, {1}> p{2} = reinterpret_cast<const castor_pack<{0}, {1}> *>(in{2})[v];\n",
                           storageType(spec.inputs[k].dtype), V, k);
      for (size_t k = 0; k < spec.outputs.size(); ++k)
        if (out.outputFlat[k])
          s += fmt::format("      castor_pack<{}, {}> q{};\n", storageType(spec.outputs[k].dtype), V, k);
    } else {
      for (size_t k = 0; k < spec.outputs.size(); ++k)
        if (out.outputFlat[k])
          s += fmt::format("      reinterpret_cast<castor_pack<{0}, {1}> *>(out{2})[v] = q{2};\n",
                           storageType(spec.outputs[k].dtype), V, k);
    }
    return s;
  };
  // One thread's V columns (innerKept: slot [e]) or V elements of a row (slot: none), at
  // row * L + l0: vector path when `vectorized` (L % V == 0 and aligned), else guarded scalars.
  auto run = [&](const std::string &slot) {
    std::string s = "      if (vectorized) {\n";
    s += fmt::format("      const I v = (row * {0}{1} + l0) / {2}{1};\n", r.inner, u, V);
    s += packs(true);
    s += fmt::format("#pragma unroll\n      for (int e = 0; e < {}; ++e) {{\n        const I i = v * {}{} + I(e);\n", V, V, u);
    s += "        (void)i;\n" + element(true, slot) + "      }\n" + packs(false) + "      } else {\n";
    s += fmt::format("#pragma unroll\n      for (int e = 0; e < {}; ++e) {{\n", V);
    s += fmt::format("        if (l0 + I(e) >= {}{}) continue;\n", r.inner, u);
    s += fmt::format("        const I i = row * {}{} + l0 + I(e);\n", r.inner, u);
    s += element(false, slot) + "      }\n      }\n";
    return s;
  };

  std::string outs, params = program->params;
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    outs += fmt::format("{}const {} *{}in{}", k ? ", " : "", storageType(spec.inputs[k].dtype),
                        spec.inputAliased[k] ? "" : "__restrict__ ", k);
  std::string outputList;
  for (size_t k = 0; k < spec.outputs.size(); ++k)
    outputList += fmt::format("{}{} *{}out{}", k ? ", " : "", storageType(spec.outputs[k].dtype),
                              spec.outputAliased[k] ? "" : "__restrict__ ", k);
  std::string kernel = "extern \"C\" __global__ void __launch_bounds__(256) castor_fused_elementwise(" + outs +
                       (outs.empty() ? "" : ", ") + outputList + params +
                       ", void *partialBytes, const unsigned slabs, const unsigned long long rowsPerSlab, "
                       "const int vectorized) {\n";
  kernel += fmt::format("  typedef {} I;\n  typedef {} A;\n", I, acc);
  kernel += "  A *partial = static_cast<A *>(partialBytes);\n";
  kernel += fmt::format("  __shared__ A sh[{}][{}];\n", r.reductions, 256 * perThread);
  for (size_t k : reductions)
    kernel += r.innerKept ? fmt::format("  A r{}[{}];\n#pragma unroll\n  for (int e = 0; e < {}; ++e) r{}[e] = 0;\n", k, V, V, k)
                          : fmt::format("  A r{} = 0;\n", k);
  // The block's sums (`sum(j)`: the expression of reduction j) to the outputs (one slab) or to
  // its partial sums at element `o` of the reduced shape.
  auto emit = [&](const std::function<std::string(size_t)> &sum, const std::string &o) {
    std::string text;
    for (size_t j = 0; j < reductions.size(); ++j) {
      const size_t k = reductions[j];
      text += "      {\n        const A s = " + sum(j) + ";\n";
      text += fmt::format("        if (slabs == 1u) out{}[{}] = castor_st_{}({}({}));\n", k, offsetOf(k),
                          suffix(spec.outputs[k].dtype), accType(spec.outputs[k].dtype), finish(k));
      text += fmt::format("        else partial[(I({}) * slabs + slab) * {}{} + {}] = s;\n      }}\n", j, r.outCount, u, o);
    }
    return text;
  };
  if (r.innerKept) {
    kernel += fmt::format("  const unsigned tx = threadIdx.x % {0}u, ty = threadIdx.x / {0}u;\n", r.tileThreads);
    kernel += fmt::format("  unsigned b = blockIdx.x;\n  const unsigned tile = b % {0}u;\n  b /= {0}u;\n", r.tiles);
    kernel += "  const unsigned slab = b % slabs;\n  const I ko = I(b / slabs);\n";
    kernel += fmt::format("  const I l0 = (I(tile) * {}{} + tx) * {}{};\n", r.tileThreads, u, V, u);
    kernel += fmt::format("  const I rStop = I(slab + 1u) * I(rowsPerSlab), rEnd = rStop < I({0}{1}) ? rStop : I({0}{1});\n", r.reducedOuter, u);
    kernel += fmt::format("  if (l0 < {}{})\n", r.inner, u);
    kernel += fmt::format("    for (I ro = I(slab) * I(rowsPerSlab) + ty; ro < rEnd; ro += {}{}) {{\n", r.rowThreads, u);
    kernel += "      const I row = " + rowExpr + ";\n" + run("[e]") + "    }\n";
    for (size_t j = 0; j < reductions.size(); ++j)
      kernel += fmt::format("#pragma unroll\n  for (int e = 0; e < {0}; ++e) sh[{1}][threadIdx.x * {0} + e] = r{2}[e];\n", V,
                            j, reductions[j]);
    kernel += "  __syncthreads();\n  if (ty != 0u) return;\n";
    kernel += fmt::format("  for (int e = 0; e < {}; ++e) {{\n    const I l = l0 + I(e);\n    if (l >= {}{}) break;\n", V,
                          r.inner, u);
    kernel += "    A sum[" + std::to_string(r.reductions) + "];\n";
    kernel += fmt::format("    for (int k = 0; k < {}; ++k) {{\n      sum[k] = 0;\n", r.reductions);
    kernel += fmt::format("      for (unsigned y = 0; y < {}u; ++y) sum[k] += sh[k][(y * {}u + tx) * {} + e];\n    }}\n",
                          r.rowThreads, r.tileThreads, V);
    kernel += emit([](size_t j) { return "sum[" + std::to_string(j) + "]"; }, fmt::format("ko * {}{} + l", r.inner, u));
    kernel += "  }\n}\n";
  } else {
    kernel += "  const unsigned slab = blockIdx.x % slabs;\n  const I ko = I(blockIdx.x / slabs);\n";
    kernel += fmt::format("  const I rBegin = I(slab) * I(rowsPerSlab), rStop = rBegin + I(rowsPerSlab), rEnd = rStop < I({0}{1}) ? rStop : I({0}{1});\n",
                          r.reducedOuter, u);
    const int64_t lv = (r.inner + V - 1) / V;
    kernel += fmt::format("  const I items = rEnd > rBegin ? (rEnd - rBegin) * {}{} : 0;\n", lv, u);
    kernel += "  for (I j = threadIdx.x; j < items; j += 256u) {\n";
    kernel += fmt::format("    const I ro = rBegin + j / {0}{1}, l0 = (j % {0}{1}) * {2}{1};\n", lv, u, V);
    kernel += "    {\n      const I row = " + rowExpr + ";\n" + run("") + "    }\n  }\n";
    for (size_t j = 0; j < reductions.size(); ++j)
      kernel += fmt::format("  sh[{}][threadIdx.x] = r{};\n", j, reductions[j]);
    kernel += "  __syncthreads();\n";
    kernel += "  for (unsigned w = 128u; w > 0u; w >>= 1) {\n    if (threadIdx.x < w)\n";
    kernel += fmt::format("      for (int k = 0; k < {}; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + w];\n", r.reductions);
    kernel += "    __syncthreads();\n  }\n  if (threadIdx.x != 0u) return;\n  {\n    const I l = 0; (void)l;\n";
    kernel += emit([](size_t j) { return "sh[" + std::to_string(j) + "][0]"; }, "ko");
    kernel += "  }\n}\n";
  }

  // The partial sums of every slab, added in slab order.
  std::string fin = "extern \"C\" __global__ void __launch_bounds__(256) castor_fused_reduce_finish(" + outputList +
                    ", const void *partialBytes, const unsigned slabs) {\n";
  fin += fmt::format("  typedef {} I;\n  typedef {} A;\n", I, acc);
  fin += "  const A *partial = static_cast<const A *>(partialBytes);\n";
  fin += fmt::format("  for (I o = I(blockIdx.x) * blockDim.x + threadIdx.x; o < {}{}; o += I(blockDim.x) * gridDim.x) {{\n",
                     r.outCount, u);
  fin += r.innerKept ? fmt::format("    const I ko = o / {0}{1}, l = o % {0}{1};\n", r.inner, u)
                     : "    const I ko = o;\n";
  for (size_t j = 0; j < reductions.size(); ++j) {
    const size_t k = reductions[j];
    fin += "    {\n      A s = 0;\n";
    fin += fmt::format("      for (unsigned q = 0; q < slabs; ++q) s += partial[(I({}) * slabs + q) * {}{} + o];\n", j,
                       r.outCount, u);
    fin += fmt::format("      out{}[{}] = castor_st_{}({}({}));\n    }}\n", k, offsetOf(k), suffix(spec.outputs[k].dtype),
                       accType(spec.outputs[k].dtype), finish(k));
  }
  fin += "  }\n}\n";

  out.source = sourceHeader(spec) + "\n" + kernel + "\n" + fin;
  return out;
}

} // namespace source
} // namespace castor::cuda
