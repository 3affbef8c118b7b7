// GIF: prep/image_formats.h says what is decoded and how.
#include <cstring>
#include <memory>
#include <vector>

#include <gif_lib.h>

#include "prep/formats/decoders.h"

namespace joader::formats {

ImageSize probe_gif(std::span<const uint8_t> d, uint64_t max_pixels) {
  if (d.size() < 10) return {};
  check_pixels(le16(d, 6), le16(d, 8), max_pixels, "GIF");
  return {le16(d, 6), le16(d, 8)};
}

namespace {

struct GifMemory {
  std::span<const uint8_t> data;
  size_t at = 0;
};

int gif_read(GifFileType* gif, GifByteType* out, int n) {
  auto* m = static_cast<GifMemory*>(gif->UserData);
  const size_t take = std::min<size_t>(size_t(n), m->data.size() - m->at);
  std::memcpy(out, m->data.data() + m->at, take);
  m->at += take;
  return int(take);
}

const char* gif_error(int code) {
  const char* what = GifErrorString(code);
  return what != nullptr ? what : "unknown error";
}

}  // namespace

void decode_gif(std::span<const uint8_t> d, uint64_t max_pixels, Image& img) {
  GifMemory memory{d};
  int error = 0;
  GifFileType* gif = DGifOpen(&memory, gif_read, &error);
  if (gif == nullptr) throw PrepError(std::string("corrupt GIF: ") + gif_error(error));
  std::unique_ptr<GifFileType, void (*)(GifFileType*)> closer(gif, [](GifFileType* g) { DGifCloseFile(g, nullptr); });
  check_pixels(gif->SWidth, gif->SHeight, max_pixels, "GIF");
  // Only the first image is read (what PIL's convert() of a freshly opened GIF shows).
  GifRecordType record;
  do {
    if (DGifGetRecordType(gif, &record) == GIF_ERROR)
      throw PrepError(std::string("corrupt GIF: ") + gif_error(gif->Error));
    if (record == EXTENSION_RECORD_TYPE) {
      int code;
      GifByteType* ext;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) throw PrepError("corrupt GIF: bad extension block");
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) throw PrepError("corrupt GIF: bad extension block");
      }
    }
  } while (record != IMAGE_DESC_RECORD_TYPE && record != TERMINATE_RECORD_TYPE);
  if (record != IMAGE_DESC_RECORD_TYPE) throw PrepError("corrupt GIF: no image");
  if (DGifGetImageDesc(gif) == GIF_ERROR) throw PrepError("corrupt GIF: bad image descriptor");
  const GifImageDesc& frame = gif->Image;
  if (frame.Width > 0 && frame.Height > 0) check_pixels(frame.Width, frame.Height, max_pixels, "GIF");
  const ColorMapObject* map = frame.ColorMap != nullptr ? frame.ColorMap : gif->SColorMap;
  const uint32_t width = gif->SWidth, height = gif->SHeight;
  auto colour = [&](uint32_t index, uint8_t* out) {
    if (map != nullptr && int(index) < map->ColorCount) {
      out[0] = map->Colors[index].Red, out[1] = map->Colors[index].Green, out[2] = map->Colors[index].Blue;
    } else {
      out[0] = out[1] = out[2] = 0;
    }
  };
  resize_image(img, width, height);
  uint8_t background[3];
  colour(uint32_t(gif->SBackGroundColor), background);
  for (size_t i = 0; i < size_t{width} * height; ++i) std::memcpy(&img.rgb[3 * i], background, 3);
  if (frame.Width <= 0 || frame.Height <= 0) return;
  std::vector<GifPixelType> line(size_t(frame.Width));
  std::vector<int> rows;
  if (frame.Interlace) {
    for (int start : {0, 4, 2, 1}) {
      for (int y = start; y < frame.Height; y += start == 0 ? 8 : start == 4 ? 8 : start == 2 ? 4 : 2)
        rows.push_back(y);
    }
  } else {
    for (int y = 0; y < frame.Height; ++y) rows.push_back(y);
  }
  for (int y : rows) {
    if (DGifGetLine(gif, line.data(), frame.Width) == GIF_ERROR)
      throw PrepError("corrupt or truncated GIF: image data cut short");
    const int64_t cy = int64_t{frame.Top} + y;
    if (cy < 0 || cy >= int64_t{height}) continue;
    for (int x = 0; x < frame.Width; ++x) {
      const int64_t cx = int64_t{frame.Left} + x;
      if (cx >= 0 && cx < int64_t{width}) colour(line[size_t(x)], &img.rgb[(size_t(cy) * width + size_t(cx)) * 3]);
    }
  }
}

}  // namespace joader::formats
