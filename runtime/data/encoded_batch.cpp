#include "data/encoded_batch.h"

#include "data/image_augment.h"
#include "data/image_decode.h"

namespace castor::data {

Status decodeEncodedBatch(const EncodedImageBatch &batch, std::vector<uint8_t> &pixels) {
  const size_t per = size_t(batch.outWidth) * size_t(batch.outHeight) * size_t(batch.channels);
  pixels.assign(batch.images.size() * per, 0);
  for (size_t i = 0; i < batch.images.size(); ++i) {
    const EncodedImage &e = batch.images[i];
    if (e.resize.empty)
      continue;
    Image image;
    if (!e.jpeg.empty()) {
      auto decoded = decodeImage(e.jpeg.data(), e.jpeg.size(), batch.channels, e.name);
      if (!decoded)
        return decoded.status();
      image = std::move(*decoded);
    } else {
      image.width = e.width;
      image.height = e.height;
      image.channels = batch.channels;
      image.pixels = e.pixels;
    }
    runResize(image, e.resize, batch.outWidth, batch.outHeight, pixels.data() + i * per);
  }
  return Status::ok();
}

} // namespace castor::data
