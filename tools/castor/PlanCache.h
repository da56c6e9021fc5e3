// castor train's plan cache: one folder per (compiler, model, compile flags), holding the
// training plan and the weights file beside it. Entries are written whole or not at all: a
// compile fills a staging folder, which is renamed into place; a concurrent compile of the same
// entry loses the rename and keeps the winner's.
#pragma once

#include "castor/status.h"

#include <string>
#include <vector>

namespace castor::cli {

struct PlanCacheEntry {
  std::string root;     // the cache folder
  std::string dir;      // root/<model stem>-<key>
  std::string planPath; // dir/train.plan
};

// The cache folder: CASTOR_PLAN_CACHE, else $XDG_CACHE_HOME/castor/plans, else ~/.cache/castor/plans.
Expected<std::string> planCacheRoot();

// The entry of `model` compiled by the compiler at `compilerPath` with `flags` (canonical
// "--name=value" forms; their order does not matter). The key is the SHA-256 of the compiler's
// and the model's bytes and the sorted flags.
Expected<PlanCacheEntry> planCacheEntry(const std::string &compilerPath, const std::string &model,
                                        std::vector<std::string> flags);

// A fresh staging folder for `entry`, in the cache folder.
Expected<std::string> stagePlanCacheEntry(const PlanCacheEntry &entry);
// Moves a filled staging folder into place (or, when another process put the entry there first,
// removes it).
Status commitPlanCacheEntry(const PlanCacheEntry &entry, const std::string &staging);
void discardStaging(const std::string &staging);

} // namespace castor::cli
