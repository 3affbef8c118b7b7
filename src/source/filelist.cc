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

namespace joader::source_detail {

std::unique_ptr<Source> open_filelist(const std::string& spec, const std::string& file,
                                      const std::function<void(size_t)>& progress, const std::string& data_root) {
  check_confined(spec, file, data_root);
  std::vector<uint8_t> bytes;
  const char* step = "";
  if (const int error = read_whole_file(file, bytes, step, data_root))
    throw SourceError(spec + ": " + step + ": " + errno_text(error));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t slash = file.rfind('/');
  const std::string base = slash == std::string::npos ? "" : file.substr(0, slash + 1);

  std::vector<ItemMeta> items;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') continue;
    const std::string where = spec + " line " + std::to_string(line_no) + ": ";
    const size_t tab = line.rfind('\t');
    if (tab == std::string_view::npos || tab == 0)
      throw SourceError(where + "expected 'path<TAB>label'");
    const std::string_view label_text = line.substr(tab + 1);
    int64_t label = 0;
    if (!parse_number(label_text, label))
      throw SourceError(where + "expected 'path<TAB>label', and label '" + std::string(label_text) +
                        "' is not an integer");
    const std::string_view path = line.substr(0, tab);
    std::string full = path.front() == '/' ? std::string(path) : base + std::string(path);
    struct stat st;
    if (::stat(full.c_str(), &st) != 0) throw SourceError(where + full + ": " + errno_text(errno));
    if (S_ISDIR(st.st_mode)) throw SourceError(where + full + ": is a directory");
    check_confined(spec + " line " + std::to_string(line_no), full, data_root);
    items.push_back({std::move(full), label, static_cast<uint64_t>(st.st_size), modified_ns(st)});
    if (progress && items.size() % 1000 == 0) progress(items.size());
  }
  if (items.empty()) throw SourceError(spec + ": no items");
  return std::make_unique<FileSource>(spec, std::move(items), std::vector<std::string>{}, data_root);
}

}  // namespace joader::source_detail
