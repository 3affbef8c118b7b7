#include "source/source.h"

#include "source/source_io.h"

#include <cstdio>

namespace joader {

std::string content_fingerprint(const Source& source) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits, over the fingerprint and the mtimes
  auto mix = [&h](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ULL;
  };
  const std::string list = fingerprint(source);
  mix(list.data(), list.size());
  for (uint32_t i = 0; i < source.size(); ++i) {
    const uint64_t t = static_cast<uint64_t>(source.item(i).modified_ns);
    unsigned char le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(t >> (8 * b));
    mix(le, sizeof le);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string fingerprint(const Source& source) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  auto mix = [&h](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ULL;
  };
  auto mix_u64 = [&mix](uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
    mix(le, sizeof le);
  };
  auto mix_text = [&](const std::string& text) {
    mix_u64(text.size());  // length-prefixed: no two lists hash the same bytes
    mix(text.data(), text.size());
  };
  mix_u64(source.size());
  for (uint32_t i = 0; i < source.size(); ++i) {
    const ItemMeta& item = source.item(i);
    mix_text(item.path);
    mix_u64(static_cast<uint64_t>(item.label));
    mix_u64(item.size);
  }
  mix_u64(source.classes().size());
  for (const std::string& c : source.classes()) mix_text(c);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::unique_ptr<Source> open_source(const std::string& spec, const std::function<void(size_t)>& progress,
                                    const std::string& data_root) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos)
    throw SourceError("source '" + spec +
                      "' is not KIND:ARG, with KIND imagefolder, filelist, lmdb, tar or synthetic");
  const std::string kind = spec.substr(0, colon), arg = spec.substr(colon + 1);
  if (kind == "imagefolder") return source_detail::open_imagefolder(spec, arg, progress, data_root);
  if (kind == "filelist") return source_detail::open_filelist(spec, arg, progress, data_root);
  if (kind == "lmdb") return source_detail::open_lmdb(spec, arg, progress, data_root);
  if (kind == "synthetic") return source_detail::open_synthetic(spec, arg, progress);
  if (kind == "tar") return source_detail::open_tar(spec, arg, progress, data_root);
  throw SourceError("unknown source kind '" + kind + "' in '" + spec +
                    "' (expected imagefolder, filelist, lmdb, tar or synthetic)");
}

}  // namespace joader
