// Without a GPU: the CUDA source written for every program of the fused_elementwise tests
// (reduction outputs included)
// (test/common/fused_elementwise_cases.h), in f32, f16 and bf16, for the row-major and the
// channels-last walks, compiles with NVRTC for sm_89 and sm_90, and each operand's index is the
// one its broadcast needs (spot checks of the specialised expressions).
//
//   castor_fused_source_tests        exit status 0 when every source compiles and every check holds
#include "../common/fused_elementwise_cases.h"
#include "cuda/kernels/fused_elementwise_source.h"

#include <nvrtc.h>

#include <cstdio>

using namespace castor;
using namespace castor::cuda;

namespace {

std::string compile(const std::string &source, int arch) {
  nvrtcProgram p = nullptr;
  nvrtcCreateProgram(&p, source.c_str(), "fused.cu", 0, nullptr, nullptr);
  const std::string archOption = "--gpu-architecture=sm_" + std::to_string(arch);
  const char *options[] = {archOption.c_str(), "-default-device", "--std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(p, 3, options);
  size_t n = 0;
  nvrtcGetProgramLogSize(p, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  nvrtcDestroyProgram(&p);
  return r == NVRTC_SUCCESS ? "" : log.empty() ? "failed" : log;
}

// The storage strides of a tensor of shape s: row-major, or channels-last for rank 4.
std::vector<int64_t> storageStrides(const std::vector<int64_t> &s, bool channelsLast) {
  std::vector<int64_t> st(s.size());
  if (channelsLast && s.size() == 4) {
    st[1] = 1, st[3] = s[1], st[2] = s[3] * s[1], st[0] = s[2] * s[3] * s[1];
    return st;
  }
  int64_t k = 1;
  for (size_t d = s.size(); d-- > 0;)
    st[d] = k, k *= s[d];
  return st;
}

// The kernel's spec as the CUDA builder makes it (cuda/kernels/fused_elementwise.cpp).
Expected<FusedKernelSource> write(const test::FusedProgramCase &c, plan::DType t, bool channelsLast,
                                  const std::string &fault = "") {
  std::vector<plan::DType> in, out;
  for (const auto &o : c.inputs)
    in.push_back(test::dtypeOf(o.dtype, t));
  for (const auto &o : c.outputs)
    out.push_back(test::dtypeOf(o.dtype, t));
  auto program = plan::parseElementwiseProgram(test::withDtype(c.program, t), in, &out);
  if (!program)
    return program.status();
  const std::vector<int64_t> domain = test::caseDomain(c);
  const std::vector<int> order = channelsLast ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{0, 1, 2, 3};
  FusedKernelSpec spec;
  spec.program = *program;
  spec.faultOp = fault;
  for (int d : order)
    spec.dims.push_back(domain[size_t(d)]);
  auto walk = [&](const std::vector<int64_t> &shape, plan::DType dt) {
    const std::vector<int64_t> st = storageStrides(shape, channelsLast);
    std::vector<int64_t> logical(domain.size(), 0);
    for (size_t i = 0; i < shape.size(); ++i) {
      const size_t d = shape.size() - 1 - i, o = domain.size() - 1 - i;
      logical[o] = shape[d] == 1 ? 0 : st[d];
    }
    WalkedOperand w{dt, {}};
    for (int d : order)
      w.strides.push_back(logical[size_t(d)]);
    return w;
  };
  for (size_t k = 0; k < in.size(); ++k)
    spec.inputs.push_back(walk(c.inputs[k].shape, in[k]));
  for (size_t k = 0; k < out.size(); ++k)
    spec.outputs.push_back(walk(c.outputs[k].shape, out[k]));
  std::vector<WalkedOperand *> all;
  for (auto *list : {&spec.inputs, &spec.outputs})
    for (WalkedOperand &o : *list)
      all.push_back(&o);
  simplifyWalk(spec.dims, all);
  spec.inputAliased.assign(spec.inputs.size(), false);
  spec.outputAliased.assign(spec.outputs.size(), false);
  return writeFusedKernel(spec);
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

} // namespace

int main() {
  int failures = 0, total = 0;
  auto check = [&](bool ok, const std::string &what, const std::string &detail = "") {
    ++total;
    failures += !ok;
    std::printf("%s %s%s\n", ok ? "PASS" : "FAIL", what.c_str(), ok || detail.empty() ? "" : ("\n" + detail).c_str());
  };
  const auto cases = test::fusedProgramCases({3, 5, 7, 9});
  for (bool channelsLast : {false, true})
    for (const test::FusedProgramCase &c : cases)
      for (plan::DType t : {plan::F32, plan::F16, plan::BF16}) {
        const std::string name = c.name + " " + plan::dtypeName(t) + (channelsLast ? " nhwc" : " nchw");
        auto source = write(c, t, channelsLast);
        if (!source) {
          check(false, name, source.message());
          continue;
        }
        for (int arch : {89, 90}) {
          const std::string log = compile(source->source, arch);
          check(log.empty(), name + " compiles for sm_" + std::to_string(arch), log + "\n" + source->source);
        }
        check(source->vector == 16 / int(plan::dtypeSize(c.name == "cast in the middle" ? plan::F32 : t)),
              name + ": 16-byte vectors of the widest dtype");
      }
  // The index of each broadcast, specialised ([3,5,7,9]: 5 channels, 63 pixels).
  auto sourceOf = [&](const std::string &name, bool channelsLast) {
    for (const auto &c : cases)
      if (c.name == name)
        return write(c, plan::F16, channelsLast)->source;
    return std::string();
  };
  check(contains(sourceOf("se scale", false), "in1[(i / 63u)]"), "per sample and channel, row-major: i / (H W)");
  check(contains(sourceOf("se scale", true), "in1[(i / 315u) * 5u + (i % 5u)]"),
        "per sample and channel, channels-last: n C + c");
  check(contains(sourceOf("channel and scalar", false), "in1[((i / 63u) % 5u)]"), "per channel, row-major");
  check(contains(sourceOf("channel and scalar", true), "in1[(i % 5u)]"), "per channel, channels-last: i % C");
  check(contains(sourceOf("channel and scalar", true), "in2[0]"), "a scalar");
  check(contains(sourceOf("silu", true), "in0[i]"), "the domain's own layout: i");
  // Reduction outputs: one pass over the domain, partial sums finished in slab order, no atomics;
  // channels-last per-channel sums keep the channels innermost (a thread's V columns).
  for (bool channelsLast : {false, true}) {
    const std::string name = std::string("layer scale backward") + (channelsLast ? " nhwc" : " nchw");
    for (const auto &c : cases)
      if (c.name == "layer scale backward") {
        auto s = write(c, plan::F16, channelsLast);
        check(s && s->reduces && contains(s->source, "castor_fused_reduce_finish") && !contains(s->source, "atomic"),
              name + ": a reduction kernel with its deterministic finish");
        check(s && s->reduction.innerKept == channelsLast && s->vector == 8, name + ": the walk and 16-byte vectors");
      }
  }
  // The planted fault changes the source (so its CUBIN is cached apart) and names itself.
  auto faulty = write(cases[0], plan::F16, false, "sigmoid");
  check(faulty && faulty->source != sourceOf("silu", false) && contains(faulty->source, "PLANTED FAULT"),
        "a planted fault is in the source");
  check(!write(cases[0], plan::F16, false, "gelu"), "a fault in an op the program lacks is refused");
  std::printf("%s: %d check(s), %d failing\n", failures ? "FAIL" : "PASS", total, failures);
  return failures ? 1 : 0;
}
