// TensorBoard event files (event_file.h).
#include "train/event_file.h"

#include "tensorboard_event.pb.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace castor::train {

namespace {

// The table of the reflected Castagnoli polynomial, byte at a time.
const std::array<uint32_t, 256> &crcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

double secondsSinceEpoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  const auto &table = crcTable();
  const auto *p = static_cast<const uint8_t *>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(const void *data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

Expected<std::unique_ptr<EventFile>> EventFile::create(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::error("cannot create " + dir + ": " + ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const std::string path = dir + "/events.out.tfevents." + std::to_string(int64_t(secondsSinceEpoch())) + "." +
                           host + ".castor";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return Status::error("cannot open " + path + " for writing: " + std::strerror(errno));
  std::unique_ptr<EventFile> file(new EventFile(f, path));
  tensorboard::Event first;
  first.set_wall_time(secondsSinceEpoch());
  first.set_file_version("brain.Event:2");
  CASTOR_RETURN_IF_ERROR(file->writeRecord(first.SerializeAsString()));
  return file;
}

EventFile::~EventFile() {
  if (file_)
    std::fclose(file_);
}

Status EventFile::addScalars(int64_t step, const std::vector<std::pair<std::string, double>> &scalars) {
  tensorboard::Event e;
  e.set_wall_time(secondsSinceEpoch());
  e.set_step(step);
  for (const auto &[tag, value] : scalars) {
    tensorboard::SummaryValue *v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  return writeRecord(e.SerializeAsString());
}

Status EventFile::writeRecord(const std::string &data) {
  uint8_t header[12];
  const uint64_t length = data.size();
  for (int i = 0; i < 8; ++i)
    header[i] = uint8_t(length >> (8 * i));
  const uint32_t lengthCrc = maskedCrc32c(header, 8), dataCrc = maskedCrc32c(data.data(), data.size());
  for (int i = 0; i < 4; ++i)
    header[8 + i] = uint8_t(lengthCrc >> (8 * i));
  uint8_t footer[4];
  for (int i = 0; i < 4; ++i)
    footer[i] = uint8_t(dataCrc >> (8 * i));
  if (std::fwrite(header, 1, 12, file_) != 12 || std::fwrite(data.data(), 1, data.size(), file_) != data.size() ||
      std::fwrite(footer, 1, 4, file_) != 4 || std::fflush(file_) != 0)
    return Status::error("writing " + path_ + ": " + std::strerror(errno));
  return Status::ok();
}

} // namespace castor::train
