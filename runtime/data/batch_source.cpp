#include "data/batch_source.h"

#include "data/idx_source.h"
#include "data/npy_source.h"
#include "data/synthetic_source.h"

#include <functional>
#include <numeric>

namespace castor::data {
namespace {

// "prefix:DIR" -> DIR; "" when `spec` is not of that form.
std::string dirAfter(const std::string &spec, const std::string &prefix) {
  return spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : "";
}

} // namespace

Expected<std::unique_ptr<BatchSource>> openBatchSource(const std::string &spec, const BatchShape &shape,
                                                       const SourceOptions &options) {
  const int64_t batch = shape.images.empty() ? 0 : shape.images[0];
  if (spec == "synthetic") {
    int64_t classes = options.syntheticClasses > 0 ? options.syntheticClasses : shape.classes;
    if (classes <= 0)
      classes = 10;
    const int64_t perImage = batch > 0 ? std::accumulate(shape.images.begin() + 1, shape.images.end(), int64_t(1),
                                                         std::multiplies<int64_t>())
                                       : 0;
    return std::unique_ptr<BatchSource>(std::make_unique<SyntheticSource>(options.seed, batch, perImage, classes));
  }
  if (std::string dir = dirAfter(spec, "idx:"); !dir.empty()) {
    auto source = IdxSource::open(dir, shape.images, options.seed, options.normalization);
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
  return Status::error("unknown --data '" + spec + "' (synthetic, idx:DIR or npy:DIR)");
}

} // namespace castor::data
