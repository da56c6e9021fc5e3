#include "cuda/base/step_timeline.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace castor::cuda {

namespace {
constexpr size_t kMaxRows = 4096; // enough for a measured run; later rows are not recorded

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
} // namespace

StepTimeline::StepTimeline(std::string title, std::vector<std::string> spans)
    : title_(std::move(title)), spans_(std::move(spans)) {
  const char *env = std::getenv("CASTOR_STEP_TIMELINE");
  on_ = env && *env && std::strcmp(env, "0") != 0;
}

void StepTimeline::begin(cudaStream_t stream) {
  if (!on_ || rows_.size() >= kMaxRows)
    return;
  rows_.emplace_back();
  mark(stream);
}

void StepTimeline::mark(cudaStream_t stream) {
  if (!on_ || rows_.empty() || rows_.size() > kMaxRows || rows_.back().marks.size() > spans_.size())
    return;
  cudaEvent_t e = nullptr;
  if (cudaEventCreate(&e) != cudaSuccess)
    return;
  cudaEventRecord(e, stream);
  rows_.back().marks.push_back(e);
}

void StepTimeline::host(const std::string &name, double ms) {
  if (on_ && !rows_.empty())
    rows_.back().host.push_back({name, ms});
}

StepTimeline::~StepTimeline() {
  if (!on_)
    return;
  std::map<std::string, std::vector<double>> values;
  const size_t skip = std::min<size_t>(5, rows_.size() / 4); // warm-up rows
  for (size_t r = 0; r < rows_.size(); ++r) {
    Row &row = rows_[r];
    const bool whole = row.marks.size() == spans_.size() + 1;
    for (cudaEvent_t e : row.marks)
      cudaEventSynchronize(e);
    if (r >= skip && whole) {
      for (size_t s = 0; s < spans_.size(); ++s) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, row.marks[s], row.marks[s + 1]) == cudaSuccess)
          values[spans_[s]].push_back(ms);
      }
      if (!gapName_.empty() && r > 0 && rows_[r - 1].marks.size() == spans_.size() + 1) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, rows_[r - 1].marks.back(), row.marks.front()) == cudaSuccess)
          values[gapName_].push_back(ms);
      }
      for (auto &[name, ms] : row.host)
        values[name].push_back(ms);
    }
  }
  std::fprintf(stderr, "castor-run: timeline of %s, medians over %zu rows (ms):", title_.c_str(),
               rows_.size() > skip ? rows_.size() - skip : 0);
  for (auto &[name, v] : values)
    std::fprintf(stderr, " %s %.2f;", name.c_str(), median(v));
  std::fprintf(stderr, "\n");
  for (Row &row : rows_)
    for (cudaEvent_t e : row.marks)
      cudaEventDestroy(e);
}

} // namespace castor::cuda
