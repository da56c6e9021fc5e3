// The compiled engines' plans kept beside the tuning cache (runtime/cuda/tuning/compiled_plans.h),
// without a GPU: where a plan's file goes, that a plan reads back as written, and that a file of
// another key, an empty or truncated one, or a missing one reads as a miss.
#include "cuda/tuning/compiled_plans.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace castor::cuda::tuning;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string name = (fs::temp_directory_path() / "castor-compiled-plans-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const std::string kKey = "conv2d.dgrad|f16|x:nhwc=256,256,56,56|accumulate";

} // namespace

TEST_CASE("compiled plans live beside the tuning cache, one file per layer and candidate", "[compiled-plans]") {
  CHECK_FALSE(compiledPlanFile("", kKey, "cudnn+add:eng4_k24=3")); // the disk cache is off
  auto a = compiledPlanFile("/c/tuning-NVIDIA_H200-132sm-cudnn91900.txt", kKey, "cudnn+add:eng4_k24=3");
  auto b = compiledPlanFile("/c/tuning-NVIDIA_H200-132sm-cudnn91900.txt", kKey, "cudnn+add:eng4_k24=10");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(fs::path(a->path).parent_path() == "/c/tuning-NVIDIA_H200-132sm-cudnn91900.plans");
  CHECK(a->path != b->path);
  CHECK(a->key == kKey + "\tcudnn+add:eng4_k24=3");
}

TEST_CASE("a compiled plan reads back as written; anything else is a miss", "[compiled-plans]") {
  TempDir dir;
  const std::string cache = (dir.path / "tuning-GPU-1sm-cudnn1.txt").string();
  auto file = compiledPlanFile(cache, kKey, "cudnn+add:eng4");
  REQUIRE(file);
  CHECK_FALSE(loadCompiledPlan(*file)); // nothing written yet

  std::vector<uint8_t> bytes{0, 1, 2, '\n', 255, 7};
  storeCompiledPlan(*file, bytes); // creates the directory
  auto back = loadCompiledPlan(*file);
  REQUIRE(back);
  CHECK(*back == bytes);
  for (const auto &e : fs::directory_iterator(fs::path(file->path).parent_path()))
    CHECK(e.path().string().find(".tmp.") == std::string::npos); // written atomically

  // The same path under another key (a hash collision, or a file from elsewhere): a miss.
  CompiledPlanFile other = *file;
  other.key = kKey + "\tcudnn+add:eng5";
  CHECK_FALSE(loadCompiledPlan(other));

  // A file with its key but no plan, or truncated inside its key line: a miss.
  { std::ofstream(file->path, std::ios::trunc) << file->key << '\n'; }
  CHECK_FALSE(loadCompiledPlan(*file));
  { std::ofstream(file->path, std::ios::trunc) << file->key.substr(0, 10); }
  CHECK_FALSE(loadCompiledPlan(*file));

  // A directory that cannot be made: storing fails quietly, loading misses.
  CompiledPlanFile blocked{(dir.path / "tuning-GPU-1sm-cudnn1.txt" / "x.plans" / "p.bin").string(), file->key};
  { std::ofstream(dir.path / "tuning-GPU-1sm-cudnn1.txt") << "a file, not a directory\n"; }
  storeCompiledPlan(blocked, bytes);
  CHECK_FALSE(loadCompiledPlan(blocked));
}
