// castor-run train, bench and eval: training plans fed with synthetic, IDX (MNIST-format) or .npy data, and
// test-set accuracy of a forward plan.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace castor::run {

struct TrainOptions {
  std::string plan;
  int64_t steps = 0;
  std::string data = "synthetic"; // synthetic | idx:DIR | npy:DIR
  std::string device = "cpu";
  uint64_t seed = 0;
  std::string weights, logJson, save, resume;
  int64_t saveEvery = 0;
  int64_t classes = 0; // 0: from the plan's loss kernel
  double mean = 0.2860, std = 0.3530;
  bool poison = false;
  int64_t gradStats = 0; // every K steps: the plan's grad_stats:<param> outputs (0: never)
};

struct EvalOptions {
  std::string plan, weights, data, split = "test", device = "cpu";
  double mean = 0.2860, std = 0.3530;
  bool json = false;
};

struct BenchOptions {
  std::string plan, device = "cuda";
  int64_t steps = 20, warmup = 5;
  uint64_t seed = 0;
  bool json = false;
};

int train(const TrainOptions &options);
int bench(const BenchOptions &options);

// The class count of a training plan's loss (the logits' width; 0 when not found).
int64_t lossClasses(const plan::Plan &p, uint32_t labelsId);
// The tensor bound to input or output `name`, or nullptr.
const plan::Tensor *findBinding(const plan::Plan &p, bool input, const std::string &name);
int eval(const EvalOptions &options);

} // namespace castor::run
