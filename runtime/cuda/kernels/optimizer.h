// Optimizers, the learning-rate schedule, counters and loss scaling (optimizer.cu).
// Conventions of every launch function: kernels/types.h.
#pragma once

#include "cuda/kernels/types.h"

namespace castor::cuda {

// found.p == nullptr: no overflow flag. step == nullptr: no step counter (sgd without momentum).
cudaError_t sgdUpdate(Ref param, Ref grad, Ref buf, Ref lr, const int64_t *step, Ref found, int64_t n,
                      double momentum, bool nesterov, double weightDecay, double dampening, cudaStream_t s);
cudaError_t adamwUpdate(Ref param, Ref grad, Ref m, Ref v, Ref lr, const int64_t *step, Ref found, int64_t n,
                        double beta1, double beta2, double eps, double weightDecay, cudaStream_t s);
// flag.p == nullptr: always counts.
cudaError_t increment(const int64_t *in, int64_t *out, Ref flag, bool whenSet, cudaStream_t s);

struct LrSchedule {
  int kind = 0; // 0 constant, 1 step, 2 cosine
  double baseLr = 0, gamma = 0.1, minLr = 0;
  int64_t warmupSteps = 0, stepSize = 0, totalSteps = 0;
};
cudaError_t lrSchedule(const int64_t *iteration, Ref lr, const LrSchedule &p, cudaStream_t s);

// Many tensors in one launch: a device table of (pointer, element count, dtype) and a list of
// chunks (tensor, start, count), built once on the host when the kernel is built.
struct TensorEntry {
  void *p = nullptr;
  int64_t n = 0;
  int32_t dt = kF32;
  int32_t pad = 0;
};
struct MultiTensorTable {
  const TensorEntry *tensors = nullptr; // device
  const void *chunks = nullptr;         // device
  double *partials = nullptr;           // device: one double per chunk, then one coefficient
  int tensorCount = 0, chunkCount = 0;
};
// The bytes of the device table for these tensors.
size_t multiTensorBytes(const std::vector<TensorEntry> &tensors);
// Fills `device` (multiTensorBytes long) with a synchronous copy: at build time only.
cudaError_t uploadMultiTensor(const std::vector<TensorEntry> &tensors, void *device, MultiTensorTable *table);

// Casts of many tensors in one launch (consecutive cast kernels, castor-schedule-casts): entry i
// of the table is a source and entry tensorCount + i its destination (same element count; every
// source of float dtype fromDt, every destination of toDt); each element converts as the single
// cast's kernel converts it.
size_t castTableBytes(const std::vector<TensorEntry> &sources);
cudaError_t uploadCastTable(const std::vector<TensorEntry> &sources, const std::vector<TensorEntry> &destinations,
                            void *device, MultiTensorTable *table);
cudaError_t castAll(const MultiTensorTable &t, int fromDt, int toDt, cudaStream_t s);

// Loss scaling: found = 0; every gradient g *= float(1/scale) (rounded once into g's dtype);
// found = 1 when any stored value is not finite.
cudaError_t unscaleAll(const MultiTensorTable &t, Ref scale, Ref found, cudaStream_t s);
// Gradient clipping: total = sqrt(sum g^2) in fp64 (total out); coef = maxNorm / (total + 1e-6);
// when coef < 1 every g *= coef.
cudaError_t clipAll(const MultiTensorTable &t, Ref total, double maxNorm, cudaStream_t s);
// AdamW over many f32 parameters in one launch (consecutive adamw_update kernels of one
// optimizer step): each entry's param, grad, exp_avg and exp_avg_sq, all f32 and stored alike;
// the arithmetic is adamwUpdate's, element for element.
struct AdamwTensors {
  void *param = nullptr;
  const void *grad = nullptr;
  void *m = nullptr, *v = nullptr;
  int64_t n = 0;
};
struct AdamwTable {
  const void *entries = nullptr; // device
  const void *chunks = nullptr;  // device
  int chunkCount = 0;
};
size_t adamwTableBytes(const std::vector<AdamwTensors> &tensors);
// Fills `device` (adamwTableBytes long) with a synchronous copy: at build time only.
cudaError_t uploadAdamwTable(const std::vector<AdamwTensors> &tensors, void *device, AdamwTable *table);
cudaError_t adamwAll(const AdamwTable &t, Ref lr, const int64_t *step, Ref found, double beta1, double beta2,
                     double eps, double weightDecay, cudaStream_t s);

cudaError_t updateLossScale(Ref scale, int64_t *tracker, Ref found, double growth, double backoff, int64_t interval,
                            cudaStream_t s);

} // namespace castor::cuda
