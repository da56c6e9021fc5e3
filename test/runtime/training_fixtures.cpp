#include "training_fixtures.h"

#include <zlib.h>

#include <fstream>
#include <map>
#include <tuple>

namespace castor::test {

using K = plan::Tensor;

// A small CNN's training step, as the compiler emits it: conv (stride 2) -> batch norm -> relu ->
// max pool -> flatten -> dropout -> linear -> cross-entropy; backward; SGD (Nesterov momentum,
// weight decay) on the conv and BN parameters, AdamW on the linear layer, a cosine schedule,
// running statistics, the counters. With `fused`, the batch norm and relu (forward and backward)
// are one fused kernel each.
plan::Plan trainingPlan(int64_t batch, bool fused) {
  castor::test::PlanBuilder b;
  auto add = [&](const std::string &name, std::vector<int64_t> shape, K::Kind kind, plan::DType dt = plan::F32) {
    return b.tensor(name, shape, kind, dt);
  };
  const int64_t N = batch;
  auto images = add("images", {N, 1, 28, 28}, K::INPUT);
  auto labels = add("labels", {N}, K::INPUT, plan::I64);
  auto cw = add("conv.weight", {2, 1, 3, 3}, K::PARAMETER), g = add("bn.weight", {2}, K::PARAMETER),
       be = add("bn.bias", {2}, K::PARAMETER), fw = add("fc.weight", {10, 98}, K::PARAMETER),
       fb = add("fc.bias", {10}, K::PARAMETER);
  auto rm = add("bn.running_mean", {2}, K::STATE), rv = add("bn.running_var", {2}, K::STATE);
  auto it = add("castor.iteration", {}, K::STATE, plan::I64), step = add("castor.optimizer_step", {}, K::STATE, plan::I64);
  b.parameter("conv.weight", cw, plan::Parameter::KAIMING_NORMAL, 9, 18);
  b.parameter("bn.weight", g, plan::Parameter::ONES);
  b.parameter("bn.bias", be, plan::Parameter::ZEROS);
  b.parameter("fc.weight", fw, plan::Parameter::LINEAR_UNIFORM, 98, 10);
  b.parameter("fc.bias", fb, plan::Parameter::LINEAR_UNIFORM, 98, 10);
  b.parameter("bn.running_mean", rm, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("bn.running_var", rv, plan::Parameter::ONES).set_trainable(false);
  b.parameter("castor.iteration", it, plan::Parameter::ZEROS).set_trainable(false);
  b.parameter("castor.optimizer_step", step, plan::Parameter::ZEROS).set_trainable(false);
  std::map<uint32_t, std::vector<uint32_t>> buffers;
  for (auto [name, id, n] : std::vector<std::tuple<std::string, uint32_t, int>>{
           {"conv.weight", cw, 1}, {"bn.weight", g, 1}, {"bn.bias", be, 1}, {"fc.weight", fw, 2}, {"fc.bias", fb, 2}}) {
    const plan::Tensor &t = b.plan.tensors(int(id));
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    for (int i = 0; i < n; ++i) {
      std::string bn = name + (n == 1 ? ".momentum_buffer" : i == 0 ? ".exp_avg" : ".exp_avg_sq");
      auto buf = add(bn, shape, K::STATE);
      b.parameter(bn, buf, plan::Parameter::ZEROS).set_trainable(false);
      buffers[id].push_back(buf);
    }
  }
  auto act = [&](const std::string &name, std::vector<int64_t> shape, plan::DType dt = plan::F32) {
    return add(name, shape, K::ACTIVATION, dt);
  };
  std::map<std::string, plan::Attr> conv{{"strides", plan::intsAttr({2, 2})}, {"pads", plan::intsAttr({1, 1, 1, 1})}};
  std::map<std::string, plan::Attr> pool{{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})}};
  std::map<std::string, plan::Attr> drop{
      {"ratio", plan::floatAttr(0.25)}, {"seed", plan::intAttr(3)}, {"salt", plan::intAttr(1)}};
  auto c = act("conv_out", {N, 2, 14, 14}), y = fused ? 0u : act("bn_out", {N, 2, 14, 14}), mean = act("bn_mean", {2}),
       inv = act("bn_inv_std", {2}), r = act("relu_out", {N, 2, 14, 14}), p = act("pool_out", {N, 2, 7, 7}),
       f = act("flat", {N, 98}), d = act("drop", {N, 98}), logits = act("logits", {N, 10});
  auto loss = add("loss", {}, K::OUTPUT), correct = add("correct", {}, K::OUTPUT, plan::I64);
  b.kernel("conv2d", {images, cw}, {c}, conv);
  if (fused) {
    b.kernel("batch_norm_relu_training", {c, g, be}, {r, mean, inv}).set_name("bn + relu");
  } else {
    b.kernel("batch_norm_training", {c, g, be, rm, rv}, {y, mean, inv});
    b.kernel("relu", {y}, {r});
  }
  b.kernel("max_pool2d", {r}, {p}, pool);
  b.kernel("flatten", {p}, {f});
  b.kernel("dropout", {f, it}, {d}, drop);
  b.kernel("gemm", {d, fw, fb}, {logits}, {{"trans_b", plan::boolAttr(true)}});
  b.kernel("softmax_cross_entropy", {logits, labels}, {loss});
  b.kernel("count_correct", {logits, labels}, {correct});
  // Backward.
  auto one = act("dloss", {}), dlogits = act("dlogits", {N, 10}), dfw = act("fc.weight.grad", {10, 98}),
       dfb = act("fc.bias.grad", {10}), dd = act("ddrop", {N, 98}), df = act("dflat", {N, 98}),
       dp = act("dpool", {N, 2, 7, 7}), dr = act("drelu", {N, 2, 14, 14}), dy = fused ? 0u : act("dbn", {N, 2, 14, 14}),
       dc = act("dconv", {N, 2, 14, 14}), dg = act("bn.weight.grad", {2}), db = act("bn.bias.grad", {2}),
       dcw = act("conv.weight.grad", {2, 1, 3, 3});
  b.kernel("fill", {}, {one}, {{"value", plan::floatAttr(1.0)}});
  b.kernel("softmax_cross_entropy_backward", {one, logits, labels}, {dlogits});
  b.kernel("gemm", {dlogits, d}, {dfw}, {{"trans_a", plan::boolAttr(true)}});
  b.kernel("reduce_sum_to", {dlogits}, {dfb});
  b.kernel("gemm", {dlogits, fw}, {dd});
  b.kernel("dropout_backward", {dd, it}, {df}, drop);
  b.kernel("reshape", {df}, {dp});
  b.kernel("max_pool2d_backward", {dp, r}, {dr}, pool);
  if (fused) {
    b.kernel("batch_norm_relu_training_backward", {dr, c, r, g, be, mean, inv}, {dc, dg, db}).set_name("bn + relu");
  } else {
    b.kernel("relu_backward", {dr, r}, {dy});
    b.kernel("batch_norm_training_backward", {dy, c, g, mean, inv}, {dc, dg, db});
  }
  b.kernel("conv2d_backward_filter", {images, dc}, {dcw}, conv);
  // Optimizer.
  auto lr = act("lr", {});
  b.kernel("lr_schedule", {it}, {lr},
           {{"kind", plan::stringAttr("cosine")}, {"base_lr", plan::floatAttr(0.05)}, {"warmup_steps", plan::intAttr(2)},
            {"total_steps", plan::intAttr(20)}});
  b.kernel("increment", {step}, {step});
  std::map<std::string, plan::Attr> sgd{{"momentum", plan::floatAttr(0.9)}, {"nesterov", plan::boolAttr(true)},
                                        {"weight_decay", plan::floatAttr(1e-4)}};
  for (auto [param, grad] : std::vector<std::pair<uint32_t, uint32_t>>{{cw, dcw}, {g, dg}, {be, db}})
    b.kernel("sgd_update", {param, grad, buffers[param][0], lr, step}, {param, buffers[param][0]}, sgd);
  for (auto [param, grad] : std::vector<std::pair<uint32_t, uint32_t>>{{fw, dfw}, {fb, dfb}})
    b.kernel("adamw_update", {param, grad, buffers[param][0], buffers[param][1], lr, step},
             {param, buffers[param][0], buffers[param][1]});
  b.kernel("batch_norm_running_update", {rm, rv, mean, inv}, {rm, rv}, {{"count", plan::intAttr(N * 14 * 14)}});
  b.kernel("increment", {it}, {it});
  return b.plan;
}

// The same model's inference form: images -> logits "output".
plan::Plan forwardPlan(int64_t N) {
  castor::test::PlanBuilder b;
  auto images = b.tensor("images", {N, 1, 28, 28}, K::INPUT);
  auto cw = b.tensor("conv.weight", {2, 1, 3, 3}, K::PARAMETER), g = b.tensor("bn.weight", {2}, K::PARAMETER),
       be = b.tensor("bn.bias", {2}, K::PARAMETER), fw = b.tensor("fc.weight", {10, 98}, K::PARAMETER),
       fb = b.tensor("fc.bias", {10}, K::PARAMETER), rm = b.tensor("bn.running_mean", {2}, K::STATE),
       rv = b.tensor("bn.running_var", {2}, K::STATE);
  for (auto [name, id] : std::vector<std::pair<std::string, uint32_t>>{{"conv.weight", cw}, {"bn.weight", g},
                                                                       {"bn.bias", be}, {"fc.weight", fw},
                                                                       {"fc.bias", fb}, {"bn.running_mean", rm},
                                                                       {"bn.running_var", rv}})
    b.parameter(name, id, plan::Parameter::FILE);
  auto c = b.tensor("conv_out", {N, 2, 14, 14}, K::ACTIVATION), y = b.tensor("bn_out", {N, 2, 14, 14}, K::ACTIVATION),
       r = b.tensor("relu_out", {N, 2, 14, 14}, K::ACTIVATION), p = b.tensor("pool_out", {N, 2, 7, 7}, K::ACTIVATION),
       f = b.tensor("flat", {N, 98}, K::ACTIVATION), out = b.tensor("output", {N, 10}, K::OUTPUT);
  b.kernel("conv2d", {images, cw}, {c}, {{"strides", plan::intsAttr({2, 2})}, {"pads", plan::intsAttr({1, 1, 1, 1})}});
  b.kernel("batch_norm_inference", {c, g, be, rm, rv}, {y});
  b.kernel("relu", {y}, {r});
  b.kernel("max_pool2d", {r}, {p}, {{"kernel", plan::intsAttr({2, 2})}, {"strides", plan::intsAttr({2, 2})}});
  b.kernel("flatten", {p}, {f});
  b.kernel("gemm", {f, fw, fb}, {out}, {{"trans_b", plan::boolAttr(true)}});
  return b.plan;
}

// IDX files of `count` 28x28 images whose class shows as a bright 4x4 block at a class-specific
// place (learnable in a few steps), gzipped or plain.
void writeIdxSet(const std::string &dir, const std::string &prefix, int count, bool gz) {
  std::string images, labels;
  auto be32 = [](std::string &s, uint32_t v) {
    for (int i = 3; i >= 0; --i)
      s.push_back(char(uint8_t(v >> (8 * i))));
  };
  images += std::string("\0\0\x08\x03", 4);
  be32(images, uint32_t(count));
  be32(images, 28);
  be32(images, 28);
  labels += std::string("\0\0\x08\x01", 4);
  be32(labels, uint32_t(count));
  for (int n = 0; n < count; ++n) {
    const int cls = (n * 7) % 10;
    labels.push_back(char(cls));
    for (int h = 0; h < 28; ++h)
      for (int w = 0; w < 28; ++w) {
        const bool on = h / 4 == cls % 7 && w / 4 == (cls * 3) % 7;
        images.push_back(char(uint8_t(on ? 250 : (h * 28 + w + n) % 17)));
      }
  }
  for (auto &[name, bytes] : {std::pair{prefix + "-images-idx3-ubyte", images}, std::pair{prefix + "-labels-idx1-ubyte", labels}}) {
    std::string path = dir + "/" + name + (gz ? ".gz" : "");
    if (gz) {
      gzFile f = gzopen(path.c_str(), "wb");
      REQUIRE(f);
      REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
      REQUIRE(gzclose(f) == Z_OK);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
  }
}

} // namespace castor::test
