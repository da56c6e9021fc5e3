// attention and attention_backward through cuDNN's fused scaled-dot-product attention
// (cudnn-frontend v1's `sdpa` and `sdpa_backward` nodes): one graph per layer, io in the operands'
// dtype, intermediate and compute FLOAT, its engine configurations from heuristics modes A and
// FALLBACK, each a tuner candidate "sdpa:<engine tag>" timed once per layer signature and GPU
// (tuning/tuner.h), as the convolutions are.
//
// Semantics (plan/ops.md): the forward writes o and stats, the log-sum-exp of each row of the
// scaled scores (cuDNN's "softmax stats", f32 [B,H,Sq,1]); the backward reads them back. Every
// operand is dense row-major [B,H,S,D] (layout_assignment.cpp keeps attention's operands out of
// channels-last).
//
// cuDNN's SDPA runs f16 and bf16 only (the compiler emits attention for those); f32 or f64
// attention is refused with a message naming the op and dtype. Head dimensions must be multiples
// of 8 and at most 128 (256 on some GPUs): the frontend's validation says which, and the builder
// reports it. Under ctx.deterministic the backward asks for cuDNN's deterministic algorithm and
// NONDETERMINISTIC engines are barred.
//
// Caveat: with cuDNN 9.15.0 or older and Sk not a multiple of 128, the frontend adds a padding
// mask itself and copies its sequence lengths from host memory at every execute, which a CUDA
// graph capture may refuse; cuDNN 9.19 (scripts/setup.sh) needs no such mask.
#include "cuda/cudnn/builders.h"
#include "cuda/cudnn/cudnn_graph.h"
#include "cuda/tuning/tuner.h"

#include "castor/shape_rules.h"
#include "plan/op_attrs.h"

#include <exception>
#include <memory>
#include <string>
#include <unordered_map>

namespace castor::cuda {
namespace {

namespace fe = cudnn_frontend;
using frontend::feStatus;
using frontend::feType;
using plan::OpId;
using plan::Tensor;

// Tensor uids of the graph (the variant pack maps them to arena pointers).
constexpr int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidStats = 5, kUidDo = 6, kUidDq = 7, kUidDk = 8,
                  kUidDv = 9;

// One attention layer: its operands in the plan's order and their shapes.
struct Problem {
  bool backward = false;
  std::string label; // the kernel's name, else its op
  plan::DType dtype = plan::F16;
  double scale = 1.0;
  Shape q, k, v, o, stats;
  TensorList in, out;
};

// "attention (kernel 'blocks.0.attn')": how messages name the layer.
std::string where(const plan::Kernel &k) { return k.op() + (k.name().empty() ? "" : " (kernel '" + k.name() + "')"); }

Expected<Problem> parse(const DeviceContext &ctx, const plan::Kernel &k, const TensorList &in, const TensorList &out) {
  Problem p;
  p.backward = opOf(k) == OpId::AttentionBackward;
  if (in.size() != (p.backward ? 6u : 3u) || out.size() != (p.backward ? 3u : 2u))
    return Status::error(where(k) + ": takes " + (p.backward ? "q, k, v, o, stats, dO -> dq, dk, dv" : "q, k, v -> o, stats"));
  auto attrs = plan::parseAttention(k);
  if (!attrs)
    return attrs.status().withContext(where(k));
  p.label = k.name().empty() ? k.op() : k.name();
  p.scale = attrs->scale;
  p.in = in;
  p.out = out;
  p.dtype = in[0]->dtype();
  const Tensor *o = p.backward ? in[3] : out[0], *stats = p.backward ? in[4] : out[1];
  if (p.dtype != plan::F16 && p.dtype != plan::BF16)
    return Status::error(where(k) + ": the CUDA backend runs attention through cuDNN's SDPA, which takes f16 and bf16 "
                                    "operands only, got " +
                         plan::dtypeName(p.dtype) + " (the CPU backend runs any float dtype)");
  TensorList data{in[0], in[1], in[2], o};
  if (p.backward)
    data.insert(data.end(), {in[5], out[0], out[1], out[2]});
  for (const Tensor *t : data)
    if (t->dtype() != p.dtype)
      return Status::error(where(k) + ": q, k, v, o and their gradients must share one dtype, got " +
                           plan::dtypeName(p.dtype) + " and " + plan::dtypeName(t->dtype()));
  if (stats->dtype() != plan::F32)
    return Status::error(where(k) + ": stats must be f32, got " + plan::dtypeName(stats->dtype()));
  data.push_back(stats);
  for (const Tensor *t : data)
    if (ctx.channelsLast(t))
      return Status::error(where(k) + ": operand " + std::to_string(t->id()) +
                           " is stored channels-last; cuDNN's SDPA needs row-major [B,H,S,D]");
  p.q = shapeOf(*in[0]), p.k = shapeOf(*in[1]), p.v = shapeOf(*in[2]);
  auto r = shape::attention(p.q, p.k, p.v, &p.stats);
  if (!r)
    return Status::error(where(k) + ": " + r.error);
  p.o = r.shape;
  if (shapeOf(*o) != p.o || shapeOf(*stats) != p.stats)
    return Status::error(where(k) + ": o must be [" + dimsList(p.o) + "] and stats [" + dimsList(p.stats) + "]");
  return p;
}

std::string signature(const Problem &p) {
  return std::string("attention.") + (p.backward ? "bwd" : "fwd") + "|" + plan::dtypeName(p.dtype) + "|q=" +
         dimsList(p.q) + "|k=" + dimsList(p.k) + "|v=" + dimsList(p.v);
}

// A dense row-major tensor of the graph.
fe::graph::Tensor_attributes tensorAttrs(const char *name, int64_t uid, const Shape &dims, fe::DataType_t type) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim(dims)
      .set_stride(shape::rowMajorStrides(dims))
      .set_data_type(type);
}

void asOutput(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid, const Shape &dims,
              fe::DataType_t type) {
  t->set_output(true).set_uid(uid).set_dim(dims).set_stride(shape::rowMajorStrides(dims)).set_data_type(type);
}

// The layer's graph, lowered to cuDNN and with its engine configurations queried (none built).
Expected<std::shared_ptr<frontend::PlanGraph>> makeGraph(DeviceContext &ctx, const Problem &p) {
  auto g = std::make_shared<frontend::PlanGraph>();
  const fe::DataType_t type = feType(p.dtype), f32 = fe::DataType_t::FLOAT;
  g->set_io_data_type(type).set_intermediate_data_type(f32).set_compute_data_type(f32);
  auto Q = g->tensor(tensorAttrs("q", kUidQ, p.q, type));
  auto K = g->tensor(tensorAttrs("k", kUidK, p.k, type));
  auto V = g->tensor(tensorAttrs("v", kUidV, p.v, type));
  if (!p.backward) {
    auto outs = g->sdpa(
        Q, K, V, fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(float(p.scale)));
    asOutput(outs[0], kUidO, p.o, type);
    asOutput(outs[1], kUidStats, p.stats, f32);
  } else {
    auto O = g->tensor(tensorAttrs("o", kUidO, p.o, type));
    auto dO = g->tensor(tensorAttrs("dO", kUidDo, p.o, type));
    auto stats = g->tensor(tensorAttrs("stats", kUidStats, p.stats, f32));
    auto grads = g->sdpa_backward(Q, K, V, O, dO, stats,
                                  fe::graph::SDPA_backward_attributes()
                                      .set_name("sdpa_backward")
                                      .set_attn_scale(float(p.scale))
                                      .set_deterministic_algorithm(ctx.deterministic));
    asOutput(grads[0], kUidDq, p.q, type);
    asOutput(grads[1], kUidDk, p.k, type);
    asOutput(grads[2], kUidDv, p.v, type);
  }
  // validate() is where the frontend checks SDPA's support surface (head dimensions, GPU).
  CASTOR_RETURN_IF_ERROR(feStatus(g->validate(), "cuDNN's SDPA does not take this attention"));
  CASTOR_RETURN_IF_ERROR(feStatus(g->build_operation_graph(ctx.cudnn), "build_operation_graph"));
  CASTOR_RETURN_IF_ERROR(
      feStatus(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans"));
  // Filters apply to the configurations just queried (so they come after the query).
  if (ctx.deterministic)
    g->deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  g->deselect_workspace_greater_than(int64_t(ctx.workspaceLimit));
  CASTOR_RETURN_IF_ERROR(feStatus(g->check_support(), "cuDNN has no SDPA engine for this attention"));
  return g;
}

frontend::PackFn packOf(DeviceContext &ctx, const Problem &p) {
  DeviceContext *c = &ctx;
  const TensorList in = p.in, out = p.out;
  if (!p.backward)
    return [c, in, out]() {
      return std::unordered_map<int64_t, void *>{{kUidQ, c->ptr(in[0])},
                                                 {kUidK, c->ptr(in[1])},
                                                 {kUidV, c->ptr(in[2])},
                                                 {kUidO, c->ptr(out[0])},
                                                 {kUidStats, c->ptr(out[1])}};
    };
  return [c, in, out]() {
    return std::unordered_map<int64_t, void *>{
        {kUidQ, c->ptr(in[0])},     {kUidK, c->ptr(in[1])},  {kUidV, c->ptr(in[2])},
        {kUidO, c->ptr(in[3])},     {kUidStats, c->ptr(in[4])}, {kUidDo, c->ptr(in[5])},
        {kUidDq, c->ptr(out[0])},   {kUidDk, c->ptr(out[1])}, {kUidDv, c->ptr(out[2])}};
  };
}

} // namespace

Expected<RunFn> buildAttention(DeviceContext &ctx, const plan::Kernel &k, const TensorList &in,
                               const TensorList &out) {
  auto p = parse(ctx, k, in, out);
  if (!p)
    return p.status();
  const std::string layer = where(k) + " " + signature(*p);
  std::vector<tuning::Candidate> candidates;
  try {
    auto g = makeGraph(ctx, *p);
    if (!g)
      return g.status().withContext(layer);
    candidates = frontend::engineCandidates(ctx, *g, "sdpa:", packOf(ctx, *p), signature(*p));
  } catch (const std::exception &ex) {
    return Status::error(layer + ": cuDNN graph: " + ex.what());
  }
  if (candidates.empty())
    return Status::error(layer + ": cuDNN's heuristics offer no SDPA engine");
  auto choice = tuning::choose(ctx, signature(*p), candidates);
  if (!choice)
    return choice.status().withContext(layer);
  ctx.requestWorkspace(choice->executable.workspaceBytes);
  DeviceContext *c = &ctx;
  auto run = std::move(choice->executable.run);
  // ctx.workspace is allocated after every kernel is built: read it when running.
  return RunFn([c, run]() { return run(c->workspace); });
}

} // namespace castor::cuda
