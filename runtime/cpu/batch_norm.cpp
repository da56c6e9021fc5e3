// Batch normalization on the CPU reference: batch_norm_training, batch_norm_inference,
// batch_norm_apply (the training output from given statistics), their backward and the running
// statistics' update.
//
// Same rules as every CPU kernel file (cpu_backend.cpp): operands are read into double precision,
// every sum accumulates in fp64 in a fixed loop order, each result is rounded once into its
// output's dtype, and a kernel reads its inputs before it writes an output that updates one in place.

#include "cpu/cpu_internal.h"
#include "plan/elementwise_ops.h"
#include "dist/communicator.h"
#include "plan/op_attrs.h"

#include <cmath>
#include <vector>

namespace castor::cpu {
namespace {

Expected<RunFn> buildBatchNormTraining(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  Shape xs = shapeOf(*in[0]);
  const double eps = p->epsilon, momentum = p->momentum;
  const plan::DType statDtype = out[1]->dtype();
  // Synchronized (SyncBatchNorm): the per-channel sums of every replica's batch.
  dist::Communicator *replicas = p->sync ? c.replicas : nullptr;
  return RunFn([=]() -> Status {
    Values gamma = b->read(*in[1]), beta = b->read(*in[2]);
    const Channels chans(xs);
    const int64_t C = chans.C;
    const int world = replicas ? replicas->worldSize() : 1;
    const int64_t m = chans.N * chans.inner, total = m * world;
    Values mean(static_cast<size_t>(C)), invStd(static_cast<size_t>(C)), var(static_cast<size_t>(C));
    auto sumOf = [&](const Values &xc) {
      double sum = 0;
      for (int64_t i = 0; i < m; ++i)
        sum += xc[i];
      return sum;
    };
    auto squaredDeviations = [&](const Values &xc, double mu) {
      double sq = 0;
      for (int64_t i = 0; i < m; ++i) {
        double d = xc[i] - mu;
        sq += d * d;
      }
      return sq;
    };
    // From the biased variance: the statistics, and y in place of the channel's x.
    auto normalize = [&](int64_t ch, Values &xc, double v) {
      const double is = 1.0 / std::sqrt(v + eps);
      var[ch] = v;
      invStd[ch] = is;
      // y from the statistics as stored, so that batch_norm_apply reproduces it bit for bit.
      const double muStored = roundToDtype(mean[ch], statDtype), isStored = roundToDtype(is, statDtype);
      for (int64_t i = 0; i < m; ++i)
        xc[i] = (xc[i] - muStored) * isStored * gamma[ch] + beta[ch];
      chans.write(b, *out[0], ch, xc.data());
    };
    if (world == 1) {
      // One read of each channel: its mean, the squared deviations from it, then y.
      parallelFor(C, 5.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        mean[ch] = m ? sumOf(xc) / double(m) : 0.0;
        normalize(ch, xc, m ? squaredDeviations(xc, mean[ch]) / double(m) : 0.0);
      });
    } else {
      // The same two sums, each added up over the replicas before its division.
      std::vector<double> sums(static_cast<size_t>(C));
      parallelFor(C, 2.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        sums[size_t(ch)] = sumOf(xc);
      });
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(sums.data(), sums.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch statistics (mean)"));
      for (int64_t ch = 0; ch < C; ++ch)
        mean[ch] = total ? sums[size_t(ch)] / double(total) : 0.0;
      parallelFor(C, 3.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        sums[size_t(ch)] = squaredDeviations(xc, mean[ch]);
      });
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(sums.data(), sums.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch statistics (variance)"));
      parallelFor(C, 5.0 * double(C * m), [&](int64_t ch) {
        Values xc(static_cast<size_t>(m));
        chans.read(b, *in[0], ch, xc.data());
        normalize(ch, xc, total ? sums[size_t(ch)] / double(total) : 0.0);
      });
    }
    Values runMean, runVar;
    if (out.size() == 5) {
      runMean = b->read(*in[3]);
      runVar = b->read(*in[4]);
      for (int64_t ch = 0; ch < C; ++ch) {
        double unbiased = total > 1 ? var[ch] * double(total) / double(total - 1) : var[ch];
        runMean[ch] = (1 - momentum) * runMean[ch] + momentum * mean[ch];
        runVar[ch] = (1 - momentum) * runVar[ch] + momentum * unbiased;
      }
    }
    b->write(*out[1], mean);
    b->write(*out[2], invStd);
    if (out.size() == 5) {
      b->write(*out[3], runMean);
      b->write(*out[4], runVar);
    }
    return Status::ok();
  });
}

// x, scale, bias, mean, inv_std [, z] -> y: batch_norm_training's output from its statistics,
// then the residual add and relu (or ReLU6's clip) as batch_norm_relu_training composes them
// (each rounded).
Expected<RunFn> buildBatchNormApply(const KernelContext &c) {
  auto p = plan::parseBatchNormApply(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  Shape xs = shapeOf(*in[0]);
  const bool relu = p->relu;
  std::optional<elementwise::Clip> clip; // computes as the clip op
  if (p->clipMax) {
    clip.emplace();
    clip->min = 0.0;
    clip->max = *p->clipMax;
  }
  const plan::DType dtype = y->dtype();
  return RunFn([=]() {
    Values X = b->read(*in[0]), gamma = b->read(*in[1]), beta = b->read(*in[2]), mean = b->read(*in[3]),
           invStd = b->read(*in[4]);
    Values Z;
    if (in.size() == 6)
      Z = b->read(*in[5]);
    const int64_t C = xs[1], inner = span(xs, 2, xs.size());
    parallelFor(xs[0] * C, 4.0 * double(X.size()), [&](int64_t nc) {
      const int64_t ch = nc % C;
      for (int64_t i = nc * inner; i < (nc + 1) * inner; ++i) {
        double t = roundToDtype((X[i] - mean[ch]) * invStd[ch] * gamma[ch] + beta[ch], dtype);
        if (!Z.empty())
          t = roundToDtype(t + Z[i], dtype);
        X[i] = clip ? clip->forward(t) : relu ? elementwise::Relu{}.forward(t) : t;
      }
    });
    b->write(*y, X);
    return Status::ok();
  });
}

Expected<RunFn> buildBatchNormInference(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  const Tensor *y = c.out[0];
  Shape xs = shapeOf(*in[0]);
  const double eps = p->epsilon;
  return RunFn([=]() {
    Values X = b->read(*in[0]), gamma = b->read(*in[1]), beta = b->read(*in[2]), mean = b->read(*in[3]),
           var = b->read(*in[4]);
    const int64_t N = xs[0], C = xs[1], inner = span(xs, 2, xs.size());
    parallelFor(N * C, 4.0 * double(X.size()), [&](int64_t nc) {
      const int64_t ch = nc % C;
      double is = 1.0 / std::sqrt(var[ch] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        double &e = X[nc * inner + i];
        e = (e - mean[ch]) * is * gamma[ch] + beta[ch];
      }
    });
    b->write(*y, X);
    return Status::ok();
  });
}

// batch_norm_training_backward (dy, x, scale, batch_mean, batch_inv_std) -> (dx, dscale, dbias),
// with m = N * spatial elements per channel and xhat = (x - mean) * inv_std:
//   dbias = sum dy;  dscale = sum dy * xhat;
//   dx = scale * inv_std / m * (m * dy - dbias - xhat * dscale).
Expected<RunFn> buildBatchNormBackward(const KernelContext &c) {
  auto p = plan::parseBatchNorm(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  Shape xs = shapeOf(*in[1]);
  // Synchronized: dx from the sums over every replica's batch, as the forward's statistics were
  // (SyncBatchNorm); dscale and dbias stay this replica's, which the step averages with the
  // other gradients.
  dist::Communicator *replicas = p->sync ? c.replicas : nullptr;
  return RunFn([=]() -> Status {
    Values gamma = b->read(*in[2]), mean = b->read(*in[3]), invStd = b->read(*in[4]);
    const Channels chans(xs);
    const int world = replicas ? replicas->worldSize() : 1;
    const int64_t C = chans.C, count = chans.N * chans.inner;
    const double m = double(count * world);
    Values dScale(size_t(C), 0.0), dBias(size_t(C), 0.0);
    // The channel's sum dy and sum dy xhat (its dbias and dscale).
    auto sums = [&](const Values &dyc, const Values &xc, int64_t ch) {
      double sdy = 0, sdyx = 0;
      for (int64_t i = 0; i < count; ++i) {
        sdy += dyc[i];
        sdyx += dyc[i] * (xc[i] - mean[ch]) * invStd[ch];
      }
      dBias[ch] = sdy;
      dScale[ch] = sdyx;
    };
    // dx in place of the channel's dy, from the sums over the whole batch.
    auto inputGradient = [&](Values &dyc, const Values &xc, int64_t ch, double sdy, double sdyx) {
      const double k = m > 0 ? gamma[ch] * invStd[ch] / m : 0.0;
      for (int64_t i = 0; i < count; ++i) {
        const double xhat = (xc[i] - mean[ch]) * invStd[ch];
        dyc[i] = k * (m * dyc[i] - sdy - xhat * sdyx);
      }
      chans.write(b, *out[0], ch, dyc.data());
    };
    auto readChannel = [&](int64_t ch, Values &dyc, Values &xc) {
      chans.read(b, *in[0], ch, dyc.data());
      chans.read(b, *in[1], ch, xc.data());
    };
    if (world == 1) {
      // One channel at a time: its N slices of dy and x, the sums, then dx in place of dy.
      parallelFor(C, 6.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        sums(dyc, xc, ch);
        inputGradient(dyc, xc, ch, dBias[ch], dScale[ch]);
      });
    } else {
      parallelFor(C, 3.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        sums(dyc, xc, ch);
      });
      std::vector<double> total(size_t(2 * C)); // sum dy, then sum dy xhat, of every replica
      for (int64_t ch = 0; ch < C; ++ch)
        total[size_t(ch)] = dBias[ch], total[size_t(C + ch)] = dScale[ch];
      CASTOR_RETURN_IF_ERROR(replicas->allReduce(total.data(), total.size(), plan::F64, dist::ReduceOp::Sum)
                                 .withContext("batch-norm gradient sums"));
      parallelFor(C, 4.0 * double(C * count), [&](int64_t ch) {
        Values dyc(static_cast<size_t>(count)), xc(static_cast<size_t>(count));
        readChannel(ch, dyc, xc);
        inputGradient(dyc, xc, ch, total[size_t(ch)], total[size_t(C + ch)]);
      });
    }
    b->write(*out[1], dScale);
    b->write(*out[2], dBias);
    return Status::ok();
  });
}

// batch_norm_running_update (running_mean, running_var, batch_mean, batch_inv_std [, found_inf])
//   -> (running_mean, running_var), in place, PyTorch's convention (nothing written when the
//   step's update is skipped, found_inf nonzero):
//   running_mean = (1 - m) running_mean + m batch_mean
//   running_var  = (1 - m) running_var + m var_biased * count / (count - 1),
//   var_biased = 1 / inv_std^2 - epsilon (count 1: the biased variance).
Expected<RunFn> buildBatchNormRunningUpdate(const KernelContext &c) {
  auto p = plan::parseBatchNormRunningUpdate(c.kernel);
  if (!p)
    return p.status();
  Memory *b = &c.backend;
  auto in = c.in;
  auto out = c.out;
  const plan::BatchNormRunningUpdateParams a = *p;
  dist::Communicator *replicas = a.sync ? c.replicas : nullptr; // statistics over every replica's batch
  const Tensor *skipIf = in.size() == 5 ? in[4] : nullptr;
  return RunFn([=]() {
    if (skipIf && b->read(*skipIf).at(0) != 0.0)
      return Status::ok(); // in place: the statistics keep their bytes
    Values rm = b->read(*in[0]), rv = b->read(*in[1]), mean = b->read(*in[2]), invStd = b->read(*in[3]);
    const int64_t count = a.count * (replicas ? replicas->worldSize() : 1);
    const double correction = count > 1 ? double(count) / double(count - 1) : 1.0;
    for (size_t ch = 0; ch < rm.size(); ++ch) {
      const double varBiased = 1.0 / (invStd[ch] * invStd[ch]) - a.epsilon;
      rm[ch] = (1 - a.momentum) * rm[ch] + a.momentum * mean[ch];
      rv[ch] = (1 - a.momentum) * rv[ch] + a.momentum * varBiased * correction;
    }
    b->write(*out[0], rm);
    b->write(*out[1], rv);
    return Status::ok();
  });
}

} // namespace

const KernelTable &batchNormKernels() {
  static const KernelTable table = {
      {OpId::BatchNormTraining, buildBatchNormTraining},
      {OpId::BatchNormInference, buildBatchNormInference},
      {OpId::BatchNormApply, buildBatchNormApply},
      {OpId::BatchNormTrainingBackward, buildBatchNormBackward},
      {OpId::BatchNormRunningUpdate, buildBatchNormRunningUpdate},
  };
  return table;
}

} // namespace castor::cpu
