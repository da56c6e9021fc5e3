// castor train MODEL.onnx [castor compile flags] [castor-run train flags]: ONNX to a trained
// model in one command, as trtexec takes an ONNX file. The training plan comes from a plan cache
// keyed by the compiler, the model's bytes and the compile flags: compiled on the first call
// (castor compile, a child process), reused on the next ones; then castor-run train replaces this
// process, with the run flags. The two-step path (castor compile, castor-run train) stays.
//
// Flags are routed by name: a flag castor compile declares goes to the compile (with its value),
// any other to castor-run train, in the order given; --seed goes to both (one seed for the
// initial weights, the dropout masks and the data order).
#include "Commands.h"
#include "PlanCache.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace cl = llvm::cl;

namespace castor::cli {

namespace {

constexpr const char *kUsage =
    "usage: castor train MODEL.onnx [castor compile flags] [castor-run train flags]\n"
    "  Compiles MODEL.onnx into a training plan (kept in the plan cache: CASTOR_PLAN_CACHE, else\n"
    "  $XDG_CACHE_HOME/castor/plans or ~/.cache/castor/plans), or reuses the one compiled with the same\n"
    "  compiler, model and compile flags, then trains it with castor-run train. A flag castor compile\n"
    "  declares (castor compile --help) goes to the compile, any other to castor-run train (castor-run\n"
    "  train --help); --seed goes to both. --train is implied; -o, --eval and --emit belong to castor\n"
    "  compile alone. With --schedule cosine and no --total-steps, the schedule spans --steps.\n"
    "  Example: castor train model.onnx --init kaiming --batch 64 --optimizer adamw --lr 1e-3 \\\n"
    "             --steps 1000 --data folder:DIR --save state.safetensors\n";

// "--lr=0.1" -> ("lr", "0.1", true); "-batch" -> ("batch", "", false); "model.onnx" -> nullopt.
struct Flag {
  std::string name, value;
  bool inlineValue = false;
};
std::optional<Flag> parseFlag(const std::string &arg) {
  if (arg.size() < 2 || arg[0] != '-')
    return std::nullopt;
  std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
  auto eq = body.find('=');
  if (eq == std::string::npos)
    return Flag{body, "", false};
  return Flag{body.substr(0, eq), body.substr(eq + 1), true};
}

// castor compile's named flags (the subcommand's registered options).
cl::Option *compileFlag(const std::string &name) {
  auto it = compileCommand.OptionsMap.find(name);
  return it == compileCommand.OptionsMap.end() ? nullptr : it->second;
}

struct RoutedArgs {
  std::vector<std::string> compile, run;
  std::string steps;                 // castor-run's --steps, for a cosine schedule's span
  bool totalSteps = false, cosine = false, targetGiven = false;
  std::string device;                // castor-run's --device
};

// Splits the flags after MODEL.onnx; an error message, or "".
std::string route(const std::vector<std::string> &args, RoutedArgs &out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto flag = parseFlag(arg);
    cl::Option *option = flag ? compileFlag(flag->name) : nullptr;
    if (!option) {
      out.run.push_back(arg);
      if (flag && (flag->name == "steps" || flag->name == "device")) {
        std::string value = flag->inlineValue ? flag->value : (i + 1 < args.size() ? args[i + 1] : "");
        (flag->name == "steps" ? out.steps : out.device) = value;
      }
      continue;
    }
    if (flag->name == "o" || flag->name == "eval" || flag->name == "emit")
      return "castor train: -" + std::string(flag->name.size() > 1 ? "-" : "") + flag->name +
             " is castor compile's alone: castor train keeps its plan in the plan cache and trains it (for a plan "
             "file of your own, run castor compile, then castor-run train)";
    if (flag->name == "train")
      continue; // implied
    std::string value = flag->value;
    bool takesValue = option->getValueExpectedFlag() == cl::ValueRequired;
    if (takesValue && !flag->inlineValue) {
      if (i + 1 >= args.size())
        return "castor train: --" + flag->name + " needs a value";
      value = args[++i];
    }
    std::string canonical = "--" + flag->name + (takesValue || flag->inlineValue ? "=" + value : "");
    out.compile.push_back(canonical);
    if (flag->name == "seed")
      out.run.push_back(canonical); // one seed for the weights, the dropout masks and the data
    out.totalSteps |= flag->name == "total-steps";
    out.cosine |= flag->name == "schedule" && value == "cosine";
    out.targetGiven |= flag->name == "target";
  }
  if (out.cosine && !out.totalSteps && !out.steps.empty())
    out.compile.push_back("--total-steps=" + out.steps);
  if (!out.targetGiven && out.device == "cuda")
    out.compile.push_back("--target=cuda");
  return "";
}

// castor compile MODEL [flags] --train -o PLAN, as a child process with this executable.
int compileInto(const std::string &self, const std::string &model, const std::vector<std::string> &flags,
                const std::string &planPath) {
  std::vector<llvm::StringRef> argv = {self, "compile", model};
  for (const auto &f : flags)
    argv.push_back(f);
  argv.push_back("--train");
  argv.push_back("-o");
  argv.push_back(planPath);
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(self, argv, std::nullopt, {}, 0, 0, &error);
  if (rc < 0)
    llvm::errs() << "castor train: could not run castor compile: " << error << "\n";
  return rc;
}

} // namespace

int runTrain(int argc, char **argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-help" || args[0] == "-h") {
    llvm::outs() << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string model = args[0];
  if (model[0] == '-') {
    llvm::errs() << "castor train: name the model first (castor train MODEL.onnx ...)\n" << kUsage;
    return 2;
  }
  if (!llvm::sys::fs::exists(model)) {
    llvm::errs() << "castor train: " << model << ": no such file\n";
    return 1;
  }
  RoutedArgs routed;
  if (std::string error = route({args.begin() + 1, args.end()}, routed); !error.empty()) {
    llvm::errs() << error << "\n";
    return 2;
  }

  const std::string self = llvm::sys::fs::getMainExecutable(argv[0], reinterpret_cast<void *>(&runTrain));
  llvm::SmallString<256> runner(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(runner, "castor-run");
  if (!llvm::sys::fs::can_execute(runner)) {
    llvm::errs() << "castor train: castor-run, which trains the plan, is not beside castor (" << runner << ")\n";
    return 1;
  }

  auto entry = planCacheEntry(self, model, routed.compile);
  if (!entry) {
    llvm::errs() << "castor train: " << entry.message() << "\n";
    return 1;
  }
  if (llvm::sys::fs::exists(entry->planPath)) {
    llvm::errs() << "castor train: the plan from the cache: " << entry->planPath << "\n";
  } else {
    auto start = std::chrono::steady_clock::now();
    auto staging = stagePlanCacheEntry(*entry);
    if (!staging) {
      llvm::errs() << "castor train: " << staging.message() << "\n";
      return 1;
    }
    int rc = compileInto(self, model, routed.compile, *staging + "/train.plan");
    if (rc != 0) {
      discardStaging(*staging);
      return rc < 0 ? 1 : rc;
    }
    if (Status s = commitPlanCacheEntry(*entry, *staging); !s) {
      llvm::errs() << "castor train: " << s.message() << "\n";
      return 1;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    llvm::errs() << llvm::format("castor train: compiled in %.1f s into the plan cache: ", seconds)
                 << entry->planPath << "\n";
  }

  std::vector<std::string> runArgs = {"castor-run", "train", entry->planPath};
  runArgs.insert(runArgs.end(), routed.run.begin(), routed.run.end());
  std::vector<char *> execArgv;
  for (auto &a : runArgs)
    execArgv.push_back(a.data());
  execArgv.push_back(nullptr);
  llvm::errs().flush();
  llvm::outs().flush();
  std::fflush(nullptr);
  ::execv(runner.c_str(), execArgv.data());
  llvm::errs() << "castor train: could not start " << runner << ": " << std::strerror(errno) << "\n";
  return 1;
}

} // namespace castor::cli
