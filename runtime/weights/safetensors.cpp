#include "weights/safetensors.h"

#include "weights/json.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

namespace castor::weights {

const NamedTensor *TensorFile::find(const std::string &name) const {
  for (const NamedTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

// safetensors spells the five element types as plan.proto does ("F32", "BF16", ...).
std::string safetensorsDtypeName(plan::DType dtype) {
  return plan::dtypeSize(dtype) == 0 ? std::string() : std::string(plan::DType_Name(dtype));
}

bool parseSafetensorsDtype(const std::string &name, plan::DType &out) {
  for (plan::DType d : {plan::F32, plan::F16, plan::BF16, plan::F64, plan::I64})
    if (name == safetensorsDtypeName(d)) {
      out = d;
      return true;
    }
  return false;
}

Status writeSafetensors(const TensorFile &file, const std::string &path) {
  std::string header = "{";
  bool first = true;
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[k, v] : file.metadata) {
      header += (first ? "" : ",") + json::quote(k) + ":" + json::quote(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const NamedTensor &t : file.tensors) {
    if (!names.insert(t.name).second || t.name == "__metadata__")
      return Status::error("writing " + path + ": duplicate or reserved tensor name '" + t.name + "'");
    int64_t count = 1;
    for (int64_t d : t.shape)
      count *= d;
    if (uint64_t(count) * plan::dtypeSize(t.dtype) != t.data.size() || safetensorsDtypeName(t.dtype).empty())
      return Status::error("writing " + path + ": tensor '" + t.name + "' has " +
                           std::to_string(t.data.size()) + " bytes, its dtype and shape need " +
                           std::to_string(uint64_t(count) * plan::dtypeSize(t.dtype)));
    header += std::string(first ? "" : ",") + json::quote(t.name) + ":{\"dtype\":\"" +
              safetensorsDtypeName(t.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
    first = false;
  }
  header += "}";
  // Pad the header with spaces so the data starts 8-byte aligned.
  while (header.size() % 8 != 0)
    header += ' ';

  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    return Status::error("writing " + path + ": " + std::strerror(errno));
  tmp = name.data();
  auto writeAll = [&](const void *data, size_t size) {
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
      ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      p += n;
      size -= size_t(n);
    }
    return true;
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  bool ok = writeAll(len, 8) && writeAll(header.data(), header.size());
  for (const NamedTensor &t : file.tensors)
    ok = ok && writeAll(t.data.data(), t.data.size());
  ok = ok && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  std::string why = ok ? "" : std::strerror(errno);
  ok = (::close(fd) == 0) && ok;
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    if (why.empty())
      why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::error("writing " + path + ": " + why);
  }
  return Status::ok();
}

int removeInterruptedWrites(const std::string &path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string prefix = target.filename().string() + ".tmp.";
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // mkstemp's suffix: six characters.
    if (name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0 &&
        it->is_regular_file(ec) && fs::remove(it->path(), ec))
      ++removed;
  }
  return removed;
}

Expected<TensorFile> readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return Status::error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes(size_t(in.tellg()));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char *>(bytes.data()), std::streamsize(bytes.size())))
    return Status::error("cannot read " + path + ": " + std::strerror(errno));
  return parseSafetensors(bytes.data(), bytes.size(), path);
}

Expected<TensorFile> parseSafetensors(const uint8_t *bytes, size_t size, const std::string &what) {
  auto fail = [&](const std::string &why) { return Status::error(what + ": not a valid safetensors file: " + why); };
  if (size < 8)
    return fail("shorter than its 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t(bytes[i]) << (8 * i);
  // A length beyond the bytes at hand is refused before anything is allocated for it.
  if (headerLen > size - 8)
    return fail("header length " + std::to_string(headerLen) + " exceeds the file size " + std::to_string(size));
  auto header = json::parse(std::string(reinterpret_cast<const char *>(bytes) + 8, size_t(headerLen)));
  if (!header)
    return fail(header.message());
  if (header->type != json::Value::Type::Object)
    return fail("the header is not a JSON object");
  const uint8_t *data = bytes + 8 + headerLen;
  const uint64_t dataLen = size - 8 - headerLen;
  TensorFile file;
  std::vector<std::pair<uint64_t, size_t>> order; // (begin, index) to return tensors in data order
  for (const auto &[name, entry] : header->object) {
    if (name == "__metadata__") {
      if (entry.type != json::Value::Type::Object)
        return fail("__metadata__ is not an object");
      for (const auto &[k, v] : entry.object) {
        if (v.type != json::Value::Type::String)
          return fail("__metadata__ values must be strings");
        file.metadata[k] = v.string;
      }
      continue;
    }
    const json::Value *dtype = entry.get("dtype"), *shape = entry.get("shape"), *offsets = entry.get("data_offsets");
    if (!dtype || dtype->type != json::Value::Type::String || !shape ||
        shape->type != json::Value::Type::Array || !offsets || offsets->type != json::Value::Type::Array ||
        offsets->array.size() != 2)
      return fail("tensor '" + name + "' lacks dtype, shape or data_offsets");
    NamedTensor t;
    t.name = name;
    if (!parseSafetensorsDtype(dtype->string, t.dtype))
      return fail("tensor '" + name + "' has unsupported dtype " + dtype->string);
    uint64_t count = 1;
    for (const json::Value &d : shape->array) {
      if (!d.isInteger || d.integer < 0)
        return fail("tensor '" + name + "' has an invalid shape");
      t.shape.push_back(d.integer);
      if (__builtin_mul_overflow(count, uint64_t(d.integer), &count))
        return fail("tensor '" + name + "' is too large");
    }
    if (!offsets->array[0].isInteger || !offsets->array[1].isInteger || offsets->array[0].integer < 0 ||
        offsets->array[1].integer < offsets->array[0].integer)
      return fail("tensor '" + name + "' has invalid data_offsets");
    uint64_t begin = uint64_t(offsets->array[0].integer), end = uint64_t(offsets->array[1].integer);
    if (end > dataLen)
      return fail("tensor '" + name + "' data [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") lies beyond the " + std::to_string(dataLen) + " data bytes (truncated file?)");
    uint64_t need = 0;
    if (__builtin_mul_overflow(count, plan::dtypeSize(t.dtype), &need))
      return fail("tensor '" + name + "' is too large");
    if (end - begin != need)
      return fail("tensor '" + name + "' has " + std::to_string(end - begin) + " bytes, its dtype and shape need " +
                  std::to_string(need));
    t.data.assign(data + begin, data + end);
    order.emplace_back(begin, file.tensors.size());
    file.tensors.push_back(std::move(t));
  }
  std::stable_sort(order.begin(), order.end());
  TensorFile sorted;
  sorted.metadata = std::move(file.metadata);
  for (const auto &[begin, index] : order)
    sorted.tensors.push_back(std::move(file.tensors[index]));
  return sorted;
}

} // namespace castor::weights
