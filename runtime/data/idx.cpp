#include "data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace castor::idx {

Expected<Array> readIdx(const std::string &path) {
  gzFile f = gzopen(path.c_str(), "rb"); // reads plain files unchanged
  if (!f)
    return Status::error("cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0)
    bytes.insert(bytes.end(), buf, buf + n);
  int err = 0;
  std::string why = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0)
    return Status::error("reading " + path + ": " + why);
  auto bad = [&](const std::string &what) { return Status::error(path + ": not an IDX file of bytes: " + what); };
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    return bad("bad magic");
  if (bytes[2] != 0x08)
  {
    const char *hex = "0123456789abcdef";
    return bad(std::string("element type 0x") + hex[bytes[2] >> 4] + hex[bytes[2] & 15] +
               " (only 0x08, unsigned byte, is supported)");
  }
  const size_t rank = bytes[3];
  if (bytes.size() < 4 + 4 * rank)
    return bad("truncated header");
  Array a;
  uint64_t total = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint8_t *p = bytes.data() + 4 + 4 * i;
    uint32_t d = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
    a.dims.push_back(d);
    if (__builtin_mul_overflow(total, uint64_t(d), &total))
      return bad("too large");
  }
  const size_t header = 4 + 4 * rank;
  if (bytes.size() - header != total)
    return bad("the header announces " + std::to_string(total) + " bytes of data, the file holds " +
               std::to_string(bytes.size() - header));
  a.data.assign(bytes.begin() + long(header), bytes.end());
  return a;
}

Expected<std::string> findIdx(const std::string &dir, const std::string &base) {
  struct stat st;
  for (const std::string &name : {base, base + ".gz"}) {
    std::string path = dir + "/" + name;
    if (::stat(path.c_str(), &st) == 0)
      return path;
  }
  return Status::error("no " + base + " or " + base + ".gz in " + dir);
}

Expected<LabelledImages> readLabelledImages(const std::string &dir, const std::string &prefix) {
  auto ip = findIdx(dir, prefix + "-images-idx3-ubyte");
  if (!ip)
    return ip.status();
  auto lp = findIdx(dir, prefix + "-labels-idx1-ubyte");
  if (!lp)
    return lp.status();
  auto images = readIdx(*ip);
  if (!images)
    return images.status();
  auto labels = readIdx(*lp);
  if (!labels)
    return labels.status();
  if (images->dims.size() != 3)
    return Status::error(*ip + ": expected 3 dimensions (count, rows, cols), got " +
                         std::to_string(images->dims.size()));
  if (labels->dims.size() != 1 || labels->dims[0] != images->dims[0])
    return Status::error(*lp + ": expected " + std::to_string(images->dims[0]) + " labels");
  LabelledImages out;
  out.count = images->dims[0];
  out.rows = images->dims[1];
  out.cols = images->dims[2];
  out.pixels = std::move(images->data);
  out.labels = std::move(labels->data);
  return out;
}

} // namespace castor::idx
