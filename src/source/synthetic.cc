#include "source/source_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <map>
#include <array>
#include <cerrno>
#include <cstdint>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <utility>

#include "prep/image_prep.h"

namespace joader::source_detail {
namespace {

class SyntheticSource : public IndexedSource {
 public:
  SyntheticSource(const std::string& spec, uint32_t count, uint32_t width, uint32_t height,
                  const std::function<void(size_t)>& progress)
      : IndexedSource(spec), width_(width), height_(height) {
    for (int c = 0; c < 10; ++c) classes_.push_back("class" + std::to_string(c));
    items_.reserve(count);
    for (uint32_t id = 0; id < count; ++id) {
      items_.push_back({"synthetic:" + std::to_string(id), id % 10, 0});
      if (progress && items_.size() % 1000 == 0) progress(items_.size());
    }
  }

  void read(uint32_t id, std::vector<uint8_t>& out) const override {
    item(id);  // range check
    out = synthetic_jpeg(id, width_, height_);
  }
  std::pair<uint32_t, uint32_t> known_image_size(uint32_t) const override { return {width_, height_}; }

 private:
  uint32_t width_, height_;
};

// Each item costs the daemon ~100 bytes (index and sampler): a 30-byte request for 2^24 items took
// 2 GiB. 2^20 (~100 MiB) is more than any benchmark here needs.
constexpr uint32_t kMaxSyntheticItems = 1u << 20;
// Each read renders the whole image in memory (3 bytes per pixel): 8192² is 192 MiB.
constexpr uint32_t kMaxSyntheticSide = 8192;

// SplitMix64: a tiny, well-mixed generator, so that the synthetic images depend on nothing but id.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::unique_ptr<Source> open_synthetic(const std::string& spec, std::string_view arg,
                                       const std::function<void(size_t)>& progress) {
  const auto bad = [&] {
    return SourceError("bad synthetic spec '" + spec +
                       "': expected synthetic:COUNT[:WxH], COUNT in 1.." + std::to_string(kMaxSyntheticItems) +
                       ", W and H in 1.." + std::to_string(kMaxSyntheticSide));
  };
  const size_t colon = arg.find(':');
  uint32_t count = 0, width = 256, height = 256;
  if (!parse_number(arg.substr(0, colon), count) || count == 0 || count > kMaxSyntheticItems) throw bad();
  if (colon != std::string_view::npos) {
    const std::string_view size = arg.substr(colon + 1);
    const size_t x = size.find('x');
    if (x == std::string_view::npos || !parse_number(size.substr(0, x), width) ||
        !parse_number(size.substr(x + 1), height))
      throw bad();
  }
  if (width == 0 || height == 0 || width > kMaxSyntheticSide || height > kMaxSyntheticSide) throw bad();
  return std::make_unique<SyntheticSource>(spec, count, width, height, progress);
}

}  // namespace joader::source_detail

namespace joader {

using source_detail::splitmix64;

std::vector<uint8_t> synthetic_jpeg(uint32_t id, uint32_t width, uint32_t height) {
  uint64_t state = id;
  const auto uniform = [&](int64_t n) {
    return static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(n));
  };
  const int64_t w = width, h = height;

  // A two-colour gradient along a random direction.
  std::array<int64_t, 3> from, to;
  for (int c = 0; c < 3; ++c) {
    from[c] = uniform(256);
    to[c] = uniform(256);
  }
  const int64_t dx = uniform(257) - 128, dy = uniform(257) - 128;
  const int64_t p_min = std::min<int64_t>(0, dx * (w - 1)) + std::min<int64_t>(0, dy * (h - 1));
  const int64_t p_span = std::max<int64_t>(1, std::abs(dx) * (w - 1) + std::abs(dy) * (h - 1));

  // A few filled circles and rectangles.
  struct Shape {
    bool circle;
    int64_t x0, y0, x1, y1;  // bounding box; a circle's centre is its middle
    std::array<uint8_t, 3> color;
  };
  std::array<Shape, 5> shapes;
  for (Shape& s : shapes) {
    s.circle = uniform(2) == 0;
    s.x0 = uniform(w);
    s.y0 = uniform(h);
    s.x1 = s.x0 + 1 + uniform(std::max<int64_t>(1, w / 2));
    s.y1 = s.y0 + 1 + uniform(std::max<int64_t>(1, h / 2));
    for (uint8_t& c : s.color) c = static_cast<uint8_t>(uniform(256));
  }
  const uint64_t seed = splitmix64(state);

  Image img{width, height, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const int64_t t = (dx * x + dy * y - p_min) * 255 / p_span;
      std::array<int64_t, 3> rgb;
      for (int c = 0; c < 3; ++c) rgb[c] = from[c] + (to[c] - from[c]) * t / 255;
      for (const Shape& s : shapes) {
        bool inside = x >= s.x0 && x < s.x1 && y >= s.y0 && y < s.y1;
        if (inside && s.circle) {
          // In the ellipse inscribed in the box: (ex / bw)^2 + (ey / bh)^2 <= 1, with (ex, ey)
          // twice the offset of the pixel's centre from the box's.
          const int64_t bw = s.x1 - s.x0, bh = s.y1 - s.y0;
          const int64_t ex = 2 * x + 1 - s.x0 - s.x1, ey = 2 * y + 1 - s.y0 - s.y1;
          inside = ex * ex * bh * bh + ey * ey * bw * bw <= bw * bw * bh * bh;
        }
        if (inside)
          for (int c = 0; c < 3; ++c) rgb[c] = s.color[c];
      }
      // Fine noise, as camera images have: it is what makes JPEG sizes and decode times realistic.
      uint64_t noise_state = seed ^ (static_cast<uint64_t>(y) << 32 | static_cast<uint64_t>(x));
      const uint64_t noise = splitmix64(noise_state);
      uint8_t* px = &img.rgb[static_cast<size_t>((y * w + x) * 3)];
      for (int c = 0; c < 3; ++c)
        px[c] = static_cast<uint8_t>(std::clamp<int64_t>(
            rgb[c] + static_cast<int64_t>((noise >> (8 * c)) & 63) - 32, 0, 255));
    }
  }
  return encode_jpeg(img, 90);
}

}  // namespace joader
