// batch_norm_apply on the own kernel (batch_norm_relu.cu's element-wise pass): a batch norm's
// output again from its statistics, with the residual add and relu (or ReLU6's clip) when the op
// has them.
#include "cuda/kernels/batch_norm_relu.h"
#include "cuda/kernels/builders.h"
#include "plan/op_attrs.h"

#include <limits>

namespace castor::cuda::own {

Expected<RunFn> buildBatchNormApply(DeviceContext &ctx, const Kernel &k, const TensorList &in, const TensorList &out) {
  DeviceContext *c = &ctx; // captured by the RunFn: the context outlives it
  const cudaStream_t s = ctx.stream;
  CASTOR_RETURN_IF_ERROR(operandCheck(k.op(), in, out)(5, 1));
  auto p = plan::parseBatchNormApply(k);
  if (!p)
    return p.status();
  for (size_t j = 1; j < 5; ++j)
    if (in[j]->dtype() != plan::F32)
      return Status::error(k.op() + " on cuda takes f32 scale, bias and statistics, got " +
                           plan::dtypeName(in[j]->dtype()));
  const Tensor *z = in.size() == 6 ? in[5] : nullptr;
  CASTOR_RETURN_IF_ERROR(sameOrder(ctx, k.op(), {in[0], out[0], z}));
  const ChannelGeometry g = channelGeometry(ctx, *in[0]);
  auto coef = scratchFor(ctx, kTagChannel, out[0], sizeof(float) * size_t(g.C));
  if (!coef)
    return coef.status();
  float *coefs = static_cast<float *>(*coef);
  const auto i = in;
  const Tensor *y = out[0];
  const bool relu = p->relu;
  const float clipMax = p->clipMax ? float(*p->clipMax) : std::numeric_limits<float>::infinity();
  auto f32 = [c](const Tensor *t) { return reinterpret_cast<const float *>(c->ptr(t)); };
  return launch([=]() {
    Ref zr;
    if (z)
      zr = c->ref(z);
    return bnApply(c->ref(i[0]), zr, f32(i[1]), f32(i[2]), f32(i[3]), f32(i[4]), c->ref(y), g.A, g.C, g.B, relu,
                   clipMax, coefs, s);
  });
}

} // namespace castor::cuda::own
