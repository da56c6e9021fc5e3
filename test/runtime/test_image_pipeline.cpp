// The image-folder pipeline's decoding and augmentation against Pillow and torchvision, to the
// byte: test/fixtures/images/make_fixtures.py wrote the images, what Pillow makes of them and the
// list of cases (cases.txt) checked here.
#include "data/image_augment.h"
#include "data/image_decode.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

using namespace castor;
using Catch::Matchers::Contains;

namespace {

const std::string kFixtures = CASTOR_IMAGE_FIXTURES;

std::vector<uint8_t> readFixture(const std::string &name) {
  std::ifstream in(kFixtures + "/" + name, std::ios::binary);
  INFO(name);
  REQUIRE(in);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The lines of cases.txt whose first field is `kind`, split into fields.
std::vector<std::vector<std::string>> cases(const std::string &kind) {
  std::ifstream in(kFixtures + "/cases.txt");
  REQUIRE(in);
  std::vector<std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (!f.empty() && f[0] == kind)
      out.push_back(f);
  }
  REQUIRE(!out.empty());
  return out;
}

int toInt(const std::string &s) { return std::stoi(s); }

Expected<data::Image> decodeFixture(const std::string &name, int channels) {
  std::vector<uint8_t> bytes = readFixture(name);
  return data::decodeImage(bytes.data(), bytes.size(), channels, name);
}

// A decoded reference (.u8, HWC) as an Image, the input of the augmentation cases.
data::Image referenceImage(const std::string &name, int channels, int width, int height) {
  data::Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels = readFixture(name);
  REQUIRE(image.pixels.size() == size_t(width) * size_t(height) * size_t(channels));
  return image;
}

int maxAbsDiff(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  REQUIRE(a.size() == b.size());
  int most = 0;
  for (size_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::abs(int(a[i]) - int(b[i])));
  return most;
}

} // namespace

TEST_CASE("decoded JPEG and PNG pixels equal Pillow's convert(\"RGB\") and convert(\"L\")", "[image-pipeline]") {
  // Pillow links libjpeg-turbo too, and both decode with the ISLOW DCT and fancy upsampling.
  for (const auto &c : cases("decode")) {
    const std::string &name = c[1];
    const int channels = toInt(c[2]);
    INFO(name << " into " << channels << " channels");
    auto image = decodeFixture(name, channels);
    REQUIRE(image.isOk());
    CHECK(image->width == toInt(c[3]));
    CHECK(image->height == toInt(c[4]));
    CHECK(image->channels == channels);
    CHECK(maxAbsDiff(image->pixels, readFixture(c[5])) == 0);
  }
}

TEST_CASE("imageSize reads the size from the header alone", "[image-pipeline]") {
  for (const auto &c : cases("decode")) {
    INFO(c[1]);
    std::vector<uint8_t> bytes = readFixture(c[1]);
    auto size = data::imageSize(bytes.data(), bytes.size(), c[1]);
    REQUIRE(size.isOk());
    CHECK(size->first == toInt(c[3]));
    CHECK(size->second == toInt(c[4]));
  }
}

TEST_CASE("decodeImageScaled decodes at the smallest DCT scale keeping the size asked for", "[image-pipeline]") {
  // Half scale equals Pillow's Image.draft (also libjpeg's scaled ISLOW IDCT).
  for (const auto &c : cases("scaled")) {
    std::vector<uint8_t> bytes = readFixture(c[1]);
    int num = 0, denom = 0;
    auto image = data::decodeImageScaled(bytes.data(), bytes.size(), 3, toInt(c[2]), toInt(c[3]), c[1], &num, &denom);
    REQUIRE(image.isOk());
    CHECK(num == toInt(c[4]));
    CHECK(denom == toInt(c[5]));
    CHECK(image->width == toInt(c[2]));
    CHECK(image->height == toInt(c[3]));
    CHECK(maxAbsDiff(image->pixels, readFixture(c[6])) == 0);
  }

  // rgb.jpg is 61 x 47: every request gets at least its size, at the smallest scale that does.
  std::vector<uint8_t> jpeg = readFixture("rgb.jpg");
  const int scales[][2] = {{1, 8}, {1, 4}, {3, 8}, {1, 2}, {5, 8}, {3, 4}, {7, 8}, {1, 1}};
  for (int minWidth : {0, 1, 8, 9, 16, 17, 23, 24, 31, 32, 39, 46, 54, 60, 61, 62, 500}) {
    for (int minHeight : {0, 6, 13, 30, 47}) {
      INFO(minWidth << " x " << minHeight);
      int num = 0, denom = 0;
      auto image = data::decodeImageScaled(jpeg.data(), jpeg.size(), 1, minWidth, minHeight, "rgb.jpg", &num, &denom);
      REQUIRE(image.isOk());
      CHECK(image->channels == 1);
      CHECK(image->pixels.size() == size_t(image->width) * size_t(image->height));
      CHECK(image->width == (61 * num + denom - 1) / denom);
      CHECK(image->height == (47 * num + denom - 1) / denom);
      if (minWidth <= 61 && minHeight <= 47) {
        CHECK(image->width >= minWidth);
        CHECK(image->height >= minHeight);
      } else {
        CHECK(num == denom); // too large a request: full size
      }
      for (const auto &s : scales) // no smaller scale would do
        if (s[0] * denom < num * s[1])
          CHECK(((61 * s[0] + s[1] - 1) / s[1] < minWidth || (47 * s[0] + s[1] - 1) / s[1] < minHeight));
    }
  }

  // A PNG is always decoded at full size.
  std::vector<uint8_t> png = readFixture("rgb.png");
  int num = 0, denom = 0;
  auto image = data::decodeImageScaled(png.data(), png.size(), 3, 4, 4, "rgb.png", &num, &denom);
  REQUIRE(image.isOk());
  CHECK((num == 1 && denom == 1 && image->width == 33 && image->height == 21));
}

TEST_CASE("damaged and foreign files give an error naming the file", "[image-pipeline]") {
  std::vector<uint8_t> jpeg = readFixture("rgb.jpg");
  const std::vector<uint8_t> decoded = readFixture("rgb.jpg.rgb.u8");
  for (const auto &c : cases("error")) {
    std::string expected;
    for (size_t i = 2; i < c.size(); ++i)
      expected += (i > 2 ? " " : "") + c[i];
    INFO(c[1]);
    for (int channels : {1, 3}) {
      auto image = decodeFixture(c[1], channels);
      REQUIRE(!image.isOk());
      CHECK_THAT(image.message(), Contains(expected));
      // The thread's TurboJPEG handle still works (a failed tjDecompressHeader3 spoils a handle).
      auto good = data::decodeImage(jpeg.data(), jpeg.size(), 3, "rgb.jpg");
      REQUIRE(good.isOk());
      CHECK(good->pixels == decoded);
    }
  }
  // Every prefix of a JPEG (the header cut anywhere, then the data) is refused, never a crash.
  for (size_t n = 0; n < jpeg.size(); n += 7) {
    auto image = data::decodeImage(jpeg.data(), n, 3, "cut.jpg");
    INFO(n);
    REQUIRE(!image.isOk());
    CHECK_THAT(image.message(), Contains("cut.jpg: "));
  }
  std::vector<uint8_t> png = readFixture("rgb.png");
  for (size_t n = 0; n < png.size(); n += 7) {
    auto image = data::decodeImage(png.data(), n, 3, "cut.png");
    INFO(n);
    REQUIRE(!image.isOk());
    CHECK_THAT(image.message(), Contains("cut.png: "));
  }
  auto size = data::imageSize(png.data(), 10, "short.png");
  REQUIRE(!size.isOk());
  CHECK_THAT(size.message(), Contains("short.png: corrupt PNG"));
  auto twoChannels = data::decodeImage(jpeg.data(), jpeg.size(), 2, "rgb.jpg");
  REQUIRE(!twoChannels.isOk());
  CHECK_THAT(twoChannels.message(), Contains("rgb.jpg: cannot decode into 2 channels"));
}

TEST_CASE("threads decode at once, each with its own TurboJPEG handle", "[image-pipeline]") {
  std::vector<uint8_t> jpeg = readFixture("rgb.jpg"), truncated = readFixture("truncated.jpg");
  const std::vector<uint8_t> expected = readFixture("rgb.jpg.rgb.u8");
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto bad = data::decodeImage(truncated.data(), truncated.size(), 3, "truncated.jpg");
        auto good = data::decodeImage(jpeg.data(), jpeg.size(), 3, "rgb.jpg");
        if (bad.isOk() || !good.isOk() || good->pixels != expected)
          ++failures[size_t(t)];
      }
    });
  for (auto &thread : threads)
    thread.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("resizedCrop equals PIL's crop(box).resize(size, BILINEAR), flipped or not", "[image-pipeline]") {
  const auto decoded = cases("decode");
  for (const auto &c : cases("resized_crop")) {
    const int channels = toInt(c[2]);
    // The source's size: from its decode case.
    auto source = std::find_if(decoded.begin(), decoded.end(), [&](const auto &d) { return d[5] == c[1]; });
    REQUIRE(source != decoded.end());
    data::Image image = referenceImage(c[1], channels, toInt((*source)[3]), toInt((*source)[4]));
    data::CropBox box;
    box.left = toInt(c[3]);
    box.top = toInt(c[4]);
    box.width = toInt(c[5]);
    box.height = toInt(c[6]);
    const int outWidth = toInt(c[7]), outHeight = toInt(c[8]);
    const bool flip = c[9] == "1";
    INFO(c[1] << " box " << box.left << "," << box.top << " " << box.width << "x" << box.height << " to " << outWidth
              << "x" << outHeight << (flip ? " flipped" : ""));
    std::vector<uint8_t> out(size_t(outWidth) * size_t(outHeight) * size_t(channels), 0xab);
    data::resizedCrop(image, box, outWidth, outHeight, flip, out.data());
    CHECK(maxAbsDiff(out, readFixture(c[10])) == 0);
  }
}

TEST_CASE("resizeCenterCrop equals torchvision Resize + CenterCrop on PIL images", "[image-pipeline]") {
  for (const auto &c : cases("resize_center_crop")) {
    const int channels = toInt(c[2]), resize = toInt(c[5]), crop = toInt(c[6]);
    INFO(c[1] << " resize " << resize << " crop " << crop);
    data::Image image = referenceImage(c[1], channels, toInt(c[3]), toInt(c[4]));
    std::vector<uint8_t> out(size_t(crop) * size_t(crop) * size_t(channels), 0xab);
    data::resizeCenterCrop(image, resize, crop, out.data());
    CHECK(maxAbsDiff(out, readFixture(c[7])) == 0);
  }
}

TEST_CASE("randomResizedCropBox equals torchvision's RandomResizedCrop.get_params for the same draws",
          "[image-pipeline]") {
  const auto drawLine = cases("draws").front();
  std::vector<double> draws;
  for (size_t i = 1; i < drawLine.size(); ++i)
    draws.push_back(std::strtod(drawLine[i].c_str(), nullptr)); // repr() round-trips exactly
  for (const auto &c : cases("random_crop")) {
    INFO(c[1] << "x" << c[2] << " from draw " << c[7]);
    size_t next = size_t(toInt(c[7]));
    const size_t start = next;
    auto uniform = [&] {
      REQUIRE(next < draws.size());
      return draws[next++];
    };
    data::CropBox box = data::randomResizedCropBox(
        toInt(c[1]), toInt(c[2]), uniform, std::strtod(c[3].c_str(), nullptr), std::strtod(c[4].c_str(), nullptr),
        std::strtod(c[5].c_str(), nullptr), std::strtod(c[6].c_str(), nullptr));
    CHECK(box.left == toInt(c[8]));
    CHECK(box.top == toInt(c[9]));
    CHECK(box.width == toInt(c[10]));
    CHECK(box.height == toInt(c[11]));
    CHECK(next - start == size_t(toInt(c[12])));
  }
}
