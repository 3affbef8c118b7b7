#include "common/source_spec.h"

#include <filesystem>

namespace joader {

std::optional<std::string> source_path(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string kind = spec.substr(0, colon);
  if (kind != "imagefolder" && kind != "filelist" && kind != "lmdb" && kind != "tar") return std::nullopt;
  return spec.substr(colon + 1);
}

std::string absolute_source(const std::string& spec) {
  const std::optional<std::string> path = source_path(spec);
  if (!path || path->empty() || path->front() == '/') return spec;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(*path, ec);
  if (ec) return spec;  // no working directory: the daemon will refuse the relative path
  return spec.substr(0, spec.find(':') + 1) + abs.string();
}

}  // namespace joader
