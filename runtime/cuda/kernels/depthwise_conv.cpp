// Castor's depthwise convolution kernels (kernels/depthwise_conv.h) as candidates of the
// convolution tuner, the tiles and, where they take the layer, the row kernels: a layer they take
// races them against cuDNN's engines (cudnn/convolution*.cpp),
// and the tuning cache records which won under a key that says they ran (ownCandidatesTag).
#include "cuda/cudnn/convolution.h"
#include "cuda/kernels/depthwise_conv.h"

#include <cstdlib>
#include <cstring>

namespace castor::cuda::conv {
namespace {

enum class Mode { Race, Off, Only, Tiles };

// CASTOR_CONV_DEPTHWISE: 0 (or off) never offers the kernels, `only` offers them alone wherever
// they take the layer (tests, comparisons), `tiles` races the tile kernels alone against cuDNN's
// engines (the row kernels' before and after); unset, every kernel races cuDNN's engines.
Mode mode() {
  const char *v = std::getenv("CASTOR_CONV_DEPTHWISE");
  if (!v || !*v)
    return Mode::Race;
  if (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0)
    return Mode::Off;
  if (std::strcmp(v, "only") == 0)
    return Mode::Only;
  if (std::strcmp(v, "tiles") == 0)
    return Mode::Tiles;
  return Mode::Race;
}

// The version of the kernels the tuning key names: raise it when a change of the kernels should
// make every layer that cached a choice time them again.
constexpr const char *kTag = "|own=dwconv2";
constexpr const char *kName = "castor:dwconv";
constexpr const char *kRowsName = "castor:dwconv-rows";

depthwise::Pass depthwisePass(Pass p) {
  switch (p) {
  case Pass::Forward:
    return depthwise::Pass::Forward;
  case Pass::BackwardData:
    return depthwise::Pass::BackwardData;
  case Pass::BackwardFilter:
    return depthwise::Pass::BackwardFilter;
  }
  return depthwise::Pass::Forward;
}

} // namespace

Expected<depthwise::Geometry> depthwiseGeometry(const Problem &p) {
  if (p.dtype != plan::F16 && p.dtype != plan::BF16 && p.dtype != plan::F32)
    return Status::error("dtype " + plan::dtypeName(p.dtype));
  const int64_t C = p.xs[1];
  if (p.groups != C || p.ws[0] != C || p.ws[1] != 1 || p.ys[1] != C)
    return Status::error("not depthwise (groups = C = K, one channel per group)");
  if (p.ws[2] != p.ws[3] || p.strideH != p.strideW || p.dilationH != 1 || p.dilationW != 1)
    return Status::error("a non-square kernel or stride, or a dilation");
  if (!p.xNhwc || !p.yNhwc || (p.accumulate && !p.accumulateNhwc))
    return Status::error("operands not stored channels-last");
  depthwise::Geometry g;
  g.N = p.xs[0], g.C = C, g.H = p.xs[2], g.W = p.xs[3], g.P = p.ys[2], g.Q = p.ys[3];
  g.K = int(p.ws[2]), g.stride = int(p.strideH), g.padH = int(p.padH), g.padW = int(p.padW);
  const std::string why = depthwise::unsupported(g);
  if (!why.empty())
    return Status::error(why);
  return g;
}

bool depthwiseOffered(const Problem &p) { return mode() != Mode::Off && bool(depthwiseGeometry(p)); }

bool depthwiseForced(const Problem &p) { return mode() == Mode::Only && depthwiseOffered(p); }

std::string ownCandidatesTag(const Problem &p) {
  if (!depthwiseOffered(p))
    return "";
  // A race of the kernels alone is no race: its choice must never stand in for one; nor a race
  // without the row kernels.
  return mode() == Mode::Only ? std::string(kTag) + ",only" : mode() == Mode::Tiles ? std::string(kTag) + ",tiles" : kTag;
}

bool candidatesAddBias(const Problem &p) { return p.bias && depthwiseOffered(p); }

std::vector<tuning::Candidate> depthwiseCandidates(DeviceContext &ctx, const Problem &p) {
  auto geometry = depthwiseGeometry(p);
  if (mode() == Mode::Off || !geometry)
    return {};
  const depthwise::Geometry g = *geometry;
  const depthwise::Pass pass = depthwisePass(p.pass);
  DeviceContext *c = &ctx;
  const plan::Tensor *x = p.x, *w = p.w, *y = p.y, *bias = p.bias, *acc = p.accumulate;
  const size_t workspace = depthwise::workspaceBytes(g, pass, int(p.dtype));
  auto candidate = [&](depthwise::Kernel kernel, const char *name) {
    tuning::Candidate cand;
    cand.name = std::string(name) + (bias ? "+bias" : acc ? "+add" : "");
    cand.build = [=]() -> Expected<tuning::Executable> {
      tuning::Executable e;
      e.workspaceBytes = workspace;
      e.run = [=](void *ws) -> Status {
        cudaError_t err = cudaSuccess;
        switch (pass) {
        case depthwise::Pass::Forward:
          err = depthwise::forward(c->ref(x), c->ref(w), bias ? c->ref(bias) : Ref{}, c->ref(y), g, c->stream, kernel);
          break;
        case depthwise::Pass::BackwardData: // x is dx, y is dy
          err = depthwise::backwardData(c->ref(y), c->ref(w), acc ? c->ref(acc) : Ref{}, c->ref(x), g, c->stream,
                                        kernel);
          break;
        case depthwise::Pass::BackwardFilter: // w is dw
          err = depthwise::backwardFilter(c->ref(x), c->ref(y), c->ref(w), g, ws, workspace, c->stream);
          break;
        }
        return cudaStatus(err, "depthwise convolution");
      };
      return e;
    };
    return cand;
  };
  std::vector<tuning::Candidate> all;
  all.push_back(candidate(depthwise::Kernel::Tiles, kName));
  if (mode() != Mode::Tiles && depthwise::rowsUnsupported(g, pass, int(p.dtype)).empty())
    all.push_back(candidate(depthwise::Kernel::Rows, kRowsName));
  return all;
}

} // namespace castor::cuda::conv
