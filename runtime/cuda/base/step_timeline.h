// Where a step's time goes when its inputs are decoded on the device beside it
// (CASTOR_STEP_TIMELINE=1): GPU spans between events recorded on the streams, and host waits,
// summarised on stderr (medians over the steps) when the backend ends. Off, it costs a branch.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <vector>

namespace castor::cuda {

class StepTimeline {
public:
  // `spans` names the gaps between consecutive marks of one row (marks = spans + 1).
  StepTimeline(std::string title, std::vector<std::string> spans);
  ~StepTimeline();
  // Starts a row: its first mark on `stream`.
  void begin(cudaStream_t stream);
  // The next mark of the current row.
  void mark(cudaStream_t stream);
  // A host-side time (ms) of the current row, under its own name.
  void host(const std::string &name, double ms);
  // The GPU time between the end of one row and the start of the next, reported as `name`.
  void gapBetweenRows(std::string name) { gapName_ = std::move(name); }

  static double msSince(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  }

private:
  struct Row {
    std::vector<cudaEvent_t> marks;
    std::vector<std::pair<std::string, double>> host;
  };
  bool on_ = false;
  std::string title_, gapName_;
  std::vector<std::string> spans_;
  std::vector<Row> rows_;
};

} // namespace castor::cuda
