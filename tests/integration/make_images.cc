// make_images: writes an ImageFolder of small generated JPEGs for the tests and the demo, plus,
// on request, bad files in class0: truncated, zero-byte, wrong magic bytes, and a JPEG whose
// header declares 65000×65000 pixels (a decompression bomb). With --learnable, each class gets
// its own colour band across the image, so that a small CNN can learn the labels.
//
//   make_images DIR --classes 3 --per-class 10 --size 48x40 [--bad truncated,zero,magic,bomb] [--learnable]
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "prep/image_prep.h"
#include "source/source.h"

namespace {

void write(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Patches the frame header (SOF0/SOF2) to declare w×h pixels.
void declare_size(std::vector<uint8_t>& jpeg, uint16_t w, uint16_t h) {
  for (size_t i = 2; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) {
      jpeg[i + 5] = h >> 8, jpeg[i + 6] = h & 0xFF, jpeg[i + 7] = w >> 8, jpeg[i + 8] = w & 0xFF;
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate an ImageFolder for tests"};
  std::string dir, size = "48x40", bad;
  unsigned classes = 3, per_class = 10;
  app.add_option("dir", dir)->required();
  app.add_option("--classes", classes);
  app.add_option("--per-class", per_class);
  app.add_option("--size", size);
  app.add_option("--bad", bad, "comma-separated: truncated, zero, magic, bomb");
  bool learnable = false;
  app.add_flag("--learnable", learnable, "a class-specific colour band in every image");
  CLI11_PARSE(app, argc, argv);
  const unsigned w = std::stoul(size.substr(0, size.find('x'))), h = std::stoul(size.substr(size.find('x') + 1));
  uint32_t id = 0;
  for (unsigned c = 0; c < classes; ++c) {
    const auto cdir = std::filesystem::path(dir) / ("class" + std::to_string(c));
    std::filesystem::create_directories(cdir);
    for (unsigned i = 0; i < per_class; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "img_%04u.jpg", i);
      std::vector<uint8_t> jpeg = joader::synthetic_jpeg(id++, w, h);
      if (learnable) {
        joader::Image img = joader::decode_image(jpeg, uint64_t{w} * h);
        const uint8_t colour[3] = {uint8_t(37 * c % 256), uint8_t(97 * c % 256), uint8_t(173 * c % 256)};
        for (unsigned y = h / 3; y < 2 * h / 3; ++y) {
          for (unsigned x = 0; x < w; ++x) std::memcpy(&img.rgb[(uint64_t{y} * w + x) * 3], colour, 3);
        }
        jpeg = joader::encode_jpeg(img, 90);
      }
      write(cdir / name, jpeg);
    }
  }
  std::stringstream ss(bad);
  const auto c0 = std::filesystem::path(dir) / "class0";
  for (std::string kind; std::getline(ss, kind, ',');) {
    std::vector<uint8_t> jpeg = joader::synthetic_jpeg(id++, w, h);
    if (kind == "truncated") {
      jpeg.resize(jpeg.size() / 2);
    } else if (kind == "zero") {
      jpeg.clear();
    } else if (kind == "magic") {
      const std::string html = "<html>not an image</html>";
      jpeg.assign(html.begin(), html.end());
    } else if (kind == "bomb") {
      declare_size(jpeg, 65000, 65000);
    } else {
      std::fprintf(stderr, "unknown bad kind %s\n", kind.c_str());
      return 2;
    }
    write(c0 / ("bad_" + kind + ".jpg"), jpeg);
  }
  return 0;
}
