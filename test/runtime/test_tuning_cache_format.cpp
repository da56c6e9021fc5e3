// The CUDA backend's tuning cache file without a GPU (runtime/cuda/tuning/cache_format.h): what
// the parser skips and reports, foreign and damaged files, and processes and threads sharing one
// file.
#include "cuda/tuning/cache_format.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace castor::cuda::tuning;
namespace fs = std::filesystem;

namespace {

const CacheIdentity kH200{"NVIDIA H200", 132, 91900};

// A fresh directory, removed with its files at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string name = (fs::temp_directory_path() / "castor-tuning-test-XXXXXX").string();
    REQUIRE(mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string &name) const { return (path / name).string(); }
};

void writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Files in `dir` other than the cache and its lock (left-over temporary files).
std::vector<std::string> strayFiles(const fs::path &dir, const std::string &cache) {
  std::vector<std::string> stray;
  for (const auto &e : fs::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (p != cache && p != cache + ".lock")
      stray.push_back(p);
  }
  return stray;
}

} // namespace

TEST_CASE("the parser counts what is not an entry and reads the header's identity", "[tuning-cache]") {
  const std::string text = "# Castor tuning cache: the candidate (cuDNN engine or fused graph) chosen per layer "
                           "signature.\n"
                           "# GPU NVIDIA H200 (132 SMs), cuDNN 91900.\n"
                           "# <layer signature>\\t<candidate>\\t<median ms when timed>\n"
                           "conv2d.fprop|f16|a\tcudnn:eng0\t0.25\n"
                           "\n"
                           "   \n"
                           "garbage without tabs\n"
                           "conv2d.fprop|f16|b\tcudnn:eng1\tnot-a-number\n"
                           "conv2d.fprop|f16|c\tcudnn:eng2\t1.5junk\n"
                           "\tcudnn:eng3\t1\n"
                           "batch_norm.training|x:f16\tex\t0.125\r\n";
  CacheTextReport report;
  const CacheEntries entries = parseCacheText(text, &report);
  CHECK(report.malformedLines == 4);
  REQUIRE(report.identity);
  CHECK(*report.identity == kH200);
  REQUIRE(entries.size() == 2);
  CHECK(entries.at("conv2d.fprop|f16|a").candidate == "cudnn:eng0");
  CHECK(entries.at("conv2d.fprop|f16|a").ms == 0.25);
  CHECK(entries.at("batch_norm.training|x:f16").candidate == "ex");
  // Without a report, as the fuzzer calls it: the same entries.
  CHECK(parseCacheText(text).size() == 2);
}

TEST_CASE("a header the parser cannot read names no identity", "[tuning-cache]") {
  for (const char *header : {"# GPU NVIDIA H200\n", "# GPU NVIDIA H200 (many SMs), cuDNN 91900.\n",
                             "# GPU NVIDIA H200 (132 SMs), cuDNN 91900. and more\n", "# a comment\n"}) {
    CacheTextReport report;
    parseCacheText(std::string(header) + "k\tc\t1\n", &report);
    CHECK(!report.identity);
    CHECK(report.malformedLines == 0);
  }
  // A name holding " (": the last one opens the count.
  CacheTextReport report;
  parseCacheText("# GPU Some GPU (rev 2) (84 SMs), cuDNN 90100.\n", &report);
  REQUIRE(report.identity);
  CHECK(report.identity->gpu == "Some GPU (rev 2)");
  CHECK(report.identity->sms == 84);
  CHECK(report.identity->cudnn == 90100);
}

TEST_CASE("formatted text reads back whole", "[tuning-cache]") {
  const CacheEntries entries{{"conv2d.wgrad|f16|x", {"cudnn:eng7_k2=3", 0.5}},
                             {"batch_norm_relu.pair|x:f16|deterministic", {"fused", 2.25}}};
  CacheTextReport report;
  const CacheEntries back = parseCacheText(formatCacheText(kH200, entries), &report);
  CHECK(report.malformedLines == 0);
  REQUIRE(report.identity);
  CHECK(*report.identity == kH200);
  REQUIRE(back.size() == entries.size());
  for (const auto &[key, e] : entries) {
    CHECK(back.at(key).candidate == e.candidate);
    CHECK(back.at(key).ms == e.ms);
  }
}

TEST_CASE("a foreign cache file is ignored with a warning and replaced by the next write", "[tuning-cache]") {
  TempDir dir;
  const std::string path = dir.file("tuning.txt");
  const CacheIdentity other{"NVIDIA A100-SXM4-80GB", 108, 90100};
  writeText(path, formatCacheText(other, {{"conv2d.fprop|f16|a", {"cudnn:eng0", 1}}}));
  const CacheFileRead read = readCacheFile(path, kH200);
  CHECK(read.entries.empty());
  CHECK(read.warning.find(path) != std::string::npos);
  CHECK(read.warning.find("NVIDIA A100-SXM4-80GB (108 SMs), cuDNN 90100") != std::string::npos);

  // Another cuDNN version on the same GPU is foreign too.
  writeText(path, formatCacheText({"NVIDIA H200", 132, 91000}, {{"conv2d.fprop|f16|a", {"cudnn:eng0", 1}}}));
  CHECK(readCacheFile(path, kH200).entries.empty());

  std::string error;
  REQUIRE(mergeIntoCacheFile(path, kH200, {{"conv2d.fprop|f16|b", {"cudnn:eng1", 2}}}, error));
  const CacheFileRead again = readCacheFile(path, kH200);
  CHECK(again.warning.empty());
  REQUIRE(again.entries.size() == 1); // the foreign entry is gone
  CHECK(again.entries.count("conv2d.fprop|f16|b") == 1);
  CHECK(strayFiles(dir.path, path).empty());
}

TEST_CASE("a damaged cache file keeps its good entries, warns once and is rewritten clean", "[tuning-cache]") {
  TempDir dir;
  const std::string path = dir.file("tuning.txt");
  writeText(path, formatCacheText(kH200, {{"conv2d.fprop|f16|a", {"cudnn:eng0", 1}}}) +
                      "\x01\x02 binary junk\nconv2d.dgrad|f16|a\tcudnn:eng4\n");
  const CacheFileRead read = readCacheFile(path, kH200);
  CHECK(read.entries.size() == 1);
  CHECK(read.warning == "2 lines of " + path + " are not tuning entries; they are dropped when the cache is next written");

  // Pure garbage: no identity, nothing kept, every line counted.
  writeText(dir.file("garbage.txt"), "\xff\xfe garbage\nmore garbage\n");
  const CacheFileRead garbage = readCacheFile(dir.file("garbage.txt"), kH200);
  CHECK(garbage.entries.empty());
  CHECK(garbage.warning.find("lines of") != std::string::npos);

  std::string error;
  REQUIRE(mergeIntoCacheFile(path, kH200, {{"conv2d.fprop|f16|b", {"cudnn:eng1", 2}}}, error));
  CacheTextReport report;
  const CacheEntries entries = parseCacheText(readText(path), &report);
  CHECK(report.malformedLines == 0);
  CHECK(entries.size() == 2);
  CHECK(readCacheFile(path, kH200).warning.empty());

  // A missing file: nothing, silently.
  const CacheFileRead missing = readCacheFile(dir.file("none.txt"), kH200);
  CHECK(missing.entries.empty());
  CHECK(missing.warning.empty());
}

TEST_CASE("merging keeps what others wrote and ours win on the same key", "[tuning-cache]") {
  TempDir dir;
  const std::string path = dir.file("sub/dir/tuning.txt"); // the directory is made
  std::string error;
  REQUIRE(mergeIntoCacheFile(path, kH200, {{"a", {"x", 1}}, {"b", {"x", 1}}}, error));
  REQUIRE(mergeIntoCacheFile(path, kH200, {{"b", {"y", 2}}, {"c", {"y", 2}}}, error));
  const CacheEntries entries = readCacheFile(path, kH200).entries;
  REQUIRE(entries.size() == 3);
  CHECK(entries.at("a").candidate == "x");
  CHECK(entries.at("b").candidate == "y");
  CHECK(entries.at("c").candidate == "y");
}

TEST_CASE("a write that cannot be made fails with a reason", "[tuning-cache]") {
  if (geteuid() == 0)
    return; // root writes anywhere
  TempDir dir;
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
  std::string error;
  CHECK(!mergeIntoCacheFile(dir.file("tuning.txt"), kH200, {{"a", {"x", 1}}}, error));
  CHECK(!error.empty());
  fs::permissions(dir.path, fs::perms::owner_all);
}

TEST_CASE("processes and threads sharing one cache file lose no entry", "[tuning-cache]") {
  TempDir dir;
  const std::string path = dir.file("tuning.txt");
  constexpr int kProcesses = 6, kThreads = 3, kRecords = 15;
  // Each writer records its entries one by one, as the tuner does: every record merges the
  // writer's entries so far into the file.
  auto writer = [&](const std::string &name) {
    CacheEntries ours;
    for (int i = 0; i < kRecords; ++i) {
      ours[name + "|layer" + std::to_string(i)] = {"cudnn:eng" + std::to_string(i), double(i)};
      std::string error;
      if (!mergeIntoCacheFile(path, kH200, ours, error))
        return false;
    }
    return true;
  };
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      bool ok = true;
      std::vector<std::thread> threads;
      std::vector<char> results(kThreads, 0);
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] { results[size_t(t)] = writer("p" + std::to_string(p) + "t" + std::to_string(t)); });
      for (std::thread &t : threads)
        t.join();
      for (char r : results)
        ok = ok && r;
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CacheTextReport report;
  const CacheEntries entries = parseCacheText(readText(path), &report);
  CHECK(report.malformedLines == 0);
  REQUIRE(report.identity);
  CHECK(*report.identity == kH200);
  CHECK(entries.size() == size_t(kProcesses * kThreads * kRecords));
  CHECK(strayFiles(dir.path, path).empty());
}
