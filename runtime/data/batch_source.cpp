#include "data/batch_source.h"

#include "data/folder_source.h"
#include "data/idx_source.h"
#include "data/npy_source.h"
#include "data/synthetic_source.h"

#include <cstring>

namespace castor::data {
namespace {

// "prefix:DIR" -> DIR; "" when `spec` is not of that form.
std::string dirAfter(const std::string &spec, const std::string &prefix) {
  return spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : "";
}

} // namespace

void pixelsToValues(const std::vector<uint8_t> &pixels, const PixelShape &shape, const PixelTransform &transform,
                    std::vector<double> &values) {
  std::vector<uint8_t> f32(shape.count() * 4);
  pixelsToTensor(pixels.data(), shape, transform, plan::F32, f32.data());
  values.resize(shape.count());
  for (size_t i = 0; i < values.size(); ++i) {
    float v;
    std::memcpy(&v, &f32[4 * i], 4);
    values[i] = double(v);
  }
}

Expected<std::unique_ptr<BatchSource>> openBatchSource(const std::string &spec, const BatchShape &shape,
                                                       const SourceOptions &options) {
  if (spec == "synthetic") {
    int64_t classes = options.syntheticClasses > 0 ? options.syntheticClasses : shape.classes;
    if (classes <= 0)
      classes = 10;
    return std::unique_ptr<BatchSource>(std::make_unique<SyntheticSource>(options.seed, shape.images, classes));
  }
  if (std::string dir = dirAfter(spec, "idx:"); !dir.empty()) {
    auto source = IdxSource::open(dir, shape.images, options.seed, pixelTransform(options.mean.empty() ? std::vector<double>{0.2860} : options.mean,
                                                               options.std.empty() ? std::vector<double>{0.3530} : options.std, 1));
    if (!source)
      return source.status();
    return std::unique_ptr<BatchSource>(std::move(*source));
  }
  if (std::string dir = dirAfter(spec, "npy:"); !dir.empty()) {
    auto source = NpySource::open(dir, shape.images, shape.classes);
    if (!source)
      return source.status();
    return std::unique_ptr<BatchSource>(std::move(*source));
  }
  if (std::string dir = dirAfter(spec, "folder:"); !dir.empty()) {
    FolderOptions folder;
    folder.seed = options.seed;
    folder.reducedDecode = options.reducedDecode;
    folder.skipCorrupt = options.skipCorrupt;
    folder.augment = options.augment;
    folder.threads = options.threads;
    folder.deviceDecode = options.deviceDecode;
    folder.hostShare = options.hostShare;
    folder.mean = options.mean;
    folder.std = options.std;
    auto source = FolderSource::open(dir, shape.images, shape.classes, std::move(folder));
    if (!source)
      return source.status();
    return std::unique_ptr<BatchSource>(std::move(*source));
  }
  return Status::error("unknown --data '" + spec + "' (synthetic, idx:DIR, npy:DIR or folder:DIR)");
}

} // namespace castor::data
