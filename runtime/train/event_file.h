// TensorBoard event files (`castor-run train --tensorboard DIR`): scalar summaries as Event
// records (tensorboard_event.proto) in TFRecord framing, the format TensorBoard reads: each
// record is its length (8 bytes, little-endian), the masked CRC-32C of those 8 bytes, the data,
// and the masked CRC-32C of the data.
#pragma once

#include "castor/status.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace castor::train {

class EventFile {
public:
  // A new file DIR/events.out.tfevents.<seconds>.<host>.castor (DIR is created), opened with its
  // file-version record.
  static Expected<std::unique_ptr<EventFile>> create(const std::string &dir);
  ~EventFile();

  // One Event at `step` with a scalar summary per (tag, value), written through to the file.
  Status addScalars(int64_t step, const std::vector<std::pair<std::string, double>> &scalars);

  const std::string &path() const { return path_; }

private:
  EventFile(std::FILE *f, std::string path) : file_(f), path_(std::move(path)) {}
  Status writeRecord(const std::string &data);

  std::FILE *file_;
  std::string path_;
};

// CRC-32C (Castagnoli) of `size` bytes, and TFRecord's mask of it.
uint32_t crc32c(const void *data, size_t size);
uint32_t maskedCrc32c(const void *data, size_t size);

} // namespace castor::train
