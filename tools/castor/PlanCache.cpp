// castor train's plan cache (PlanCache.h).
#include "PlanCache.h"

#include "plan/plan_io.h"
#include "plan/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;

namespace castor::cli {

Expected<std::string> planCacheRoot() {
  if (const char *dir = std::getenv("CASTOR_PLAN_CACHE"); dir && *dir)
    return std::string(dir);
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/castor/plans";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/castor/plans";
  return Status::error("no folder for the plan cache: set CASTOR_PLAN_CACHE (or HOME)");
}

Expected<PlanCacheEntry> planCacheEntry(const std::string &compilerPath, const std::string &model,
                                        std::vector<std::string> flags) {
  auto root = planCacheRoot();
  if (!root)
    return root.status();
  auto compiler = plan::fileSha256(compilerPath);
  if (!compiler)
    return Status::error("the compiler's identity: " + compiler.message());
  auto modelDigest = plan::fileSha256(model);
  if (!modelDigest)
    return Status::error("the model's identity: " + modelDigest.message());
  std::sort(flags.begin(), flags.end());
  std::string key = "castor plan cache 1\ncompiler " + *compiler + "\nmodel " + *modelDigest + "\n";
  for (const auto &f : flags)
    key += f + "\n";
  const std::string digest = plan::toHex(plan::sha256(key.data(), key.size()));
  PlanCacheEntry entry;
  entry.root = *root;
  entry.dir = *root + "/" + fs::path(model).stem().string() + "-" + digest.substr(0, 16);
  entry.planPath = entry.dir + "/train.plan";
  return entry;
}

Expected<std::string> stagePlanCacheEntry(const PlanCacheEntry &entry) {
  std::error_code ec;
  fs::create_directories(entry.root, ec);
  if (ec)
    return Status::error("cannot create the plan cache " + entry.root + ": " + ec.message());
  std::string staging = entry.dir + ".staging-XXXXXX";
  if (!::mkdtemp(staging.data()))
    return Status::error("cannot create a folder in the plan cache " + entry.root + ": " + std::strerror(errno));
  return staging;
}

Status commitPlanCacheEntry(const PlanCacheEntry &entry, const std::string &staging) {
  if (::rename(staging.c_str(), entry.dir.c_str()) == 0)
    return Status::ok();
  const int err = errno;
  if ((err == EEXIST || err == ENOTEMPTY) && fs::exists(entry.planPath)) {
    discardStaging(staging); // another castor train compiled the same entry first
    return Status::ok();
  }
  discardStaging(staging);
  return Status::error("cannot move the compiled plan into the plan cache " + entry.dir + ": " + std::strerror(err));
}

void discardStaging(const std::string &staging) {
  std::error_code ec;
  fs::remove_all(staging, ec);
}

} // namespace castor::cli
