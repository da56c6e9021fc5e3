// What the cuDNN graph API builders share (cudnn/convolution_graph.cpp, cudnn/batch_norm_graph.cpp,
// cudnn/attention.cpp): the dtype mapping, errors, and every engine configuration of one graph as a
// tuner candidate (tuning/tuner.h). Only those files include this header: the frontend's headers
// are large.
#pragma once

#include "cuda/tuning/compile_ahead.h"
#include "cuda/tuning/compiled_plans.h"
#include "cuda/tuning/tuning_cache.h"
#include "cuda/tuning/tuner.h"

#include <cudnn_frontend.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace castor::cuda::frontend {

namespace fe = cudnn_frontend;

inline fe::DataType_t feType(plan::DType t) {
  switch (t) {
  case plan::F16:
    return fe::DataType_t::HALF;
  case plan::BF16:
    return fe::DataType_t::BFLOAT16;
  default:
    return fe::DataType_t::FLOAT;
  }
}

inline Status feStatus(fe::error_t e, const char *what) {
  if (e.is_good())
    return Status::ok();
  return Status::error(std::string(what) + ": " + e.get_message());
}

// The graph, with access to its execution plans so that a candidate that loses the timing can
// release its plan (compiled kernels included) while the winner's stays.
class PlanGraph : public fe::graph::Graph {
public:
  void releasePlan(int64_t index) {
    auto &list = plans.get_execution_plans();
    if (index >= 0 && size_t(index) < list.size())
      list[size_t(index)].reset();
  }
};

// One built plan of the graph; releases it when the last candidate function holding it dies.
struct BuiltPlan {
  std::shared_ptr<PlanGraph> graph;
  int64_t index = -1;
  ~BuiltPlan() { graph->releasePlan(index); }
};

// The variant pack of one run: graph tensor uid -> device pointer (read when running, so that
// it sees the arena as it is then).
using PackFn = std::function<std::unordered_map<int64_t, void *>()>;

// A tuner executable that runs `execute` (a built plan of a graph) with the variant pack `pack`
// gives, the frontend's exceptions turned into errors.
template <typename Execute>
tuning::Executable executableOf(int64_t workspace, PackFn pack, Execute execute) {
  tuning::Executable e;
  e.workspaceBytes = size_t(workspace < 0 ? 0 : workspace);
  e.run = [pack, execute](void *ws) -> Status {
    std::unordered_map<int64_t, void *> variants = pack();
    try {
      return feStatus(execute(variants, ws), "cuDNN graph execute");
    } catch (const std::exception &ex) {
      return Status::error(std::string("cuDNN graph execute: ") + ex.what());
    }
  };
  return e;
}

// One engine configuration of a graph whose plans have been created and filtered.
struct EngineConfig {
  int64_t index = -1;
  std::string tag; // the engine's name, e.g. "eng4_k2=..."
  bool compilesAtBuild = false; // noted RUNTIME_COMPILATION
};

// The configurations of `g`, in the heuristics' order, each tag once (modes A and FALLBACK may
// offer the same configuration).
inline std::vector<EngineConfig> engineConfigs(PlanGraph &g) {
  std::vector<EngineConfig> configs;
  std::set<std::string> seen;
  const int64_t count = g.get_execution_plan_count();
  for (int64_t i = 0; i < count; ++i) {
    EngineConfig config;
    config.index = i;
    if (g.get_plan_name_at_index(i, config.tag).is_bad() || config.tag.empty() || !seen.insert(config.tag).second)
      continue;
    std::vector<fe::BehaviorNote_t> notes;
    if (g.get_behavior_notes_for_plan_at_index(i, notes).is_good())
      config.compilesAtBuild =
          std::find(notes.begin(), notes.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != notes.end();
    configs.push_back(std::move(config));
  }
  return configs;
}

// Builds configuration `index` of `g` and keeps its plan in `file` (the built plan is the one
// the graph serializes).
inline Status buildToFile(PlanGraph &g, int64_t index, const tuning::CompiledPlanFile &file) {
  CASTOR_RETURN_IF_ERROR(feStatus(g.build_plan_at_index(index), "build_plan_at_index"));
  std::vector<uint8_t> bytes;
  if (g.serialize(bytes).is_good())
    tuning::storeCompiledPlan(file, bytes);
  return Status::ok();
}

// The graph of a layer, made with a given cuDNN handle (its plans created and filtered).
using GraphMaker = std::function<Expected<std::shared_ptr<PlanGraph>>(cudnnHandle_t)>;

// Jobs for a tuning::CompileAhead: the first `count` configurations that compile at build of the
// graph `make` returns, each built on a worker and kept in its plan file (the one
// engineCandidates gives the candidate `prefix` + tag of `layerKey`), unless that file exists.
// None when the disk cache is off (`cacheFile` ""): the plan would have nowhere to go.
inline std::vector<tuning::CompileJob> compileAheadJobs(const std::string &cacheFile, const std::string &layerKey,
                                                        const std::string &prefix, size_t count, GraphMaker make) {
  std::vector<tuning::CompileJob> jobs;
  if (cacheFile.empty())
    return jobs;
  for (size_t j = 0; j < count; ++j)
    jobs.push_back({layerKey + "\t" + prefix + "#" + std::to_string(j), layerKey, [=](cudnnHandle_t handle) {
                      try {
                        auto g = make(handle);
                        if (!g)
                          return;
                        size_t compiled = 0;
                        for (const EngineConfig &config : engineConfigs(**g)) {
                          if (!config.compilesAtBuild || compiled++ != j)
                            continue;
                          auto file = tuning::compiledPlanFile(cacheFile, layerKey, prefix + config.tag);
                          if (file && !tuning::loadCompiledPlan(*file))
                            (void)buildToFile(**g, config.index, *file);
                          return;
                        }
                      } catch (const std::exception &) {
                        // the layer's own build compiles it
                      }
                    }});
  return jobs;
}

// Every engine configuration of `g` (whose plans have been created and filtered), in the
// heuristics' order, as a tuner candidate named `prefix` + the engine's tag; each run executes
// the plan on ctx's cuDNN handle with the variant pack `pack` gives. With the layer's tuning key,
// an engine that compiles at build keeps its built plan on disk and later loads read it back
// (tuning/compiled_plans.h) instead of compiling again.
inline std::vector<tuning::Candidate> engineCandidates(DeviceContext &ctx, const std::shared_ptr<PlanGraph> &g,
                                                       const std::string &prefix, PackFn pack,
                                                       const std::string &layerKey = "") {
  std::vector<tuning::Candidate> candidates;
  DeviceContext *c = &ctx;
  for (const EngineConfig &config : engineConfigs(*g)) {
    const int64_t i = config.index;
    tuning::Candidate candidate;
    candidate.name = prefix + config.tag;
    candidate.compilesAtBuild = config.compilesAtBuild;
    // A compiled engine's plan is kept on disk once built (tuning/compiled_plans.h).
    std::optional<tuning::CompiledPlanFile> file;
    if (candidate.compilesAtBuild && !layerKey.empty())
      file = tuning::compiledPlanFile(tuning::cachePath(ctx), layerKey, candidate.name);
    candidate.build = [c, g, i, pack, file, layerKey,
                       compiles = config.compilesAtBuild]() -> Expected<tuning::Executable> {
      try {
        if (file) // compiled ahead in the background, perhaps still compiling
          tuning::awaitCompileAhead(layerKey);
        if (auto bytes = file ? tuning::loadCompiledPlan(*file) : std::nullopt) {
          // A file cuDNN cannot read back (damaged, or of another build) costs the compilation
          // below, which writes it anew.
          try {
            auto loaded = std::make_shared<PlanGraph>();
            int64_t workspace = 0;
            if (loaded->deserialize(c->cudnn, *bytes).is_good() && loaded->get_workspace_size(workspace).is_good())
              return executableOf(workspace, pack, [c, loaded](std::unordered_map<int64_t, void *> &variants,
                                                               void *ws) {
                return loaded->execute(c->cudnn, variants, ws);
              });
          } catch (const std::exception &) {
          }
        }
        // check_support_at_index skips configurations barred by the notes or the workspace limit.
        if (file)
          CASTOR_RETURN_IF_ERROR(buildToFile(*g, i, *file));
        else
          CASTOR_RETURN_IF_ERROR(feStatus(g->build_plan_at_index(i), "build_plan_at_index"));
        if (compiles)
          tuning::noteCompiled();
        auto plan = std::make_shared<BuiltPlan>();
        plan->graph = g;
        plan->index = i;
        int64_t workspace = 0;
        CASTOR_RETURN_IF_ERROR(
            feStatus(g->get_workspace_size_plan_at_index(i, workspace), "get_workspace_size_plan_at_index"));
        return executableOf(workspace, pack, [c, plan](std::unordered_map<int64_t, void *> &variants, void *ws) {
          return plan->graph->execute_plan_at_index(c->cudnn, variants, ws, plan->index);
        });
      } catch (const std::exception &ex) {
        return Status::error(std::string("cuDNN graph build: ") + ex.what());
      }
    };
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

} // namespace castor::cuda::frontend
