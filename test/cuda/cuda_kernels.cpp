// GPU test: single-kernel plans (built here, no compiler needed) on the CPU reference and on the
// CUDA backend, with CASTOR_CUDA_LAYOUT=nchw and =nhwc: pooling, global average pooling,
// broadcast add/mul, reduce_sum_to (every path: per-channel columns and rows, the general
// reduction, a full sum), conv2d_backward_bias, dropout (same mask as the reference), softmax,
// reshapes across layouts, concat/split, casts, the own batch-norm kernels (dtype combinations
// cuDNN does not take), cuDNN's batch norm (training forward with its backward, and inference,
// of f16, bf16 and f32 data with f32 statistics, each run with CASTOR_BN_API=ex, =graph and
// unset: the Ex API, the graph API and the tuner's choice), the fused batch-norm-ReLU forward
// and backward with and without the residual and as ReLU6 (clip_max; the tuner's choice and each way forced: cuDNN's
// fused kernel, Castor's own fused kernels, the composed group; with the residual the own forward
// records the ReLU's mask for the backward), a convolution with its fused batch-norm-ReLU or plain
// batch norm (each way, the statistics from the convolution's epilogue among them), the
// loss, gemm and matmul (cuBLASLt: transposes, the bias epilogue, C of Y's shape, broadcast C;
// strided, shared-B and broadcast batches, whose matrices are not 16-byte aligned; f32, f16,
// bf16, some f64), cuDNN's fused attention forward and backward (f16, bf16). The generated
// fused_elementwise kernels (NVRTC at load) over the programs of test/common/fused_elementwise_cases.h,
// and a planted fault in one generated op (CASTOR_FUSED_ELEMENTWISE_FAULT) that must fail. Each backend runs
// the plan twice (the CUDA backend's second run is captured as a CUDA graph). Every output within
// a norm-wise relative error of 1e-4 (fp32) or 1e-2 (plans with f16/bf16 tensors), unless a case
// says otherwise (bf16 attention: 2e-2).
//
//   castor_cuda_kernel_tests            exit status 0 when every case agrees in both layouts
//   castor_cuda_kernel_tests TEXT       only the cases whose name contains TEXT

#include "../common/fused_elementwise_cases.h"
#include "../common/plan_builder.h"
#include "castor/backend.h"
#include "data/encoded_batch.h"
#include "data/image_augment.h"
#include "data/image_decode.h"

#include <turbojpeg.h>

#include <dirent.h>
#include "castor/cuda_backend.h"
#include "plan/plan.h"
#include "plan/plan_validator.h"
#include "weights/init.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace castor;

namespace {

plan::Attr ints(std::vector<int64_t> v) {
  plan::Attr a;
  for (int64_t x : v)
    a.mutable_ints()->add_values(x);
  return a;
}
plan::Attr flt(double v) {
  plan::Attr a;
  a.mutable_floats()->add_values(v);
  return a;
}
plan::Attr str(const std::string &v) {
  plan::Attr a;
  a.set_s(v);
  return a;
}

struct Case : test::PlanBuilder {
  std::string name;
  bool perBnApi = false; // run once per CASTOR_BN_API value (cuDNN batch norm)
  bool perFusedBn = false; // run with CASTOR_FUSED_BN unset and =fused, =own, =conv-stats, =composed
  double tolerance = 0;    // the norm-wise relative error allowed; 0: the plan's precision's default
  std::map<uint32_t, std::vector<double>> inputs; // given values (else random normal)
  std::vector<uint32_t> outputs;

  explicit Case(std::string n) : name(std::move(n)) { plan.set_producer("castor-cuda-kernel-tests"); }
  uint32_t in(const std::string &n, std::vector<int64_t> shape, plan::DType dt = plan::F32) {
    return tensor(n, std::move(shape), plan::Tensor::INPUT, dt);
  }
  uint32_t out(const std::string &n, std::vector<int64_t> shape, plan::DType dt = plan::F32) {
    const uint32_t id = tensor(n, std::move(shape), plan::Tensor::OUTPUT, dt);
    outputs.push_back(id);
    return id;
  }
};

// The fused batch-norm-ReLU forward and backward over x (data dt, per-channel tensors pt) as a
// training step has them (the backward reads the forward's y and statistics), with the residual z
// when `residual` and ReLU6's clip at 1 when `clip`. Returns the ids of scale, bias and z (0
// without).
struct BatchNormInputs {
  uint32_t scale, bias, z;
};
BatchNormInputs addBatchNormReluPair(Case &c, uint32_t x, const std::vector<int64_t> &xs, plan::DType dt, plan::DType pt,
                              bool residual, bool clip) {
  const int64_t C = xs[1];
  std::map<std::string, plan::Attr> eps = {{"epsilon", flt(1e-3)}};
  if (clip)
    eps["clip_max"] = flt(1.0);
  const uint32_t scale = c.in("scale", {C}, pt), bias = c.in("bias", {C}, pt);
  const uint32_t y = c.out("y", xs, dt), mean = c.out("mean", {C}, pt), invStd = c.out("inv_std", {C}, pt);
  std::vector<uint32_t> fwdIn = {x, scale, bias},
                        bwdOut = {c.out("dx", xs, dt), c.out("dscale", {C}, pt), c.out("dbias", {C}, pt)};
  uint32_t z = 0;
  if (residual) {
    z = c.in("z", xs, dt);
    fwdIn.push_back(z);
    bwdOut.push_back(c.out("dz", xs, dt));
  }
  c.kernel("batch_norm_relu_training", fwdIn, {y, mean, invStd}, eps);
  c.kernel("batch_norm_relu_training_backward", {c.in("dy", xs, dt), x, y, scale, bias, mean, invStd}, bwdOut, eps);
  return {scale, bias, z};
}

std::vector<Case> cases() {
  using plan::F16;
  using plan::F32;
  using plan::I64;
  std::vector<Case> all;
  auto add = [&](const std::string &name, const std::function<void(Case &)> &f) {
    all.emplace_back(name);
    f(all.back());
  };
  const std::map<std::string, plan::Attr> pool = {
      {"kernel", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  add("max_pool2d", [&](Case &c) {
    c.kernel("max_pool2d", {c.in("x", {2, 5, 9, 11})}, {c.out("y", {2, 5, 5, 6})}, pool);
  });
  add("max_pool2d f16", [&](Case &c) {
    c.kernel("max_pool2d", {c.in("x", {2, 5, 9, 11}, F16)}, {c.out("y", {2, 5, 5, 6}, F16)}, pool);
  });
  add("max_pool2d_backward", [&](Case &c) {
    c.kernel("max_pool2d_backward", {c.in("dy", {2, 5, 5, 6}), c.in("x", {2, 5, 9, 11})}, {c.out("dx", {2, 5, 9, 11})},
             pool);
  });
  // Ties (a few distinct values, so windows hold several maxima: the first in window order wins),
  // f16, and ResNet's stem pool shape at a small size.
  add("max_pool2d_backward f16 ties", [&](Case &c) {
    const uint32_t x = c.in("x", {2, 6, 9, 11}, F16);
    c.kernel("max_pool2d_backward", {c.in("dy", {2, 6, 5, 6}, F16), x}, {c.out("dx", {2, 6, 9, 11}, F16)}, pool);
    std::vector<double> v(2 * 6 * 9 * 11);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = double((i * 7919) % 3);
    c.inputs[x] = v;
  });
  // Channel counts that are a multiple of 16 bytes: in the nhwc layout these run the vector kernels.
  for (plan::DType dt : {F16, plan::BF16, F32}) {
    const std::string suffix = dt == F16 ? " f16 C16" : dt == F32 ? " f32 C16" : " bf16 C16";
    add("max_pool2d" + suffix, [&, dt](Case &c) {
      c.kernel("max_pool2d", {c.in("x", {2, 16, 9, 11}, dt)}, {c.out("y", {2, 16, 5, 6}, dt)}, pool);
    });
    add("max_pool2d_backward ties" + suffix, [&, dt](Case &c) {
      const uint32_t x = c.in("x", {2, 16, 9, 11}, dt);
      c.kernel("max_pool2d_backward", {c.in("dy", {2, 16, 5, 6}, dt), x}, {c.out("dx", {2, 16, 9, 11}, dt)}, pool);
      std::vector<double> v(2 * 16 * 9 * 11);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = double((i * 7919) % 3);
      c.inputs[x] = v;
    });
  }
  // A training step's pair in one plan: the forward records its winning taps and the backward only
  // gathers from them (cuda/kernels/pooling.cpp). Ties, so that which maximum wins matters; C 16
  // runs the vector kernels in the nhwc layout, C 5 the scalar ones; a dilated window.
  for (plan::DType dt : {F16, plan::BF16, F32})
    for (int64_t C : {16, 5}) {
      const std::string suffix = std::string(" ") + plan::dtypeName(dt) + " C" + std::to_string(C);
      add("max_pool2d with its backward, ties" + suffix, [&, dt, C](Case &c) {
        const uint32_t x = c.in("x", {2, C, 9, 11}, dt);
        c.kernel("max_pool2d", {x}, {c.out("y", {2, C, 5, 6}, dt)}, pool);
        c.kernel("max_pool2d_backward", {c.in("dy", {2, C, 5, 6}, dt), x}, {c.out("dx", {2, C, 9, 11}, dt)}, pool);
        std::vector<double> v(size_t(2 * C * 9 * 11));
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = double((i * 7919) % 3);
        c.inputs[x] = v;
      });
    }
  add("max_pool2d with its backward, dilated 2x2 f16 C16", [&](Case &c) {
    const std::map<std::string, plan::Attr> dilated = {
        {"kernel", ints({2, 2})}, {"strides", ints({2, 2})}, {"dilations", ints({2, 2})}};
    const uint32_t x = c.in("x", {2, 16, 9, 9}, F16);
    c.kernel("max_pool2d", {x}, {c.out("y", {2, 16, 4, 4}, F16)}, dilated);
    c.kernel("max_pool2d_backward", {c.in("dy", {2, 16, 4, 4}, F16), x}, {c.out("dx", {2, 16, 9, 9}, F16)}, dilated);
  });
  add("max_pool2d_backward dilated 2x2 f16 C16", [&](Case &c) {
    c.kernel("max_pool2d_backward", {c.in("dy", {2, 16, 4, 4}, F16), c.in("x", {2, 16, 9, 9}, F16)},
             {c.out("dx", {2, 16, 9, 9}, F16)},
             {{"kernel", ints({2, 2})}, {"strides", ints({2, 2})}, {"dilations", ints({2, 2})}});
  });
  add("max_pool2d_backward dilated 2x2", [&](Case &c) {
    c.kernel("max_pool2d_backward", {c.in("dy", {2, 3, 4, 4}), c.in("x", {2, 3, 9, 9})}, {c.out("dx", {2, 3, 9, 9})},
             {{"kernel", ints({2, 2})}, {"strides", ints({2, 2})}, {"dilations", ints({2, 2})}});
  });
  add("avg_pool2d", [&](Case &c) {
    c.kernel("avg_pool2d", {c.in("x", {2, 5, 9, 11})}, {c.out("y", {2, 5, 5, 6})}, pool);
  });
  add("avg_pool2d_backward", [&](Case &c) {
    auto attrs = pool;
    attrs["count_include_pad"] = ints({1});
    c.kernel("avg_pool2d_backward", {c.in("dy", {2, 5, 5, 6})}, {c.out("dx", {2, 5, 9, 11})}, attrs);
  });
  add("global_avg_pool", [&](Case &c) {
    c.kernel("global_avg_pool", {c.in("x", {3, 6, 4, 5})}, {c.out("y", {3, 6, 1, 1})});
  });
  add("global_avg_pool_backward", [&](Case &c) {
    c.kernel("global_avg_pool_backward", {c.in("dy", {3, 6, 1, 1})}, {c.out("dx", {3, 6, 4, 5})});
  });
  add("add [2,6,4,5]+[6,1,1]", [&](Case &c) {
    c.kernel("add", {c.in("a", {2, 6, 4, 5}), c.in("b", {6, 1, 1})}, {c.out("y", {2, 6, 4, 5})});
  });
  add("add [2,6,4,5]+[1,6,1,5]", [&](Case &c) {
    c.kernel("add", {c.in("a", {2, 6, 4, 5}), c.in("b", {1, 6, 1, 5})}, {c.out("y", {2, 6, 4, 5})});
  });
  add("mul [5]*[2,6,4,5] f16", [&](Case &c) {
    c.kernel("mul", {c.in("a", {5}, F16), c.in("b", {2, 6, 4, 5}, F16)}, {c.out("y", {2, 6, 4, 5}, F16)});
  });
  add("add same shape", [&](Case &c) {
    c.kernel("add", {c.in("a", {2, 6, 4, 5}), c.in("b", {2, 6, 4, 5})}, {c.out("y", {2, 6, 4, 5})});
  });
  for (auto ys : std::vector<std::vector<int64_t>>{{6, 1, 1}, {1, 6, 1, 1}, {4, 5}, {6, 4, 5}, {}, {2, 1, 1, 5}, {2, 6, 1, 1}}) {
    std::string n = "reduce_sum_to [";
    for (size_t i = 0; i < ys.size(); ++i)
      n += (i ? "," : "") + std::to_string(ys[i]);
    add(n + "]", [&](Case &c) {
      c.kernel("reduce_sum_to", {c.in("x", {2, 6, 4, 5})}, {c.out("y", ys)}, {{"scale", flt(0.5)}});
    });
  }
  add("reduce_sum_to [64,40]->[40] (rows)", [&](Case &c) {
    c.kernel("reduce_sum_to", {c.in("x", {64, 40})}, {c.out("y", {40})});
  });
  add("reduce_sum_to [40,300]->[40,1] (row sums)", [&](Case &c) {
    c.kernel("reduce_sum_to", {c.in("x", {40, 300})}, {c.out("y", {40, 1})});
  });
  add("conv2d_backward_bias", [&](Case &c) {
    c.kernel("conv2d_backward_bias", {c.in("dy", {4, 70, 6, 7})}, {c.out("db", {70})});
  });
  add("conv2d_backward_bias f16", [&](Case &c) {
    c.kernel("conv2d_backward_bias", {c.in("dy", {4, 70, 6, 7}, F16)}, {c.out("db", {70}, F16)});
  });
  add("dropout", [&](Case &c) {
    const uint32_t it = c.in("iteration", {}, I64);
    c.inputs[it] = {3};
    c.kernel("dropout", {c.in("x", {2, 6, 4, 5}), it}, {c.out("y", {2, 6, 4, 5})},
             {{"ratio", flt(0.3)}, {"seed", ints({5})}, {"salt", ints({7})}});
  });
  // Drop path: one draw per sample, keyed by the sample index in both layouts.
  add("dropout per sample", [&](Case &c) {
    const uint32_t it = c.in("iteration", {}, I64);
    c.inputs[it] = {3};
    c.kernel("dropout", {c.in("x", {16, 6, 4, 5}), it}, {c.out("y", {16, 6, 4, 5})},
             {{"ratio", flt(0.4)}, {"seed", ints({5})}, {"salt", ints({7})}, {"per_sample", plan::boolAttr(true)}});
  });
  add("dropout_backward f16", [&](Case &c) {
    const uint32_t it = c.in("iteration", {}, I64);
    c.inputs[it] = {11};
    c.kernel("dropout_backward", {c.in("dy", {2, 6, 4, 5}, F16), it}, {c.out("dx", {2, 6, 4, 5}, F16)},
             {{"ratio", flt(0.5)}, {"seed", ints({-9})}, {"salt", ints({2})}});
  });
  add("softmax axis 1", [&](Case &c) {
    c.kernel("softmax", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {2, 6, 4, 5})}, {{"axis", ints({1})}});
  });
  add("softmax axis -1", [&](Case &c) {
    c.kernel("softmax", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {2, 6, 4, 5})}, {{"axis", ints({-1})}});
  });
  add("softmax_backward axis 1", [&](Case &c) {
    c.kernel("softmax_backward", {c.in("dy", {2, 6, 4, 5}), c.in("y", {2, 6, 4, 5})}, {c.out("dx", {2, 6, 4, 5})},
             {{"axis", ints({1})}});
  });
  add("flatten [2,6,4,5]", [&](Case &c) {
    c.kernel("flatten", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {2, 120})}, {{"axis", ints({1})}});
  });
  add("reshape [2,120]->[2,6,4,5]", [&](Case &c) {
    c.kernel("reshape", {c.in("x", {2, 120})}, {c.out("y", {2, 6, 4, 5})});
  });
  add("reshape [2,6,4,5]->[4,3,5,4]", [&](Case &c) {
    c.kernel("reshape", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {4, 3, 5, 4})});
  });
  add("flatten [3,8,1,1]", [&](Case &c) {
    c.kernel("flatten", {c.in("x", {3, 8, 1, 1})}, {c.out("y", {3, 8})}, {{"axis", ints({1})}});
  });
  add("cast f32->f16 [2,6,4,5]", [&](Case &c) {
    c.kernel("cast", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {2, 6, 4, 5}, F16)});
  });
  add("cast f16->f32 [1001]", [&](Case &c) { c.kernel("cast", {c.in("x", {1001}, F16)}, {c.out("y", {1001})}); });
  // Consecutive casts of one dtype pair run as one multi-tensor launch (cuda/kernels/elementwise.cpp):
  // three weights' casts to f16 or bf16 of sizes across the table's chunks, then two casts back
  // to f32 of the first run's outputs, which form a run of their own.
  for (plan::DType dt : {F16, plan::BF16})
    add(std::string("consecutive casts f32<->") + plan::dtypeName(dt), [&, dt](Case &c) {
      const uint32_t a = c.in("a", {3, 5}), b = c.in("b", {70001}), d = c.in("d", {2, 16, 3, 3});
      const uint32_t ha = c.out("ha", {3, 5}, dt), hb = c.out("hb", {70001}, dt), hd = c.out("hd", {2, 16, 3, 3}, dt);
      c.kernel("cast", {a}, {ha});
      c.kernel("cast", {b}, {hb});
      c.kernel("cast", {d}, {hd});
      c.kernel("cast", {hb}, {c.out("fb", {70001})});
      c.kernel("cast", {ha}, {c.out("fa", {3, 5})});
    });
  add("cast f32->i64 [2,3,4,5]", [&](Case &c) {
    c.kernel("cast", {c.in("x", {2, 3, 4, 5})}, {c.out("y", {2, 3, 4, 5}, I64)});
  });
  add("relu f16 [3,5,7]", [&](Case &c) { c.kernel("relu", {c.in("x", {3, 5, 7}, F16)}, {c.out("y", {3, 5, 7}, F16)}); });
  add("sigmoid [2,6,4,5]", [&](Case &c) { c.kernel("sigmoid", {c.in("x", {2, 6, 4, 5})}, {c.out("y", {2, 6, 4, 5})}); });
  add("clip_backward [1003]", [&](Case &c) {
    c.kernel("clip_backward", {c.in("dy", {1003}), c.in("x", {1003})}, {c.out("dx", {1003})},
             {{"min", flt(-0.5)}, {"max", flt(0.7)}});
  });
  // MobileNetV3's activations over [-5, 5] (all three pieces of each), kept 0.01 off the kinks at
  // +-3, where the device's f32 and the reference's f64 may pick different sides.
  auto spread = [](size_t n) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = -5.0 + 10.0 * double((i * 7919) % n) / double(n);
      if (std::fabs(std::fabs(v[i]) - 3.0) < 0.01)
        v[i] += 0.02;
    }
    return v;
  };
  for (plan::DType dt : {F32, F16}) {
    const std::string suffix = dt == F16 ? " f16 [2,6,4,5]" : " [2,6,4,5]";
    const std::map<std::string, plan::Attr> hs = {{"alpha", flt(1.0 / 6.0)}, {"beta", flt(0.5)}};
    add("hard_sigmoid" + suffix, [&, dt](Case &c) {
      const uint32_t x = c.in("x", {2, 6, 4, 5}, dt);
      c.kernel("hard_sigmoid", {x}, {c.out("y", {2, 6, 4, 5}, dt)}, hs);
      c.inputs[x] = spread(240);
    });
    add("hard_swish" + suffix, [&, dt](Case &c) {
      const uint32_t x = c.in("x", {2, 6, 4, 5}, dt);
      c.kernel("hard_swish", {x}, {c.out("y", {2, 6, 4, 5}, dt)});
      c.inputs[x] = spread(240);
    });
    add("hard_sigmoid_backward" + suffix, [&, dt](Case &c) {
      const uint32_t x = c.in("x", {2, 6, 4, 5}, dt);
      c.kernel("hard_sigmoid_backward", {c.in("dy", {2, 6, 4, 5}, dt), x}, {c.out("dx", {2, 6, 4, 5}, dt)}, hs);
      c.inputs[x] = spread(240);
    });
    add("hard_swish_backward" + suffix, [&, dt](Case &c) {
      const uint32_t x = c.in("x", {2, 6, 4, 5}, dt);
      c.kernel("hard_swish_backward", {c.in("dy", {2, 6, 4, 5}, dt), x}, {c.out("dx", {2, 6, 4, 5}, dt)});
      c.inputs[x] = spread(240);
    });
  }
  // Every unary element-wise op of the registry and its gradient, with its default attributes
  // (ops.def's CASTOR_ELEMENTWISE_OP lines: an op added there is tested here too).
  const std::vector<std::string> elementwiseOps = {
#define CASTOR_OP(id, name, category)
#define CASTOR_ELEMENTWISE_OP(id, name) name,
#include "plan/ops.def"
#undef CASTOR_ELEMENTWISE_OP
#undef CASTOR_OP
  };
  for (const std::string &op : elementwiseOps)
    for (plan::DType dt : {F32, F16}) {
      const std::string suffix = std::string(" (every element-wise op) [2,6,4,5]") + (dt == F16 ? " f16" : "");
      add(op + suffix, [&, op, dt](Case &c) {
        const uint32_t x = c.in("x", {2, 6, 4, 5}, dt);
        c.kernel(op, {x}, {c.out("y", {2, 6, 4, 5}, dt)});
        // Ops defined on positive values (sqrt), or overflowing fp16 near 0 (reciprocal), read
        // values inside their domain: NaN or inf on both backends would compare as a mismatch.
        if (op == "sqrt" || op == "reciprocal") {
          std::mt19937_64 rng(std::hash<std::string>{}(c.name));
          std::uniform_real_distribution<double> uniform(0.25, 4.0);
          std::vector<double> &v = c.inputs[x];
          v.resize(2 * 6 * 4 * 5);
          for (double &e : v)
            e = uniform(rng);
        }
      });
      add(op + "_backward" + suffix, [&, op, dt](Case &c) {
        c.kernel(op + "_backward", {c.in("dy", {2, 6, 4, 5}, dt), c.in("saved", {2, 6, 4, 5}, dt)},
                 {c.out("dx", {2, 6, 4, 5}, dt)});
      });
    }
  add("concat axis 1", [&](Case &c) {
    c.kernel("concat", {c.in("a", {2, 3, 4, 5}), c.in("b", {2, 2, 4, 5})}, {c.out("y", {2, 5, 4, 5})},
             {{"axis", ints({1})}});
  });
  // Transposes and slices move elements through each operand's storage strides: rank-4 float
  // operands are channels-last in that layout, so these cross every pairing of layouts.
  for (plan::DType dt : {F32, F16}) {
    const std::string suffix = dt == F16 ? " f16" : "";
    add("transpose [2,6,4,5] -> [2,4,5,6]" + suffix, [&, dt](Case &c) {
      c.kernel("transpose", {c.in("x", {2, 6, 4, 5}, dt)}, {c.out("y", {2, 4, 5, 6}, dt)},
               {{"perm", ints({0, 2, 3, 1})}});
    });
    add("transpose [2,2,3,4,4] -> [2,3,2,4,4]" + suffix, [&, dt](Case &c) {
      c.kernel("transpose", {c.in("x", {2, 2, 3, 4, 4}, dt)}, {c.out("y", {2, 3, 2, 4, 4}, dt)},
               {{"perm", ints({0, 2, 1, 3, 4})}});
    });
    // Attention's head split: rows of 64 contiguous on both sides move as 16-byte units; the
    // rank-3 slice of a third merges its two inner dimensions.
    add("transpose [5,3,64] -> [3,5,64]" + suffix, [&, dt](Case &c) {
      c.kernel("transpose", {c.in("x", {5, 3, 64}, dt)}, {c.out("y", {3, 5, 64}, dt)}, {{"perm", ints({1, 0, 2})}});
    });
    add("slice [3,7,2,40] middle third" + suffix, [&, dt](Case &c) {
      c.kernel("slice", {c.in("x", {3, 7, 2, 40}, dt)}, {c.out("y", {1, 7, 2, 40}, dt)},
               {{"starts", ints({1, 0, 0, 0})}, {"ends", ints({2, 7, 2, 40})}, {"steps", ints({1, 1, 1, 1})}});
    });
    add("slice [2,6,4,5] channels 5,3,1, rows 1.." + suffix, [&, dt](Case &c) {
      c.kernel("slice", {c.in("x", {2, 6, 4, 5}, dt)}, {c.out("y", {2, 3, 3, 5}, dt)},
               {{"starts", ints({0, -1, 1, 0})}, {"ends", ints({2, -7, 4, 5})}, {"steps", ints({1, -2, 1, 1})}});
    });
    add("slice_backward [2,3,3,5] -> [2,6,4,5]" + suffix, [&, dt](Case &c) {
      c.kernel("slice_backward", {c.in("dy", {2, 3, 3, 5}, dt)}, {c.out("dx", {2, 6, 4, 5}, dt)},
               {{"starts", ints({0, -1, 1, 0})}, {"ends", ints({2, -7, 4, 5})}, {"steps", ints({1, -2, 1, 1})}});
    });
  }
  for (plan::DType dt : {F32, F16}) {
    const std::string suffix = dt == F16 ? " f16" : "";
    add("erf [1003]" + suffix, [&, dt](Case &c) { c.kernel("erf", {c.in("x", {1003}, dt)}, {c.out("y", {1003}, dt)}); });
    add("erf_backward [1003]" + suffix, [&, dt](Case &c) {
      c.kernel("erf_backward", {c.in("dy", {1003}, dt), c.in("x", {1003}, dt)}, {c.out("dx", {1003}, dt)});
    });
    for (bool tanhForm : {false, true}) {
      std::map<std::string, plan::Attr> form;
      if (tanhForm)
        form["tanh"] = plan::boolAttr(true);
      const std::string name = tanhForm ? " tanh" : "";
      add("gelu" + name + " [1003]" + suffix, [&, dt, form](Case &c) {
        c.kernel("gelu", {c.in("x", {1003}, dt)}, {c.out("y", {1003}, dt)}, form);
      });
      add("gelu_backward" + name + " [1003]" + suffix, [&, dt, form](Case &c) {
        c.kernel("gelu_backward", {c.in("dy", {1003}, dt), c.in("x", {1003}, dt)}, {c.out("dx", {1003}, dt)}, form);
      });
    }
    // Rows of 300 (not a multiple of the block), 2*37 rows; f16 data with f32 parameters and statistics.
    add("layer_norm [2,37,300]" + suffix, [&, dt](Case &c) {
      c.kernel("layer_norm", {c.in("x", {2, 37, 300}, dt), c.in("scale", {300}), c.in("bias", {300})},
               {c.out("y", {2, 37, 300}, dt), c.out("mean", {2, 37, 1}), c.out("inv_std", {2, 37, 1})},
               {{"axis", ints({-1})}, {"epsilon", flt(1e-6)}});
    });
  }
  // cuDNN's fused attention (SDPA), forward then backward in one plan: the backward reads the o and
  // stats its backend's forward wrote, as in a training step. ViT-B/16's geometry (197 tokens, head
  // dimension 64: Sk not a multiple of cuDNN's 64/128 tiles) and a tiny one (5 tokens, head
  // dimension 8, the smallest cuDNN takes).
  for (plan::DType dt : {F16, plan::BF16}) {
    const std::string suffix = dt == F16 ? " f16" : " bf16";
    for (const std::vector<int64_t> &bhsd : {std::vector<int64_t>{2, 3, 197, 64}, std::vector<int64_t>{1, 2, 5, 8}}) {
      const int64_t B = bhsd[0], H = bhsd[1], S = bhsd[2], D = bhsd[3];
      add("attention + attention_backward [" + std::to_string(B) + "," + std::to_string(H) + "," +
              std::to_string(S) + "," + std::to_string(D) + "]" + suffix,
          [&, dt, B, H, S, D](Case &c) {
            const std::vector<int64_t> x{B, H, S, D}, stats{B, H, S, 1};
            const std::map<std::string, plan::Attr> scale{{"scale", flt(1.0 / std::sqrt(double(D)))}};
            const uint32_t q = c.in("q", x, dt), k = c.in("k", x, dt), v = c.in("v", x, dt);
            const uint32_t o = c.out("o", x, dt), l = c.out("stats", stats, F32);
            c.kernel("attention", {q, k, v}, {o, l}, scale);
            c.kernel("attention_backward", {q, k, v, o, l, c.in("dO", x, dt)},
                     {c.out("dq", x, dt), c.out("dk", x, dt), c.out("dv", x, dt)}, scale);
            // cuDNN rounds the probabilities to the io dtype before P v (and dS before dS k, dS^T q),
            // where the reference keeps f64 until the single rounding of each output: a few units of
            // the dtype's rounding error (f16 2^-11, bf16 2^-8) norm-wise. bf16's is within the
            // harness's 1e-2 only narrowly, hence 2e-2 for it.
            if (dt == plan::BF16)
              c.tolerance = 2e-2;
          });
    }
  }
  // 600 rows: three chunks of the parameter gradients' partial sums.
  add("layer_norm_backward [600,96]", [&](Case &c) {
    const uint32_t invStd = c.in("inv_std", {600, 1});
    c.kernel("layer_norm_backward",
             {c.in("dy", {600, 96}), c.in("x", {600, 96}), c.in("scale", {96}), c.in("mean", {600, 1}), invStd},
             {c.out("dx", {600, 96}), c.out("dscale", {96}), c.out("dbias", {96})}, {{"axis", ints({1})}});
    c.inputs[invStd] = std::vector<double>(600, 1.7);
  });
  add("layer_norm_backward [10,8,12] over the last two f16", [&](Case &c) {
    const uint32_t invStd = c.in("inv_std", {10, 1, 1});
    c.kernel("layer_norm_backward",
             {c.in("dy", {10, 8, 12}, F16), c.in("x", {10, 8, 12}, F16), c.in("scale", {8, 12}),
              c.in("mean", {10, 1, 1}), invStd},
             {c.out("dx", {10, 8, 12}, F16), c.out("dscale", {8, 12}), c.out("dbias", {8, 12})},
             {{"axis", ints({1})}});
    c.inputs[invStd] = std::vector<double>(10, 0.8);
  });
  // The register-resident layer norm kernels (layer_norm_rows.cu), forward then backward in one plan
  // (the backward reads the forward's statistics): ConvNeXt's and ViT's widths (groups of 4 to 32
  // threads a row), an odd width (one element a load), 4100 (a block a row); 1, 7 and 4099 rows;
  // f32, f16 and bf16 data with f32 parameters and statistics (autocast's form), affine and with
  // scale 1, bias 0. x = 8 + 2 N(0, 1): its mean is far from 0, so that a variance taken as
  // E[x^2] - mean^2 in fp32 would not pass. The tolerances are a few roundings of the data's
  // dtype (the kernels compute in fp32 where the reference does fp64), well below any wrong
  // formula's error.
  auto layerNormPair = [](Case &c, int64_t rows, int64_t C, plan::DType dt, plan::DType pt, bool affine) {
    const std::vector<int64_t> xs{rows, C}, ss{rows, 1};
    const uint32_t x = c.in("x", xs, dt), scale = c.in("scale", {C}, pt), bias = c.in("bias", {C}, pt);
    const uint32_t mean = c.out("mean", ss, pt), invStd = c.out("inv_std", ss, pt);
    const std::map<std::string, plan::Attr> attrs{{"axis", ints({-1})}, {"epsilon", flt(1e-5)}};
    c.kernel("layer_norm", {x, scale, bias}, {c.out("y", xs, dt), mean, invStd}, attrs);
    c.kernel("layer_norm_backward", {c.in("dy", xs, dt), x, scale, mean, invStd},
             {c.out("dx", xs, dt), c.out("dscale", {C}, pt), c.out("dbias", {C}, pt)}, attrs);
    std::mt19937_64 rng(uint64_t(rows * 100003 + C));
    std::normal_distribution<double> normal;
    std::vector<double> xv(size_t(rows * C));
    for (double &v : xv)
      v = 8 + 2 * normal(rng);
    c.inputs[x] = xv;
    if (!affine) {
      c.inputs[scale] = std::vector<double>(size_t(C), 1.0);
      c.inputs[bias] = std::vector<double>(size_t(C), 0.0);
    }
    c.tolerance = dt == plan::F32 && pt == plan::F32 ? 1e-5 : dt == plan::BF16 || pt == plan::BF16 ? 4e-3 : 2e-3;
  };
  for (plan::DType dt : {F32, F16, plan::BF16})
    for (int64_t C : {96, 192, 384, 768, 13, 4100})
      for (int64_t rows : {1, 7, 4099})
        for (bool affine : {true, false}) {
          const std::string name = "layer_norm rows [" + std::to_string(rows) + "," + std::to_string(C) + "] " +
                                   (dt == F32 ? "f32" : dt == F16 ? "f16" : "bf16") + (affine ? " affine" : " plain");
          add(name, [&, dt, C, rows, affine](Case &c) { layerNormPair(c, rows, C, dt, F32, affine); });
        }
  // Parameters and statistics of the data's dtype (a plan without autocast).
  add("layer_norm rows [4099,384] f16 params f16", [&](Case &c) { layerNormPair(c, 4099, 384, F16, F16, true); });
  add("layer_norm rows [4099,384] bf16 params bf16",
      [&](Case &c) { layerNormPair(c, 4099, 384, plan::BF16, plan::BF16, true); });
  add("layer_norm rows [7,13] bf16 params bf16", [&](Case &c) { layerNormPair(c, 7, 13, plan::BF16, plan::BF16, true); });
  add("slice [2,197,8] token 0", [&](Case &c) {
    c.kernel("slice", {c.in("x", {2, 197, 8})}, {c.out("y", {2, 1, 8})},
             {{"starts", ints({0, 0, 0})}, {"ends", ints({2, 1, 8})}, {"steps", ints({1, 1, 1})}});
  });
  add("split axis 2", [&](Case &c) {
    c.kernel("split", {c.in("x", {2, 3, 4, 5})}, {c.out("a", {2, 3, 1, 5}), c.out("b", {2, 3, 3, 5})},
             {{"axis", ints({2})}});
  });
  // cuDNN takes f16/bf16/f32 data with f32 statistics and all-f64; f16 statistics and ranks
  // above 4 run the own kernels.
  add("batch_norm_training (own: f16 statistics)", [&](Case &c) {
    c.kernel("batch_norm_training", {c.in("x", {4, 6, 3, 5}, F16), c.in("scale", {6}, F16), c.in("bias", {6}, F16)},
             {c.out("y", {4, 6, 3, 5}, F16), c.out("mean", {6}, F16), c.out("inv_std", {6}, F16)});
  });
  add("batch_norm_training (own: rank 5)", [&](Case &c) {
    c.kernel("batch_norm_training", {c.in("x", {2, 6, 3, 5, 2}), c.in("scale", {6}), c.in("bias", {6})},
             {c.out("y", {2, 6, 3, 5, 2}), c.out("mean", {6}), c.out("inv_std", {6})});
  });
  add("batch_norm_training_backward (own: f16 statistics)", [&](Case &c) {
    const uint32_t istd = c.in("inv_std", {6}, F16);
    c.inputs[istd] = {1.5, 0.7, 2.0, 1.1, 0.9, 1.3};
    c.kernel("batch_norm_training_backward",
             {c.in("dy", {4, 6, 3, 5}, F16), c.in("x", {4, 6, 3, 5}, F16), c.in("scale", {6}, F16),
              c.in("mean", {6}, F16), istd},
             {c.out("dx", {4, 6, 3, 5}, F16), c.out("dscale", {6}, F16), c.out("dbias", {6}, F16)});
  });
  add("batch_norm_inference (own: f16 statistics)", [&](Case &c) {
    const uint32_t var = c.in("var", {6}, F16);
    c.inputs[var] = {1.5, 0.7, 2.0, 1.1, 0.9, 1.3};
    c.kernel("batch_norm_inference",
             {c.in("x", {4, 6, 3, 5}, F16), c.in("scale", {6}, F16), c.in("bias", {6}, F16), c.in("mean", {6}, F16),
              var},
             {c.out("y", {4, 6, 3, 5}, F16)});
  });
  // cuDNN: f16/bf16/f32 data with f32 statistics, through the Ex API, the graph API and the
  // tuner's choice of the two. C = 32 (the graph API's NHWC kernels want channels in multiples
  // of 8) and C = 6 (a layer the graph API may refuse: the fallback to the Ex API).
  for (plan::DType dt : {F16, plan::BF16, F32}) {
    for (int64_t C : {32, 6}) {
      const std::string t = std::string(" ") + plan::dtypeName(dt) + " C=" + std::to_string(C) + " (cuDNN)";
      const std::vector<int64_t> xs = {4, C, 6, 5};
      std::vector<double> positive(static_cast<size_t>(C)); // variances
      for (size_t i = 0; i < positive.size(); ++i)
        positive[i] = 0.6 + 0.15 * double(i % 7);
      // The backward reads the forward's saved statistics, as in a training step (and as the
      // Ex API's backward needs: it may read a reserve space its forward filled).
      add("batch_norm_training + backward" + t, [&](Case &c) {
        c.perBnApi = true;
        const uint32_t x = c.in("x", xs, dt), scale = c.in("scale", {C}), mean = c.out("mean", {C}),
                       invStd = c.out("inv_std", {C});
        c.kernel("batch_norm_training", {x, scale, c.in("bias", {C})}, {c.out("y", xs, dt), mean, invStd},
                 {{"epsilon", flt(1e-3)}});
        c.kernel("batch_norm_training_backward", {c.in("dy", xs, dt), x, scale, mean, invStd},
                 {c.out("dx", xs, dt), c.out("dscale", {C}), c.out("dbias", {C})}, {{"epsilon", flt(1e-3)}});
      });
      add("batch_norm_inference" + t, [&](Case &c) {
        c.perBnApi = true;
        const uint32_t var = c.in("var", {C});
        c.inputs[var] = positive;
        c.kernel("batch_norm_inference",
                 {c.in("x", xs, dt), c.in("scale", {C}), c.in("bias", {C}), c.in("mean", {C}), var},
                 {c.out("y", xs, dt)}, {{"epsilon", flt(1e-3)}});
      });
    }
  }
  // batch_norm_apply (what castor-recompute emits): a batch norm's output again from its
  // statistics, plain, with the residual and relu, and with ReLU6's clip (clip_max 1, so that
  // both bounds bite); C = 32 runs the packed channels-last kernel in nhwc, C = 6 its one-channel
  // packs.
  enum class Apply { Plain, ResidualRelu, Clip };
  for (plan::DType dt : {F16, plan::BF16, F32}) {
    for (int64_t C : {32, 6}) {
      for (Apply form : {Apply::Plain, Apply::ResidualRelu, Apply::Clip}) {
        const char *label = form == Apply::ResidualRelu ? " + z + relu " : form == Apply::Clip ? " clip_max=1 " : " ";
        const std::string t = label + std::string(plan::dtypeName(dt)) + " C=" + std::to_string(C);
        add("batch_norm_apply" + t, [&, dt, C, form](Case &c) {
          const std::vector<int64_t> xs = {4, C, 6, 5};
          const uint32_t istd = c.in("inv_std", {C});
          c.inputs[istd] = std::vector<double>(size_t(C), 1.3);
          std::vector<uint32_t> in = {c.in("x", xs, dt), c.in("scale", {C}), c.in("bias", {C}), c.in("mean", {C}),
                                      istd};
          if (form == Apply::ResidualRelu)
            in.push_back(c.in("z", xs, dt));
          std::map<std::string, plan::Attr> attrs = {{"relu", plan::boolAttr(form != Apply::Plain)}};
          if (form == Apply::Clip)
            attrs["clip_max"] = flt(1.0);
          c.kernel("batch_norm_apply", in, {c.out("y", xs, dt)}, attrs);
        });
      }
    }
  }
  // Running statistics updated by the kernel itself: the Ex API whatever CASTOR_BN_API says.
  add("batch_norm_training + running update f16 (cuDNN)", [&](Case &c) {
    c.perBnApi = true;
    const uint32_t rv = c.in("running_var", {32});
    c.inputs[rv] = std::vector<double>(32, 1.0);
    c.kernel("batch_norm_training",
             {c.in("x", {4, 32, 6, 5}, F16), c.in("scale", {32}), c.in("bias", {32}), c.in("running_mean", {32}), rv},
             {c.out("y", {4, 32, 6, 5}, F16), c.out("mean", {32}), c.out("inv_std", {32}),
              c.out("new_running_mean", {32}), c.out("new_running_var", {32})});
  });
  // A convolution whose output the fused batch-norm-ReLU normalises, forward and backward: in the
  // nhwc layout the convolution may compute the statistics in its epilogue (cuDNN's genstats) and
  // the batch norm read them (the conv-stats way, forced or the tuner's choice); the nchw layout,
  // and the other ways, compute them from y. relu, relu with the residual z and ReLU6's clip. z is
  // +-4 at random and t = xhat / 2 (scale 1/2, bias 0; xhat of a convolution of normal data stays
  // within a few units), so that the ReLU's mask is z's
  // sign whatever each way rounds t to (cuDNN's fused kernel adds z unrounded, the statistics from
  // the sums round otherwise), a mask the own forward records bit by bit for its backward.
  for (plan::DType dt : {F16, plan::BF16})
    for (int form = 0; form < 3; ++form) {
      const bool residual = form == 1, clip = form == 2;
      const std::string t = std::string(residual ? " + z " : clip ? " clip_max=1 " : " ") + plan::dtypeName(dt);
      add("conv2d + batch_norm_relu_training + backward" + t, [&, dt, residual, clip](Case &c) {
        c.perFusedBn = true;
        const int64_t N = 8, Cin = 16, C = 32, H = 12, W = 10;
        const std::vector<int64_t> xs = {N, C, H, W};
        const uint32_t in = c.in("in", {N, Cin, H, W}, dt), w = c.in("w", {C, Cin, 3, 3}, dt);
        const uint32_t x = c.out("x", xs, dt);
        c.kernel("conv2d", {in, w}, {x}, {{"pads", ints({1, 1, 1, 1})}});
        const BatchNormInputs bn = addBatchNormReluPair(c, x, xs, dt, F32, residual, clip);
        if (!residual)
          return;
        std::mt19937_64 rng(std::hash<std::string>{}(c.name));
        std::vector<double> zv(size_t(N * C * H * W));
        for (double &e : zv)
          e = rng() & 1 ? 4.0 : -4.0;
        c.inputs[bn.z] = zv;
        c.inputs[bn.scale] = std::vector<double>(size_t(C), 0.5);
        c.inputs[bn.bias] = std::vector<double>(size_t(C), 0.0);
      });
    }
  // A convolution whose output a plain batch norm normalises (a projection shortcut's), forward and
  // backward: in nhwc its training forward may run from the convolution's sums (conv-stats, forced
  // by CASTOR_FUSED_BN=conv-stats, else the tuner's choice).
  for (plan::DType dt : {F16, plan::BF16})
    add(std::string("conv2d + batch_norm_training + backward ") + plan::dtypeName(dt), [&, dt](Case &c) {
      c.perFusedBn = true;
      const int64_t N = 8, Cin = 16, C = 32, H = 12, W = 10;
      const std::vector<int64_t> xs = {N, C, H, W};
      const uint32_t in = c.in("in", {N, Cin, H, W}, dt), w = c.in("w", {C, Cin, 1, 1}, dt);
      const uint32_t x = c.out("x", xs, dt);
      c.kernel("conv2d", {in, w}, {x});
      const uint32_t scale = c.in("scale", {C}), bias = c.in("bias", {C});
      const uint32_t mean = c.out("mean", {C}), invStd = c.out("inv_std", {C});
      c.kernel("batch_norm_training", {x, scale, bias}, {c.out("y", xs, dt), mean, invStd}, {{"epsilon", flt(1e-3)}});
      c.kernel("batch_norm_training_backward", {c.in("dy", xs, dt), x, scale, mean, invStd},
               {c.out("dx", xs, dt), c.out("dscale", {C}), c.out("dbias", {C})}, {{"epsilon", flt(1e-3)}});
    });
  // The fused batch-norm-ReLU, forward and backward in one plan (the backward reads the
  // forward's y and statistics, as in a training step, and the fused backward the reserve space
  // its forward filled), with and without the residual z. cuDNN's fused kernel takes the f16
  // layers with C a multiple of 4 in the nhwc layout, Castor's own fused kernels every f32, f16
  // and bf16 layer in nhwc; f64 and the nchw layout run the composed way. Each case runs with
  // CASTOR_FUSED_BN unset (the tuner's choice) and set to each way.
  struct FusedLayer {
    plan::DType dt;
    std::vector<int64_t> xs;
  };
  for (const FusedLayer &l : {FusedLayer{F16, {8, 64, 14, 14}}, FusedLayer{F16, {4, 6, 6, 5}},
                              FusedLayer{plan::BF16, {4, 32, 6, 5}}, FusedLayer{F32, {4, 32, 6, 5}},
                              FusedLayer{plan::F64, {2, 6, 3, 5}}}) {
    // relu, relu with the residual, ReLU6's clip (at 1, so that the upper bound is often reached).
    for (int form = 0; form < 3; ++form) {
      const bool residual = form == 1, clip = form == 2;
      if (clip && l.dt == plan::F64)
        continue; // the compiler fuses f16 and bf16 groups; the CUDA backend refuses f64 ReLU6 loudly
      const int64_t C = l.xs[1];
      const std::string t = std::string(residual ? " + z " : clip ? " clip_max=1 " : " ") + plan::dtypeName(l.dt) +
                            " C=" + std::to_string(C);
      add("batch_norm_relu_training + backward" + t, [&](Case &c) {
        c.perFusedBn = true;
        const plan::DType dt = l.dt, pt = dt == plan::F64 ? plan::F64 : F32; // data, per-channel
        const std::vector<int64_t> xs = l.xs;
        const uint32_t x = c.in("x", xs, dt);
        const BatchNormInputs bn = addBatchNormReluPair(c, x, xs, dt, pt, residual, clip);
        if (!residual)
          return;
        // z kept 0.05 away from -t (t = the batch norm of x): cuDNN's fused kernel adds z to t in
        // fp32, the reference to t rounded to x's dtype, and where t + z is within that rounding
        // of 0 the two ReLU masks differ and so do the whole dy values they pass to dx and dz.
        std::mt19937_64 rng(std::hash<std::string>{}(c.name) ^ 0x5eed);
        std::normal_distribution<double> normal;
        auto draw = [&](size_t n, plan::DType type) { // rounded to the dtype, as uploaded
          std::vector<double> v(n);
          for (double &e : v)
            e = normal(rng);
          return weights::decodeValues(type, weights::encodeValues(type, v));
        };
        const size_t N = size_t(xs[0]), HW = size_t(xs[2] * xs[3]), n = N * size_t(C) * HW;
        std::vector<double> xv = draw(n, dt), sv = draw(size_t(C), pt), bv = draw(size_t(C), pt), zv = draw(n, dt);
        for (size_t ch = 0; ch < size_t(C); ++ch) {
          double sum = 0, sq = 0;
          for (size_t b = 0; b < N; ++b)
            for (size_t i = 0; i < HW; ++i)
              sum += xv[(b * size_t(C) + ch) * HW + i];
          const double mu = sum / double(N * HW);
          for (size_t b = 0; b < N; ++b)
            for (size_t i = 0; i < HW; ++i)
              sq += (xv[(b * size_t(C) + ch) * HW + i] - mu) * (xv[(b * size_t(C) + ch) * HW + i] - mu);
          const double inv = 1 / std::sqrt(sq / double(N * HW) + 1e-3);
          for (size_t b = 0; b < N; ++b)
            for (size_t i = 0; i < HW; ++i) {
              const size_t at = (b * size_t(C) + ch) * HW + i;
              if (std::abs((xv[at] - mu) * inv * sv[ch] + bv[ch] + zv[at]) < 0.05)
                zv[at] += 0.1;
            }
        }
        c.inputs[x] = xv, c.inputs[bn.scale] = sv, c.inputs[bn.bias] = bv, c.inputs[bn.z] = zv;
      });
    }
  }
  add("softmax_cross_entropy + count_correct", [&](Case &c) {
    const uint32_t x = c.in("logits", {37, 11}), labels = c.in("labels", {37}, I64);
    std::vector<double> l(37);
    for (size_t i = 0; i < l.size(); ++i)
      l[i] = double((i * 7) % 11);
    c.inputs[labels] = l;
    c.kernel("softmax_cross_entropy", {x, labels}, {c.out("loss", {}), c.out("probs", {37, 11})},
             {{"label_smoothing", flt(0.1)}});
    c.kernel("count_correct", {x, labels}, {c.out("correct", {}, I64)});
    const uint32_t dl = c.in("dloss", {});
    c.kernel("softmax_cross_entropy_backward", {dl, x, labels}, {c.out("dlogits", {37, 11})},
             {{"label_smoothing", flt(0.1)}, {"reduction", str("sum")}});
  });

  // gemm and matmul (cuBLASLt). Odd sizes, so that leading dimensions and batch strides are not
  // 16-byte multiples in f16/bf16; a large fp32 gemm whose 1e-4 tolerance TF32 would exceed.
  for (plan::DType dt : {F32, F16, plan::BF16, plan::F64}) {
    const std::string t = std::string(" ") + plan::dtypeName(dt);
    const bool wide = dt == F32 || dt == plan::F64;
    add("gemm [37,29]x[29,45]" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt)}, {c.out("y", {37, 45}, dt)});
    });
    add("gemm + bias [45] alpha 0.75" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt), c.in("c", {45}, dt)},
               {c.out("y", {37, 45}, dt)}, {{"alpha", flt(0.75)}});
    });
    if (dt == plan::F64)
      continue;
    add("gemm transA transB alpha 0.5" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {29, 37}, dt), c.in("b", {45, 29}, dt)}, {c.out("y", {37, 45}, dt)},
               {{"trans_a", ints({1})}, {"trans_b", ints({1})}, {"alpha", flt(0.5)}});
    });
    add("gemm transB + bias [1,45] (epilogue)" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {45, 29}, dt), c.in("c", {1, 45}, dt)},
               {c.out("y", {37, 45}, dt)}, {{"trans_b", ints({1})}});
    });
    add("gemm transA + C [37,45] beta 0.7" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {29, 37}, dt), c.in("b", {29, 45}, dt), c.in("c", {37, 45}, dt)},
               {c.out("y", {37, 45}, dt)}, {{"trans_a", ints({1})}, {"beta", flt(0.7)}});
    });
    add("gemm + C [37,1] (broadcast kernel)" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt), c.in("c", {37, 1}, dt)},
               {c.out("y", {37, 45}, dt)});
    });
    add("gemm + bias [45] beta 2 (broadcast kernel)" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt), c.in("c", {45}, dt)},
               {c.out("y", {37, 45}, dt)}, {{"beta", flt(2.0)}});
    });
    add("gemm + C beta 0 (C unread)" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt), c.in("c", {37, 45}, dt)},
               {c.out("y", {37, 45}, dt)}, {{"beta", flt(0.0)}});
    });
    add("gemm [1,29]x[29,10] + bias [10] (one row)" + t, [&](Case &c) {
      c.kernel("gemm", {c.in("a", {1, 29}, dt), c.in("b", {29, 10}, dt), c.in("c", {10}, dt)},
               {c.out("y", {1, 10}, dt)});
    });
    if (wide)
      add("gemm [256,512]x[512,384] + bias (no TF32)" + t, [&](Case &c) {
        c.kernel("gemm", {c.in("a", {256, 512}, dt), c.in("b", {512, 384}, dt), c.in("c", {384}, dt)},
                 {c.out("y", {256, 384}, dt)});
      });
    else
      add("gemm [256,512]x[384,512]^T + bias" + t, [&](Case &c) {
        c.kernel("gemm", {c.in("a", {256, 512}, dt), c.in("b", {384, 512}, dt), c.in("c", {384}, dt)},
                 {c.out("y", {256, 384}, dt)}, {{"trans_b", ints({1})}});
      });
    add("matmul [37,29]x[29,45]" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {37, 29}, dt), c.in("b", {29, 45}, dt)}, {c.out("y", {37, 45}, dt)});
    });
    add("matmul [3,7,5]x[3,5,6] (strided batch)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {3, 7, 5}, dt), c.in("b", {3, 5, 6}, dt)}, {c.out("y", {3, 7, 6}, dt)});
    });
    add("matmul [3,7,5]x[5,6] (B shared)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {3, 7, 5}, dt), c.in("b", {5, 6}, dt)}, {c.out("y", {3, 7, 6}, dt)});
    });
    add("matmul [1,7,5]x[3,5,6] (A broadcast)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {1, 7, 5}, dt), c.in("b", {3, 5, 6}, dt)}, {c.out("y", {3, 7, 6}, dt)});
    });
    add("matmul [5]x[3,5,6] (vector A)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {5}, dt), c.in("b", {3, 5, 6}, dt)}, {c.out("y", {3, 6}, dt)});
    });
    add("matmul [3,7,5]x[5] (vector B)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {3, 7, 5}, dt), c.in("b", {5}, dt)}, {c.out("y", {3, 7}, dt)});
    });
    add("matmul [4,64,96]x[4,96,80] (strided batch)" + t, [&](Case &c) {
      c.kernel("matmul", {c.in("a", {4, 64, 96}, dt), c.in("b", {4, 96, 80}, dt)}, {c.out("y", {4, 64, 80}, dt)});
    });
  }
  // Generated fused element-wise kernels (fused_elementwise, compiled by NVRTC at load) against
  // the CPU reference: an odd element count (no whole vectors, a scalar tail), batch 1, and a
  // size of whole 16-byte vectors.
  for (const std::vector<int64_t> &domain : {std::vector<int64_t>{3, 5, 7, 9}, std::vector<int64_t>{1, 16, 9, 9},
                                             std::vector<int64_t>{4, 32, 8, 8}})
    for (const test::FusedProgramCase &f : test::fusedProgramCases(domain))
      for (plan::DType dt : {plan::F32, plan::F16, plan::BF16})
        add("fused_elementwise " + f.name + " " + plan::dtypeName(dt) + " " + test::dimsName(domain),
            [&](Case &c) {
              const test::BuiltFusedCase built = test::addFusedCase(c, f, dt, true);
              c.outputs = built.outputs;
              // The case's value range (sqrt over positive values, reciprocal away from 0), as the
              // CPU tests of the same cases draw them.
              std::mt19937_64 rng(std::hash<std::string>{}(c.name));
              std::uniform_real_distribution<double> uniform(f.lo, f.hi);
              for (size_t i = 0; i < built.inputs.size(); ++i) {
                int64_t n = 1;
                for (int64_t d : f.inputs[i].shape)
                  n *= d;
                std::vector<double> &v = c.inputs[built.inputs[i]];
                v.resize(size_t(n));
                for (double &e : v)
                  e = uniform(rng);
              }
            });
  return all;
}

bool lowPrecision(const plan::Plan &p) {
  for (const auto &t : p.tensors())
    if (t.dtype() == plan::F16 || t.dtype() == plan::BF16)
      return true;
  return false;
}

// 0 when every output agrees.
int runCase(const Case &c, const char *layout, const std::string &variant) {
  const std::string where = c.name + " [" + layout + (variant.empty() ? "" : ", " + variant) + "]";
  if (Status v = plan::validatePlan(c.plan); !v) {
    std::printf("FAIL %-50s invalid plan: %s\n", where.c_str(), v.message().c_str());
    return 1;
  }
  setenv("CASTOR_CUDA_LAYOUT", layout, 1);
  auto cpu = createCpuBackend();
  auto gpu = createCudaBackend();
  for (Backend *b : {cpu.get(), gpu.get()})
    if (Status s = b->load(c.plan); !s) {
      std::printf("FAIL %-50s load on %s: %s\n", where.c_str(), b->name().c_str(), s.message().c_str());
      return 1;
    }
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  std::normal_distribution<double> normal;
  std::map<uint32_t, std::vector<uint8_t>> uploaded;
  for (const auto &t : c.plan.tensors()) {
    if (t.kind() != plan::Tensor::INPUT)
      continue;
    std::vector<double> v;
    if (auto it = c.inputs.find(t.id()); it != c.inputs.end()) {
      v = it->second;
    } else {
      v.resize(size_t(*plan::elementCount(t)));
      for (double &e : v)
        e = normal(rng);
    }
    const std::vector<uint8_t> bytes = weights::encodeValues(t.dtype(), v);
    uploaded[t.id()] = bytes;
    for (Backend *b : {cpu.get(), gpu.get()})
      if (Status s = b->upload(t.id(), bytes.data(), bytes.size()); !s) {
        std::printf("FAIL %-50s upload: %s\n", where.c_str(), s.message().c_str());
        return 1;
      }
  }
  for (int run = 0; run < 2; ++run)
    for (Backend *b : {cpu.get(), gpu.get()})
      if (Status s = b->run(); !s) {
        std::printf("FAIL %-50s run on %s: %s\n", where.c_str(), b->name().c_str(), s.message().c_str());
        return 1;
      }
  // An input reads back as uploaded after the steps, whatever the steps put in its arena slot.
  for (const auto &[id, bytes] : uploaded) {
    std::vector<uint8_t> back(bytes.size());
    if (Status s = gpu->download(id, back.data(), back.size()); !s || back != bytes) {
      std::printf("FAIL %-50s input %u does not read back as uploaded%s\n", where.c_str(), id,
                  s ? "" : (": " + s.message()).c_str());
      return 1;
    }
  }
  const double tol = c.tolerance > 0 ? c.tolerance : lowPrecision(c.plan) ? 1e-2 : 1e-4;
  double worst = 0;
  std::string worstName;
  for (uint32_t id : c.outputs) {
    const plan::Tensor &t = c.plan.tensors(int(id));
    std::vector<uint8_t> a(t.bytes()), b(t.bytes());
    Status sa = cpu->download(id, a.data(), a.size()), sb = gpu->download(id, b.data(), b.size());
    if (!sa || !sb) {
      std::printf("FAIL %-50s download: %s\n", where.c_str(), (!sa ? sa : sb).message().c_str());
      return 1;
    }
    const auto x = weights::decodeValues(t.dtype(), a), y = weights::decodeValues(t.dtype(), b);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff += (x[i] - y[i]) * (x[i] - y[i]);
      norm += x[i] * x[i];
    }
    const double err = std::isnan(diff) ? INFINITY : std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
    if (err >= worst || worstName.empty())
      worst = std::max(worst, err), worstName = t.name();
  }
  const bool ok = worst <= tol;
  std::printf("%s %-50s worst %.2e (%s) tol %.0e\n", ok ? "PASS" : "FAIL", where.c_str(), worst, worstName.c_str(), tol);
  return ok ? 0 : 1;
}

// f32 attention: cuDNN's SDPA has no f32 engines, so loading must fail with a message naming the
// op and the dtype (not a generic cuDNN error, nor a wrong result).
int runAttentionF32Refusal() {
  Case c("attention f32");
  const std::vector<int64_t> x{1, 2, 5, 8};
  c.kernel("attention", {c.in("q", x), c.in("k", x), c.in("v", x)}, {c.out("o", x), c.out("stats", {1, 2, 5, 1})},
           {{"scale", flt(0.25)}});
  auto gpu = createCudaBackend();
  const Status s = gpu->load(c.plan);
  const bool ok = !s && s.message().find("attention") != std::string::npos &&
                  s.message().find("f32") != std::string::npos;
  std::printf("%s %-50s %s\n", ok ? "PASS" : "FAIL", "attention f32 refused on cuda",
              s ? "loaded" : s.message().c_str());
  return ok ? 0 : 1;
}

// 8-bit images into an image input (castor/pixel_input.h): the device's conversion, from uploaded
// pixels and from the synthetic stream, equals the host's bit for bit, in each dtype and layout;
// the input reads back as the host converts it.
int runPixelCase(const char *layout, plan::DType dtype, bool synthetic) {
  const std::string where = std::string("pixels ") + (synthetic ? "synthetic " : "uploaded ") +
                            plan::dtypeName(dtype) + " [" + layout + "]";
  Case c("pixels");
  const uint32_t images = c.in("images", {3, 3, 5, 7}, dtype);
  const uint32_t y = c.out("y", {3, 3, 5, 7}, dtype);
  c.kernel("identity", {images}, {y});
  setenv("CASTOR_CUDA_LAYOUT", layout, 1);
  auto cpu = createCpuBackend();
  auto gpu = createCudaBackend();
  const PixelTransform transform = pixelTransform({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, 3);
  // Step k's pixels, the same for both backends.
  auto pixelsOf = [](int64_t step) {
    std::vector<uint8_t> p(3 * 5 * 7 * 3);
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = uint8_t((i * 37 + 11 + size_t(step) * 101) % 256);
    return p;
  };
  std::vector<std::vector<uint8_t>> outs, inputs;
  for (Backend *b : {cpu.get(), gpu.get()}) {
    const plan::Tensor &t = c.plan.tensors(int(images));
    Status s = b->load(c.plan);
    // Twice: a second batch replaces the first (the second step reads it).
    for (int64_t step = 0; s && step < 2; ++step) {
      const std::vector<uint8_t> pixels = pixelsOf(step);
      s = synthetic ? b->generatePixels(t, 9, 40 + step, transform) : b->uploadPixels(t, pixels.data(), transform);
      if (s)
        s = b->run();
    }
    std::vector<uint8_t> out(c.plan.tensors(int(y)).bytes()), in(t.bytes());
    if (s)
      s = b->download(y, out.data(), out.size());
    if (s)
      s = b->download(images, in.data(), in.size());
    if (!s) {
      std::printf("FAIL %-50s on %s: %s\n", where.c_str(), b->name().c_str(), s.message().c_str());
      return 1;
    }
    outs.push_back(out);
    inputs.push_back(in);
  }
  const bool ok = outs[0] == outs[1] && inputs[0] == inputs[1] && outs[0] == inputs[0];
  std::printf("%s %-50s %s\n", ok ? "PASS" : "FAIL", where.c_str(), ok ? "bit-identical" : "differs from the host's");
  return ok ? 0 : 1;
}

// Image files decoded and resized on the device (Backend::uploadEncodedImages) against the host
// (data::decodeEncodedBatch): with pixels the host decoded, the device's Pillow resize is
// bit-identical (crops, flips, CenterCrop with its padding, a padded image, copies).
std::vector<uint8_t> readBytes(const std::string &file) {
  std::vector<uint8_t> bytes;
  if (std::FILE *f = std::fopen(file.c_str(), "rb")) {
    for (int ch; (ch = std::fgetc(f)) != EOF;)
      bytes.push_back(uint8_t(ch));
    std::fclose(f);
  }
  return bytes;
}

// The batch through the CUDA backend as 8-bit values ([N, 3, H, W], scale 1, bias 0).
Status decodeOnDevice(const EncodedImageBatch &batch, std::vector<float> &got, double *hostMs = nullptr) {
  const int n = int(batch.images.size());
  Case c("decode");
  const uint32_t images = c.in("images", {n, 3, batch.outHeight, batch.outWidth}, plan::F32);
  const uint32_t y = c.out("y", {n, 3, batch.outHeight, batch.outWidth}, plan::F32);
  c.kernel("identity", {images}, {y});
  setenv("CASTOR_CUDA_LAYOUT", "nchw", 1);
  auto gpu = createCudaBackend();
  const PixelTransform identity = pixelTransform({0.0}, {1.0 / 255.0}, 3);
  CASTOR_RETURN_IF_ERROR(gpu->load(c.plan));
  CASTOR_RETURN_IF_ERROR(gpu->uploadEncodedImages(c.plan.tensors(int(images)), batch, identity));
  CASTOR_RETURN_IF_ERROR(gpu->run());
  got.assign(size_t(n) * 3 * size_t(batch.outHeight) * size_t(batch.outWidth), 0.0f);
  return gpu->download(y, got.data(), got.size() * sizeof(float));
}

// Largest and mean |device - host| of [N, 3, H, W] values against [N][H][W][3] bytes.
std::pair<int, double> compare(const std::vector<float> &got, const std::vector<uint8_t> &want, int hw) {
  int worst = 0;
  double sum = 0;
  const size_t n = got.size() / size_t(3 * hw);
  for (size_t i = 0; i < n; ++i)
    for (int ch = 0; ch < 3; ++ch)
      for (int p = 0; p < hw; ++p) {
        const int d = std::abs(int(got[(i * 3 + size_t(ch)) * size_t(hw) + size_t(p)]) -
                               int(want[(i * size_t(hw) + size_t(p)) * 3 + size_t(ch)]));
        worst = std::max(worst, d);
        sum += d;
      }
  return {worst, sum / double(got.size())};
}

int runDecodeResizeCase() {
  const std::string where = "decode resize (host-decoded pixels)";
  const std::string fixtures = "test/fixtures/images";
  const int out = 40;
  EncodedImageBatch batch;
  batch.outWidth = batch.outHeight = out;
  uint64_t rngState = 12345;
  auto uniform = [&] {
    rngState = rngState * 6364136223846793005ull + 1442695040888963407ull;
    return double(rngState >> 11) * 0x1.0p-53;
  };
  for (const char *name : {"rgb.jpg", "gray.jpg", "progressive444.jpg", "extraneous.jpg", "tall.png", "rgb.png",
                           "palette.png"}) {
    const std::string file = fixtures + "/" + name;
    const std::vector<uint8_t> bytes = readBytes(file);
    auto image = data::decodeImage(bytes.data(), bytes.size(), 3, file);
    if (!image) {
      std::printf("FAIL %-50s %s (run from the repository root)\n", where.c_str(), image.message().c_str());
      return 1;
    }
    for (int k = 0; k < 4; ++k) {
      EncodedImage e;
      e.name = file;
      e.width = image->width;
      e.height = image->height;
      e.pixels = image->pixels;
      if (k < 2) {
        const data::CropBox box = data::randomResizedCropBox(e.width, e.height, uniform);
        e.resize = data::planResizedCrop(e.width, e.height, box, out, out, uniform() < 0.5);
      } else {
        e.resize = data::planResizeCenterCrop(e.width, e.height, k == 2 ? out * 8 / 7 : out * 2, out);
      }
      batch.images.push_back(std::move(e));
    }
  }
  EncodedImage padding;
  padding.resize.empty = true;
  batch.images.push_back(padding);
  std::vector<float> got;
  std::vector<uint8_t> want;
  Status s = decodeOnDevice(batch, got);
  if (s)
    s = data::decodeEncodedBatch(batch, want);
  if (!s) {
    std::printf("FAIL %-50s %s\n", where.c_str(), s.message().c_str());
    return 1;
  }
  const auto [worst, mean] = compare(got, want, out * out);
  std::printf("%s %-50s %zu images, max |diff| %d (must be 0)\n", worst == 0 ? "PASS" : "FAIL", where.c_str(),
              batch.images.size(), worst);
  return worst == 0 ? 0 : 1;
}

// nvJPEG's decoding against libjpeg-turbo's (TurboJPEG, Pillow's decoder) on whole images: each
// JPEG alone, copied at its own size. libjpeg-turbo upsamples chroma with its "fancy" triangle
// filter; nvJPEG may not: each image is also compared with TurboJPEG's plain upsampling
// (TJFLAG_FASTUPSAMPLE). Bounds: a grayscale JPEG within the IDCTs' rounding (4 levels); a colour
// one within 8 levels of the nearer TurboJPEG mode. CASTOR_DECODE_TEST_DIR adds its *.jpg files.
int runDecodeJpegCase() {
  std::vector<std::string> files = {"test/fixtures/images/rgb.jpg", "test/fixtures/images/gray.jpg",
                                    "test/fixtures/images/progressive444.jpg"};
  if (const char *dir = std::getenv("CASTOR_DECODE_TEST_DIR"))
    for (int k = 0; k < 16; ++k) {
      char name[32];
      std::snprintf(name, sizeof name, "/%06d.jpg", k);
      if (!readBytes(std::string(dir) + name).empty())
        files.push_back(std::string(dir) + name);
    }
  int failures = 0;
  tjhandle tj = tjInitDecompress();
  for (const std::string &file : files) {
    const std::vector<uint8_t> bytes = readBytes(file);
    auto image = data::decodeImage(bytes.data(), bytes.size(), 3, file);
    if (!image) {
      std::printf("FAIL decode nvjpeg %-40s %s\n", file.c_str(), image.message().c_str());
      ++failures;
      continue;
    }
    const int w = image->width, h = image->height;
    std::vector<uint8_t> fast(size_t(w) * size_t(h) * 3);
    tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), fast.data(), w, 0, h, TJPF_RGB,
                  TJFLAG_FASTUPSAMPLE);
    EncodedImageBatch batch;
    batch.outWidth = w;
    batch.outHeight = h;
    EncodedImage e;
    e.name = file;
    e.width = w;
    e.height = h;
    e.jpeg = bytes;
    e.baseline = data::isBaselineJpeg(bytes.data(), bytes.size());
    e.resize = data::planResizedCrop(w, h, {0, 0, w, h}, w, h, false);
    batch.images.push_back(e);
    std::vector<float> got;
    if (Status s = decodeOnDevice(batch, got); !s) {
      std::printf("FAIL decode nvjpeg %-40s %s\n", file.c_str(), s.message().c_str());
      ++failures;
      continue;
    }
    const auto [worstFancy, meanFancy] = compare(got, image->pixels, w * h);
    const auto [worstFast, meanFast] = compare(got, fast, w * h);
    int hw = 0, hh = 0, subsampling = 0, colorspace = -1;
    tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &hw, &hh, &subsampling,
                        &colorspace);
    const bool gray = colorspace == TJCS_GRAY;
    const int worst = std::min(worstFancy, worstFast);
    const bool ok = gray ? worst <= 4 : worst <= 8;
    failures += !ok;
    std::printf("%s decode nvjpeg %-40s %dx%d %s%s: against fancy upsampling max %d mean %.3f, plain max %d mean "
                "%.3f\n",
                ok ? "PASS" : "FAIL", file.c_str(), w, h, e.baseline ? "baseline" : "not baseline",
                gray ? " gray" : "", worstFancy, meanFancy, worstFast, meanFast);
  }
  tjDestroy(tj);
  return failures;
}

// Decoding throughput on the device alone: CASTOR_DECODE_BENCH_DIR's JPEGs (DIR/<class>/*.jpg) in
// batches of 256 with RandomResizedCrop to 224 and flips, ten batches, timed.
int runDecodeBench() {
  const char *dir = std::getenv("CASTOR_DECODE_BENCH_DIR");
  if (!dir)
    return 0;
  std::vector<std::string> files;
  if (DIR *root = ::opendir(dir)) {
    std::vector<std::string> classes;
    while (const dirent *e = ::readdir(root))
      if (e->d_name[0] != '.')
        classes.push_back(std::string(dir) + "/" + e->d_name);
    ::closedir(root);
    std::sort(classes.begin(), classes.end());
    for (const std::string &c : classes)
      for (int k = 0; k < 8 && files.size() < 512; ++k) {
        char name[32];
        std::snprintf(name, sizeof name, "/%06d.jpg", k);
        if (!readBytes(c + name).empty())
          files.push_back(c + name);
      }
  }
  if (files.size() < 256) {
    std::printf("FAIL decode bench: %zu JPEGs under %s (<class>/NNNNNN.jpg)\n", files.size(), dir);
    return 1;
  }
  uint64_t rngState = 7;
  auto uniform = [&] {
    rngState = rngState * 6364136223846793005ull + 1442695040888963407ull;
    return double(rngState >> 11) * 0x1.0p-53;
  };
  std::vector<EncodedImageBatch> batches(2);
  for (int b = 0; b < 2; ++b) {
    batches[size_t(b)].outWidth = batches[size_t(b)].outHeight = 224;
    for (int i = 0; i < 256; ++i) {
      EncodedImage e;
      e.name = files[size_t(b * 256 + i) % files.size()];
      e.jpeg = readBytes(e.name);
      e.baseline = data::isBaselineJpeg(e.jpeg.data(), e.jpeg.size());
      auto size = data::imageSize(e.jpeg.data(), e.jpeg.size(), e.name);
      e.width = size->first;
      e.height = size->second;
      e.resize = data::planResizedCrop(e.width, e.height, data::randomResizedCropBox(e.width, e.height, uniform), 224,
                                       224, uniform() < 0.5);
      batches[size_t(b)].images.push_back(std::move(e));
    }
  }
  Case c("decode-bench");
  const uint32_t images = c.in("images", {256, 3, 224, 224}, plan::F16);
  const uint32_t y = c.out("y", {256, 3, 224, 224}, plan::F16);
  c.kernel("identity", {images}, {y});
  auto gpu = createCudaBackend();
  const PixelTransform transform = pixelTransform({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}, 3);
  Status s = gpu->load(c.plan);
  const plan::Tensor &t = c.plan.tensors(int(images));
  double hostMs = 0;
  auto start = std::chrono::steady_clock::now();
  const int rounds = 12;
  for (int r = 0; s && r < rounds; ++r) {
    if (r == 2) // after warm-up
      start = std::chrono::steady_clock::now(), hostMs = 0;
    const auto before = std::chrono::steady_clock::now();
    s = gpu->uploadEncodedImages(t, batches[size_t(r % 2)], transform);
    hostMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before).count();
    if (s)
      s = gpu->run();
  }
  std::vector<uint8_t> sink(t.bytes());
  if (s)
    s = gpu->download(y, sink.data(), sink.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!s) {
    std::printf("FAIL decode bench: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("INFO decode bench: %.0f images/s decoded and resized on the device; the calling thread spent %.1f ms "
              "a batch of 256\n",
              256.0 * (rounds - 2) / seconds, hostMs / (rounds - 2));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  int failures = 0, total = 0;
  for (const char *layout : {"nchw", "nhwc"})
    for (const Case &c : cases()) {
      if (c.name.find(only) == std::string::npos)
        continue;
      if (c.perFusedBn) {
        // "auto": CASTOR_FUSED_BN unset, the tuner's choice among the ways that take the layer;
        // then each way forced (where it does not take the layer, the composed one runs).
        for (const char *way : {"auto", "fused", "own", "conv-stats", "composed"}) {
          if (std::string(way) == "auto")
            unsetenv("CASTOR_FUSED_BN");
          else
            setenv("CASTOR_FUSED_BN", way, 1);
          failures += runCase(c, layout, std::string("fused bn ") + way);
          ++total;
        }
        unsetenv("CASTOR_FUSED_BN");
        continue;
      }
      if (!c.perBnApi) {
        failures += runCase(c, layout, "");
        ++total;
        continue;
      }
      // "tuned": CASTOR_BN_API unset, the tuner's choice (the tuning cache as configured).
      for (const char *api : {"ex", "graph", "tuned"}) {
        if (std::string(api) == "tuned")
          unsetenv("CASTOR_BN_API");
        else
          setenv("CASTOR_BN_API", api, 1);
        failures += runCase(c, layout, std::string("bn ") + api);
        ++total;
      }
      unsetenv("CASTOR_BN_API");
    }
  // A planted fault in one generated op (CASTOR_FUSED_ELEMENTWISE_FAULT: the first instruction's
  // result perturbed) must fail the comparison above, in both layouts.
  if (std::string("fused_elementwise fault").find(only) != std::string::npos || only.empty())
    for (const char *layout : {"nchw", "nhwc"})
      for (const test::FusedProgramCase &f : test::fusedProgramCases({3, 5, 7, 9})) {
        Case c("fused_elementwise fault " + f.name);
        c.outputs = test::addFusedCase(c, f, plan::F16, true).outputs;
        const std::string op = f.program.substr(f.program.find('=') + 2, f.program.find('(') - f.program.find('=') - 2);
        setenv("CASTOR_FUSED_ELEMENTWISE_FAULT", op.c_str(), 1);
        const bool caught = runCase(c, layout, "planted fault in " + op) != 0;
        unsetenv("CASTOR_FUSED_ELEMENTWISE_FAULT");
        std::printf("%s %-50s the planted fault %s\n", caught ? "PASS" : "FAIL", c.name.c_str(),
                    caught ? "fails the comparison" : "went unnoticed");
        failures += !caught;
        ++total;
      }
  if (std::string("attention f32").find(only) != std::string::npos || only.empty()) {
    failures += runAttentionF32Refusal();
    ++total;
  }
  if (std::string("pixels").find(only) != std::string::npos || only.empty())
    for (const char *layout : {"nchw", "nhwc"})
      for (plan::DType dtype : {plan::F32, plan::F16, plan::BF16})
        for (bool synthetic : {false, true}) {
          failures += runPixelCase(layout, dtype, synthetic);
          ++total;
        }
  if (std::string("decode").find(only) != std::string::npos || only.empty()) {
    failures += runDecodeResizeCase();
    failures += runDecodeJpegCase() > 0;
    failures += runDecodeBench();
    total += 3;
  }
  std::printf("%s: %d case(s), %d failing\n", failures ? "FAIL" : "PASS", total, failures);
  return failures ? 1 : 0;
}
