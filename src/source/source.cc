#include "source/source.h"

#include "source/source_io.h"

#include <cstdio>

namespace joader {

namespace {

// FNV-1a, 64 bits: what the fingerprints hash with (their values are kept in state files and
// state_dict()s, so its byte order is fixed: integers as 8 little-endian bytes).
class Fnv1a64 {
 public:
  void bytes(const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ULL;
  }
  void u64(uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(le, sizeof le);
  }
  void text(const std::string& t) {  // length-prefixed: no two lists hash the same bytes
    u64(t.size());
    bytes(t.data(), t.size());
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h_));
    return out;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace

std::string fingerprint(const Source& source) {
  Fnv1a64 h;
  h.u64(source.size());
  for (uint32_t i = 0; i < source.size(); ++i) {
    const ItemMeta& item = source.item(i);
    h.text(item.path);
    h.u64(static_cast<uint64_t>(item.label));
    h.u64(item.size);
  }
  h.u64(source.classes().size());
  for (const std::string& c : source.classes()) h.text(c);
  return h.hex();
}

std::string content_fingerprint(const Source& source) {
  Fnv1a64 h;
  const std::string list = fingerprint(source);
  h.bytes(list.data(), list.size());
  for (uint32_t i = 0; i < source.size(); ++i) h.u64(static_cast<uint64_t>(source.item(i).modified_ns));
  return h.hex();
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
