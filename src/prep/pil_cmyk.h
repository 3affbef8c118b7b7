// PIL's conversion of 4-component JPEG samples to RGB, shared by the full and the partial decode.
#pragma once

#include <cstddef>
#include <cstdint>

namespace joader {

// libjpeg returns the stored samples s; PIL reads 4-component JPEGs as Adobe-inverted ("CMYK;I"),
// so its ink values are 255 - s, which its cmyk2rgb turns into R = K' - C*K'/255 with
// K' = 255 - K = s_K, where C*K'/255 is Pillow's MULDIV255 (rounded to nearest).
// `pixels` CMYK pixels (4 bytes each) in, as many RGB pixels (3 bytes each) out.
inline void pil_cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const int nk = cmyk[3];
    for (int c = 0; c < 3; ++c) {
      const int t = (255 - cmyk[c]) * nk + 128;
      rgb[c] = static_cast<uint8_t>(nk - (((t >> 8) + t) >> 8));
    }
  }
}

}  // namespace joader
