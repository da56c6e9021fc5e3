// castor-run train and eval: training plans fed with synthetic, IDX (MNIST-format) or .npy data, and
// test-set accuracy of a forward plan.
#pragma once

#include <cstdint>
#include <string>

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

int train(const TrainOptions &options);
int eval(const EvalOptions &options);

} // namespace castor::run
