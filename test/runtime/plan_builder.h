// Helpers of the runtime's tests: running hand-built plans (test/common/plan_builder.h) on
// the CPU backend.
#pragma once

#include "../common/plan_builder.h"
#include "castor/backend.h"
#include "plan/plan.h"

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace castor::test {


// Encodes doubles in a tensor's dtype and uploads them.
void uploadValues(Backend &b, const plan::Plan &p, uint32_t id, const std::vector<double> &values);
std::vector<double> downloadValues(Backend &b, const plan::Plan &p, uint32_t id);

// Validates `p` and loads it on a new CPU backend, requiring both to succeed.
std::unique_ptr<Backend> loadOnCpu(const plan::Plan &p);
// Runs the loaded plan, requiring success.
void runOk(Backend &b);

// One operand of a single-kernel test plan.
struct Operand {
  std::vector<int64_t> shape;
  std::vector<double> values;
  plan::DType dtype = plan::F32;
};

// Runs one kernel on the CPU backend (validating the plan first) and returns its outputs.
std::vector<std::vector<double>> runKernel(const std::string &op, const std::vector<Operand> &inputs,
                                           const std::vector<Operand> &outputs,
                                           std::map<std::string, plan::Attr> attrs = {});

} // namespace castor::test
