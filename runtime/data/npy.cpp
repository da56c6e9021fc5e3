#include "data/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace castor::npy {
namespace {

const char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

// Finds the value text of `key` in the header dict ("{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }").
std::string field(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return {};
  at = header.find(':', at);
  if (at == std::string::npos)
    return {};
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  if (at >= header.size())
    return {};
  char open = header[at];
  char close = open == '(' ? ')' : open == '\'' ? '\'' : open == '"' ? '"' : ',';
  size_t end = header.find(close, at + 1);
  if (end == std::string::npos)
    end = header.find('}', at);
  if (end == std::string::npos)
    return {};
  return open == '(' || open == '\'' || open == '"' ? header.substr(at + 1, end - at - 1)
                                                      : header.substr(at, end - at);
}

} // namespace

Expected<weights::NamedTensor> readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string &why) { return Status::error(path + ": not a supported .npy file: " + why); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    return fail("missing the \\x93NUMPY magic");
  int major = bytes[6];
  size_t headerLen, start;
  if (major == 1) {
    headerLen = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail("truncated header");
    headerLen = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
    start = 12;
  } else {
    return fail("format version " + std::to_string(major));
  }
  if (start + headerLen > bytes.size())
    return fail("truncated header");
  std::string header(bytes.begin() + long(start), bytes.begin() + long(start + headerLen));
  std::string descr = field(header, "descr"), fortran = field(header, "fortran_order"),
              shapeText = field(header, "shape");
  weights::NamedTensor t;
  uint64_t fileElem;
  if (descr == "<f4") {
    t.dtype = plan::F32;
    fileElem = 4;
  } else if (descr == "<f8") {
    t.dtype = plan::F64;
    fileElem = 8;
  } else if (descr == "<f2") {
    t.dtype = plan::F16;
    fileElem = 2;
  } else if (descr == "<i8") {
    t.dtype = plan::I64;
    fileElem = 8;
  } else if (descr == "<i4") {
    t.dtype = plan::I64;
    fileElem = 4;
  } else {
    return fail("dtype '" + descr + "' (supported: <f4, <f8, <f2, <i8, <i4)");
  }
  size_t pos = 0;
  uint64_t count = 1;
  while (pos < shapeText.size()) {
    while (pos < shapeText.size() && (shapeText[pos] == ' ' || shapeText[pos] == ','))
      ++pos;
    if (pos >= shapeText.size())
      break;
    size_t end = pos;
    while (end < shapeText.size() && shapeText[end] >= '0' && shapeText[end] <= '9')
      ++end;
    if (end == pos)
      return fail("invalid shape (" + shapeText + ")");
    int64_t d = std::stoll(shapeText.substr(pos, end - pos));
    t.shape.push_back(d);
    count *= uint64_t(d);
    pos = end;
  }
  if (fortran == "True" && t.shape.size() > 1)
    return fail("Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  size_t dataStart = start + headerLen;
  if (bytes.size() - dataStart < count * fileElem)
    return fail("expected " + std::to_string(count * fileElem) + " data bytes, found " +
                std::to_string(bytes.size() - dataStart));
  const uint8_t *data = bytes.data() + dataStart;
  if (descr == "<i4") {
    t.data.resize(count * 8);
    for (uint64_t i = 0; i < count; ++i) {
      int32_t v;
      std::memcpy(&v, data + 4 * i, 4);
      int64_t w = v;
      std::memcpy(t.data.data() + 8 * i, &w, 8);
    }
  } else {
    t.data.assign(data, data + count * fileElem);
  }
  return t;
}

Status writeNpy(const weights::NamedTensor &t, const std::string &path) {
  std::string descr;
  switch (t.dtype) {
  case plan::F32:
    descr = "<f4";
    break;
  case plan::F64:
    descr = "<f8";
    break;
  case plan::F16:
    descr = "<f2";
    break;
  case plan::I64:
    descr = "<i8";
    break;
  default:
    return Status::error("writing " + path + ": .npy has no " + plan::dtypeName(t.dtype) + " dtype");
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i)
    shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that magic + version + length + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  out.write(kMagic, 6);
  char version[2] = {1, 0};
  out.write(version, 2);
  char len[2] = {char(header.size() & 0xFF), char(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), long(header.size()));
  out.write(reinterpret_cast<const char *>(t.data.data()), long(t.data.size()));
  if (!out)
    return Status::error("cannot write " + path);
  return Status::ok();
}

} // namespace castor::npy
