#include "source/source.h"

#include "source/source_io.h"

namespace joader {

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
  if (kind == "synthetic") return source_detail::open_synthetic(spec, arg);
  if (kind == "tar") return source_detail::open_tar(spec, arg, progress, data_root);
  throw SourceError("unknown source kind '" + kind + "' in '" + spec +
                    "' (expected imagefolder, filelist, lmdb, tar or synthetic)");
}

}  // namespace joader
