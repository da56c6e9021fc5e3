// Builds small plans by hand for tests (the runtime's Catch2 tests and the GPU tests).
#pragma once

#include "plan/plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace castor::test {

struct PlanBuilder {
  plan::Plan plan;
  uint64_t next = 0;

  PlanBuilder() {
    plan.set_format_version(plan::kPlanFormatVersion);
    plan.set_producer("castor-tests");
    plan.set_target("generic");
    plan.set_batch(1);
  }

  // A tensor in a fresh arena slot (no reuse), or at `offset` when given.
  uint32_t tensor(const std::string &name, std::vector<int64_t> shape, plan::Tensor::Kind kind,
                  plan::DType dtype = plan::F32, int64_t offset = -1) {
    plan::Tensor *t = plan.add_tensors();
    t->set_id(uint32_t(plan.tensors_size() - 1));
    t->set_name(name);
    t->set_dtype(dtype);
    t->set_kind(kind);
    uint64_t count = 1;
    for (int64_t d : shape) {
      t->add_shape(d);
      count *= uint64_t(d);
    }
    t->set_bytes(count * plan::dtypeSize(dtype));
    if (offset < 0) {
      t->set_offset(next);
      next += (t->bytes() + plan::kArenaAlignment - 1) / plan::kArenaAlignment * plan::kArenaAlignment;
    } else {
      t->set_offset(uint64_t(offset));
      next = std::max<uint64_t>(next, (uint64_t(offset) + t->bytes() + 255) / 256 * 256);
    }
    plan.set_arena_bytes(std::max<uint64_t>(next, 256));
    if (kind == plan::Tensor::INPUT) {
      auto *b = plan.add_inputs();
      b->set_name(name);
      b->set_tensor(t->id());
    } else if (kind == plan::Tensor::OUTPUT) {
      auto *b = plan.add_outputs();
      b->set_name(name);
      b->set_tensor(t->id());
    }
    return t->id();
  }

  plan::Kernel &kernel(const std::string &op, std::vector<uint32_t> in, std::vector<uint32_t> out,
                       std::map<std::string, plan::Attr> attrs = {}) {
    plan::Kernel *k = plan.add_kernels();
    k->set_op(op);
    for (uint32_t id : in)
      k->add_inputs(id);
    for (uint32_t id : out)
      k->add_outputs(id);
    for (auto &[name, a] : attrs)
      (*k->mutable_attrs())[name] = a;
    return *k;
  }

  plan::Parameter &parameter(const std::string &name, uint32_t tensor, plan::Parameter::Init init,
                             int64_t fanIn = 0, int64_t fanOut = 0) {
    plan::Parameter *p = plan.add_parameters();
    p->set_name(name);
    p->set_tensor(tensor);
    p->set_init(init);
    p->set_trainable(true);
    p->set_fan_in(fanIn);
    p->set_fan_out(fanOut);
    return *p;
  }
};

} // namespace castor::test
