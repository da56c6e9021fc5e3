#include "plan/plan_io.h"

#include "plan/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace castor::plan {
namespace {

void putLE(std::vector<uint8_t> &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}

uint64_t getLE(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

std::string errnoText() { return std::strerror(errno); }

Status writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return Status::error(errnoText());
    }
    data += n;
    size -= size_t(n);
  }
  return Status::ok();
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

Expected<std::vector<uint8_t>> encodePlan(const Plan &plan) {
  std::string payload;
  if (!plan.SerializeToString(&payload))
    return Status::error("cannot serialize the plan (is it larger than 2 GiB?)");
  std::vector<uint8_t> out(kPlanMagic, kPlanMagic + 8);
  putLE(out, kContainerVersion, 4);
  putLE(out, payload.size(), 8);
  Sha256Digest digest = sha256(payload.data(), payload.size());
  out.insert(out.end(), digest.begin(), digest.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Expected<Plan> decodePlan(const uint8_t *data, size_t size) {
  size_t magicBytes = std::min<size_t>(size, 8);
  if (size == 0 || std::memcmp(data, kPlanMagic, magicBytes) != 0)
    return Status::error("not a Castor plan (the file does not start with \"CASTORPL\")");
  if (size < kContainerHeaderBytes)
    return Status::error("truncated plan: the container header needs " +
                         std::to_string(kContainerHeaderBytes) + " bytes, the file has " +
                         std::to_string(size));
  uint32_t version = uint32_t(getLE(data + 8, 4));
  if (version != kContainerVersion)
    return Status::error("unsupported plan container version " + std::to_string(version) +
                         " (this runtime reads version " + std::to_string(kContainerVersion) + ")");
  uint64_t length = getLE(data + 12, 8);
  uint64_t actual = size - kContainerHeaderBytes;
  if (length != actual) {
    if (length > actual)
      return Status::error("truncated plan: expected " + std::to_string(length) +
                           " payload bytes, found " + std::to_string(actual) + " (file size " +
                           std::to_string(size) + ", expected " +
                           std::to_string(length + kContainerHeaderBytes) + ")");
    return Status::error("plan has trailing data: expected " + std::to_string(length) +
                         " payload bytes, found " + std::to_string(actual));
  }
  const uint8_t *payload = data + kContainerHeaderBytes;
  Sha256Digest stored;
  std::memcpy(stored.data(), data + 20, 32);
  Sha256Digest computed = sha256(payload, length);
  if (stored != computed)
    return Status::error("corrupt plan: SHA-256 of the payload is " + toHex(computed) +
                         ", the header says " + toHex(stored));
  if (length > size_t(INT32_MAX))
    return Status::error("plan payload of " + std::to_string(length) + " bytes is too large");
  Plan plan;
  if (!plan.ParseFromArray(payload, int(length)))
    return Status::error("corrupt plan: the payload is not a valid castor.plan.Plan message");
  if (plan.format_version() != kPlanFormatVersion)
    return Status::error("unsupported plan format version " + std::to_string(plan.format_version()) +
                         " (this runtime reads version " + std::to_string(kPlanFormatVersion) + ")");
  return plan;
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  auto bytes = encodePlan(plan);
  if (!bytes)
    return bytes.status().withContext("writing " + path);
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    return Status::error("writing " + path + ": cannot create a temporary file in " +
                         directoryOf(path) + ": " + errnoText());
  std::string tmp(name.data());
  Status s = writeAll(fd, bytes->data(), bytes->size());
  if (s && ::fchmod(fd, 0644) != 0)
    s = Status::error(errnoText());
  if (s && ::fsync(fd) != 0)
    s = Status::error("fsync: " + errnoText());
  if (::close(fd) != 0 && s)
    s = Status::error("close: " + errnoText());
  if (s && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::error("rename: " + errnoText());
  if (!s) {
    ::unlink(tmp.c_str());
    return s.withContext("writing " + path);
  }
  // Make the rename itself durable.
  int dir = ::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

namespace {
// Reads the file at `path` chunk by chunk into `consume`; `what` names it in errors.
Status readChunks(const std::string &path, const std::string &what,
                  const std::function<void(const uint8_t *, size_t)> &consume) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open " + what + path + ": " + errnoText());
  uint8_t chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::string why = errnoText();
      ::close(fd);
      return Status::error("cannot read " + what + path + ": " + why);
    }
    if (n == 0)
      break;
    consume(chunk, size_t(n));
  }
  ::close(fd);
  return Status::ok();
}
} // namespace

Expected<Plan> readPlanFile(const std::string &path) {
  std::vector<uint8_t> data;
  CASTOR_RETURN_IF_ERROR(
      readChunks(path, "plan ", [&](const uint8_t *p, size_t n) { data.insert(data.end(), p, p + n); }));
  auto plan = decodePlan(data.data(), data.size());
  if (!plan)
    return plan.status().withContext(path);
  return plan;
}

Expected<std::string> fileSha256(const std::string &path) {
  Sha256 hash;
  CASTOR_RETURN_IF_ERROR(readChunks(path, "", [&](const uint8_t *p, size_t n) { hash.update(p, n); }));
  return toHex(hash.finish());
}

Expected<std::string> weightsFileFor(const Plan &plan, const std::string &planPath, const std::string &explicitPath) {
  if (!explicitPath.empty() || !plan.has_weights_file())
    return explicitPath;
  const std::string path = directoryOf(planPath) + "/" + plan.weights_file().name();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error("the plan's weights file " + path + " is missing (castor compile writes it beside " +
                         planPath + "; give another with --weights)");
  auto digest = fileSha256(path);
  if (!digest)
    return digest.status();
  if (*digest != plan.weights_file().sha256())
    return Status::error("the weights file " + path + " is not the one compiled with " + planPath + " (SHA-256 " +
                         digest->substr(0, 16) + "..., the plan expects " + plan.weights_file().sha256().substr(0, 16) +
                         "...): recompile, or give the file to use with --weights");
  return path;
}

} // namespace castor::plan
