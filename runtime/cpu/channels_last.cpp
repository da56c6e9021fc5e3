// Channels-last storage on the CPU reference: a transposed view's [N,C,H,W] side is stored as
// the CUDA backend stores it (cpu_internal.h, plan/storage_order.h), so the same plan computes
// the same values through the same aliasing on both backends.
#include "cpu/cpu_internal.h"

#include "plan/storage_order.h"

#include <algorithm>

namespace castor::cpu {

RunFn stageChannelsLast(Memory &memory, const KernelContext &c, RunFn run) {
  std::vector<const Tensor *> all, out; // each staged tensor once; the outputs among them
  for (const auto *operands : {&c.in, &c.out})
    for (const Tensor *t : *operands)
      if (memory.channelsLast.count(t->id()) && std::find(all.begin(), all.end(), t) == all.end())
        all.push_back(t);
  for (const Tensor *t : c.out)
    if (memory.channelsLast.count(t->id()) && std::find(out.begin(), out.end(), t) == out.end())
      out.push_back(t);
  if (all.empty())
    return run;
  Memory *m = &memory;
  return RunFn([m, all, out, run]() -> Status {
    // Every staged tensor starts as its current values (an output a kernel only partly writes
    // keeps the rest), and each output goes back in channels-last order.
    std::vector<std::vector<uint8_t>> copies;
    for (const Tensor *t : all) {
      copies.emplace_back(t->bytes());
      plan::fromChannelsLast(*t, m->slot(*t), copies.back().data());
    }
    for (size_t i = 0; i < all.size(); ++i)
      m->staged_[all[i]->id()] = copies[i].data();
    Status s;
    try {
      s = run();
    } catch (...) {
      m->staged_.clear();
      throw;
    }
    m->staged_.clear();
    for (const Tensor *t : out) {
      size_t i = size_t(std::find(all.begin(), all.end(), t) - all.begin());
      plan::toChannelsLast(*t, copies[i].data(), m->slot(*t));
    }
    return s;
  });
}

} // namespace castor::cpu
