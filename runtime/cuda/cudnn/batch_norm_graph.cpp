// Batch normalization through cuDNN's graph API (cudnn-frontend v1): one graph per layer — a
// `batchnorm` node (training forward), `batchnorm_backward` or `batchnorm_inference` — with io in
// the data's dtype (f16, bf16 or f32), per-channel tensors and compute in FLOAT; each engine
// configuration from heuristics modes A and FALLBACK is a tuner candidate "graph:<engine tag>"
// that batch_norm.cpp weighs against the Ex API.
//
// Semantics as the plan defines them (and as the Ex API computes them):
// - training: y = scale * (x - mean) * inv + bias with the batch mean and inv = 1/sqrt(biased
//   variance + eps); the node's MEAN and INV_VARIANCE outputs are exactly the plan's saved
//   mean and inverse standard deviation. No running statistics: the compiler's plans update them
//   in batch_norm_running_update (kernels that update them themselves take the Ex API).
// - backward: the node takes the saved mean and inverse standard deviation (no epsilon).
// - inference: the node takes the mean and the inverse standard deviation, not the variance, and
//   no epsilon: each run first computes 1/sqrt(var + eps) per channel (own kernel, reduce.cu)
//   into a buffer of the layer's.
// Engines noted DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION are never used (statistics in
// fp32), nor TENSOR_CORE ones for fp32 data (no TF32), nor, under ctx.deterministic,
// NONDETERMINISTIC ones.
#include "cuda/cudnn/batch_norm.h"
#include "cuda/kernels/reduce.h"
#include "cuda/cudnn/cudnn_graph.h"
#include "cuda/kernels/builders.h"

#include <exception>
#include <memory>
#include <unordered_map>

namespace castor::cuda::bn {
namespace {

namespace fe = cudnn_frontend;
using frontend::feStatus;
using frontend::feType;
using plan::Tensor;

// Tensor uids of the graph (the variant pack maps them to device pointers).
constexpr int64_t kUidX = 1, kUidY = 2, kUidScale = 3, kUidBias = 4, kUidMean = 5, kUidInvStd = 6, kUidEps = 7,
                  kUidDx = 8, kUidDscale = 9, kUidDbias = 10;

// Element strides of a logical [N,C,H,W] tensor as it is stored (NCHW or channels-last).
std::vector<int64_t> strides(const Shape &d, bool nhwc) {
  if (nhwc)
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

struct Builder {
  const Problem &p;
  std::shared_ptr<frontend::PlanGraph> g;
  Shape perChannel;

  // The data tensor (x, dy) or a per-channel one ([1,C,1,1] f32), in the data's layout.
  std::shared_ptr<fe::graph::Tensor_attributes> data(const char *name, int64_t uid) const {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(p.dims)
                         .set_stride(strides(p.dims, p.nhwc))
                         .set_data_type(feType(p.dtype)));
  }
  std::shared_ptr<fe::graph::Tensor_attributes> channel(const char *name, int64_t uid) const {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(perChannel)
                         .set_stride(strides(perChannel, p.nhwc))
                         .set_data_type(fe::DataType_t::FLOAT));
  }
  void asData(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid) const {
    t->set_output(true).set_uid(uid).set_dim(p.dims).set_stride(strides(p.dims, p.nhwc)).set_data_type(
        feType(p.dtype));
  }
  void asChannel(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid) const {
    t->set_output(true)
        .set_uid(uid)
        .set_dim(perChannel)
        .set_stride(strides(perChannel, p.nhwc))
        .set_data_type(fe::DataType_t::FLOAT);
  }

  void training() const {
    auto X = data("x", kUidX);
    auto scale = channel("scale", kUidScale), bias = channel("bias", kUidBias);
    // Epsilon passed by value (a host float the graph keeps and hands to cuDNN at each run).
    auto eps = g->tensor(fe::graph::Tensor_attributes(float(p.epsilon)).set_name("epsilon").set_uid(kUidEps));
    auto outs = g->batchnorm(X, scale, bias, fe::graph::Batchnorm_attributes().set_name("bn").set_epsilon(eps));
    asData(outs[0], kUidY);
    asChannel(outs[1], kUidMean);
    asChannel(outs[2], kUidInvStd);
  }
  void backward() const {
    auto DY = data("dy", kUidY), X = data("x", kUidX);
    auto scale = channel("scale", kUidScale), mean = channel("mean", kUidMean), inv = channel("inv_std", kUidInvStd);
    auto outs = g->batchnorm_backward(
        DY, X, scale,
        fe::graph::Batchnorm_backward_attributes().set_name("dbn").set_saved_mean_and_inv_variance(mean, inv));
    asData(outs[0], kUidDx);
    asChannel(outs[1], kUidDscale);
    asChannel(outs[2], kUidDbias);
  }
  void inference() const {
    auto X = data("x", kUidX);
    auto mean = channel("mean", kUidMean), inv = channel("inv_std", kUidInvStd);
    auto scale = channel("scale", kUidScale), bias = channel("bias", kUidBias);
    auto Y = g->batchnorm_inference(X, mean, inv, scale, bias,
                                    fe::graph::Batchnorm_inference_attributes().set_name("bn_inference"));
    asData(Y, kUidY);
  }
};

// The layer's graph, lowered to cuDNN and with its engine configurations queried (none built).
Expected<std::shared_ptr<frontend::PlanGraph>> makeGraph(DeviceContext &ctx, const Problem &p) {
  Builder b{p, std::make_shared<frontend::PlanGraph>(), Shape{1, p.dims[1], 1, 1}};
  b.g->set_io_data_type(feType(p.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (p.pass == Pass::Training)
    b.training();
  else if (p.pass == Pass::Backward)
    b.backward();
  else
    b.inference();
  CASTOR_RETURN_IF_ERROR(feStatus(b.g->validate(), "validate"));
  CASTOR_RETURN_IF_ERROR(feStatus(b.g->build_operation_graph(ctx.cudnn), "build_operation_graph"));
  CASTOR_RETURN_IF_ERROR(
      feStatus(b.g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans"));
  // Filters apply to the configurations just queried (so they come after the query).
  std::vector<fe::NumericalNote_t> barred{fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                                          fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
  if (p.dtype == plan::F32)
    barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
  if (ctx.deterministic)
    barred.push_back(fe::NumericalNote_t::NONDETERMINISTIC);
  b.g->deselect_numeric_notes(barred);
  b.g->deselect_workspace_greater_than(int64_t(ctx.workspaceLimit));
  return b.g;
}

// The variant pack of the layer's graph: its operands in the arena (and, for inference, the
// inverse standard deviation in `invStd`).
frontend::PackFn packOf(DeviceContext &ctx, const Problem &p, void *invStd) {
  DeviceContext *c = &ctx;
  const TensorList in = p.in, out = p.out;
  switch (p.pass) {
  case Pass::Training:
    return [c, in, out]() {
      return std::unordered_map<int64_t, void *>{{kUidX, c->ptr(in[0])},     {kUidScale, c->ptr(in[1])},
                                                 {kUidBias, c->ptr(in[2])},  {kUidY, c->ptr(out[0])},
                                                 {kUidMean, c->ptr(out[1])}, {kUidInvStd, c->ptr(out[2])}};
    };
  case Pass::Backward:
    return [c, in, out]() {
      return std::unordered_map<int64_t, void *>{
          {kUidY, c->ptr(in[0])},    {kUidX, c->ptr(in[1])},      {kUidScale, c->ptr(in[2])},
          {kUidMean, c->ptr(in[3])}, {kUidInvStd, c->ptr(in[4])}, {kUidDx, c->ptr(out[0])},
          {kUidDscale, c->ptr(out[1])}, {kUidDbias, c->ptr(out[2])}};
    };
  case Pass::Inference:
    break;
  }
  return [c, in, out, invStd]() {
    return std::unordered_map<int64_t, void *>{{kUidX, c->ptr(in[0])},    {kUidScale, c->ptr(in[1])},
                                               {kUidBias, c->ptr(in[2])}, {kUidMean, c->ptr(in[3])},
                                               {kUidInvStd, invStd},      {kUidY, c->ptr(out[0])}};
  };
}

// Inference candidates: 1/sqrt(var + eps) into `invStd` before the graph runs.
void prependInvStd(DeviceContext &ctx, const Problem &p, float *invStd, std::vector<tuning::Candidate> &candidates) {
  DeviceContext *c = &ctx;
  const Tensor *var = p.in[4];
  const int64_t C = p.dims[1];
  const double eps = p.epsilon;
  for (tuning::Candidate &candidate : candidates) {
    auto build = std::move(candidate.build);
    candidate.build = [c, var, C, eps, invStd, build]() -> Expected<tuning::Executable> {
      auto e = build();
      if (!e)
        return e;
      auto run = std::move(e->run);
      e->run = [c, var, C, eps, invStd, run](void *workspace) -> Status {
        CASTOR_RETURN_IF_ERROR(
            cudaStatus(batchNormInvStd(c->ref(var), invStd, C, eps, c->stream), "batch norm inverse std"));
        return run(workspace);
      };
      return e;
    };
  }
}

} // namespace

Expected<std::vector<tuning::Candidate>> graphCandidates(DeviceContext &ctx, const Problem &p) {
  if (p.dtype != plan::F16 && p.dtype != plan::BF16 && p.dtype != plan::F32)
    return Status::error("the cuDNN graph API path runs f16, bf16 and f32 batch norms");
  if (p.runningUpdate)
    return Status::error("the cuDNN graph API path does not update running statistics");
  float *invStd = nullptr;
  if (p.pass == Pass::Inference) {
    auto buffer = own::scratchFor(ctx, own::kTagBnInvStd, p.out[0], size_t(p.dims[1]) * sizeof(float));
    if (!buffer)
      return buffer.status();
    invStd = static_cast<float *>(*buffer);
  }
  std::vector<tuning::Candidate> candidates;
  try {
    auto g = makeGraph(ctx, p);
    if (!g)
      return g.status();
    candidates = frontend::engineCandidates(ctx, *g, "graph:", packOf(ctx, p, invStd));
  } catch (const std::exception &ex) {
    return Status::error(std::string("cuDNN graph: ") + ex.what());
  }
  if (candidates.empty())
    return Status::error("cuDNN's heuristics offer no engine");
  if (invStd)
    prependInvStd(ctx, p, invStd, candidates);
  return candidates;
}

} // namespace castor::cuda::bn
