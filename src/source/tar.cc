#include "source/source_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <archive.h>
#include <archive_entry.h>
#include <glob.h>
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
namespace {

struct TarMember {
  uint32_t shard;
  uint64_t offset, size;
};

class TarSource : public IndexedSource {
 public:
  TarSource(std::string spec, std::vector<std::string> shards, std::vector<ItemMeta> items,
            std::vector<TarMember> members, std::string root)
      : IndexedSource(std::move(spec), std::move(items)), shards_(std::move(shards)), members_(std::move(members)),
        root_(std::move(root)) {}

  void read(uint32_t id, std::vector<uint8_t>& out) const override { read_prefix(id, SIZE_MAX, out); }
  void read_prefix(uint32_t id, size_t n, std::vector<uint8_t>& out) const override {
    item(id);  // range check
    const TarMember& m = members_[id];
    const char* step = "";
    if (const int error = read_file_range(shards_[m.shard], m.offset, std::min<uint64_t>(m.size, n), out, step, root_))
      fail_read(id, std::string(step) + ": " + errno_text(error));
  }

 private:
  std::vector<std::string> shards_;
  std::vector<TarMember> members_;
  std::string root_;
};

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};

// WebDataset's grouping: a member "dir/key.ext.more" belongs to sample "dir/key", field "ext.more".
std::pair<std::string, std::string> sample_key(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {name.substr(0, dot), ext};
}

// Indexes one shard: its samples with an image (jpg, jpeg or png) become items, in the order of
// the shard, labelled by their cls member (an integer; -1 without one). The data offset of each
// image member is where its first bytes, as libarchive reads them, lie in the file: right after
// its header, or after the extended (pax, GNU long name) headers that precede it.
void index_shard(const std::string& spec, const std::string& shard, uint32_t shard_index,
                 std::vector<ItemMeta>& items, std::vector<TarMember>& members) {
  std::unique_ptr<archive, ArchiveFree> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_all(a.get());
  const auto fail = [&](const std::string& what) { throw SourceError(spec + ": shard " + shard + ": " + what); };
  if (archive_read_open_filename(a.get(), shard.c_str(), 1 << 16) != ARCHIVE_OK) {
    fail(std::string("cannot open: ") + archive_error_string(a.get()));
  }
  const UniqueFd fd(::open(shard.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0) fail("cannot open: " + errno_text(errno));
  std::map<std::string, size_t> item_of_key;  // sample key -> index in items (this shard)
  std::map<std::string, int64_t> label_of_key;
  const size_t first_item = items.size();
  std::string last = "(before the first member)";
  for (;;) {
    archive_entry* entry = nullptr;
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    // Strict: libarchive warns and goes on past a damaged header (ARCHIVE_WARN, ARCHIVE_RETRY),
    // which would silently leave members out of the epoch.
    if (r != ARCHIVE_OK) {
      const char* why = archive_error_string(a.get());
      fail("corrupt or truncated after member " + last + ": " + (why ? why : "damaged header"));
    }
    if (archive_filter_code(a.get(), 0) != ARCHIVE_FILTER_NONE) {
      fail(std::string("compressed (") + archive_filter_name(a.get(), 0) +
           "): members of a compressed shard cannot be read by offset; decompress it first");
    }
    const char* path = archive_entry_pathname(entry);
    last = path ? path : "?";
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    const auto [key, ext] = sample_key(last);
    const uint64_t size = static_cast<uint64_t>(archive_entry_size(entry));
    if (ext == "cls") {
      char text[64] = {};
      const la_ssize_t n = archive_read_data(a.get(), text, sizeof text - 1);
      int64_t label = 0;
      std::string_view v(text, n > 0 ? static_cast<size_t>(n) : 0);
      while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), label);
      if (ec != std::errc() || ptr != v.data() + v.size()) fail("member " + last + ": not an integer class label");
      label_of_key[key] = label;
      continue;
    }
    if (ext != "jpg" && ext != "jpeg" && ext != "png") continue;
    if (item_of_key.count(key)) fail("member " + last + ": sample " + key + " has a second image");
    // Where the data is: compare the first bytes libarchive reads with the file after the header.
    const int64_t header = archive_read_header_position(a.get());
    std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(size, 64))), probe(head.size());
    if (!head.empty() && archive_read_data(a.get(), head.data(), head.size()) != static_cast<la_ssize_t>(head.size())) {
      fail("member " + last + ": truncated: " + archive_error_string(a.get()));
    }
    std::optional<uint64_t> offset;
    for (int block = 1; block <= 64 && !offset; ++block) {
      const uint64_t at = static_cast<uint64_t>(header) + 512u * block;
      if (head.empty() || (::pread(fd.get(), probe.data(), probe.size(), static_cast<off_t>(at)) ==
                               static_cast<ssize_t>(probe.size()) &&
                           probe == head)) {
        offset = at;
      }
    }
    if (!offset) fail("member " + last + ": cannot locate its data in the file (not a plain tar?)");
    if (*offset + size > static_cast<uint64_t>(st.st_size)) {
      fail("member " + last + ": truncated: " + std::to_string(size) + " bytes declared, " +
           std::to_string(static_cast<uint64_t>(st.st_size) - std::min<uint64_t>(*offset, st.st_size)) + " in the shard");
    }
    item_of_key[key] = items.size();
    items.push_back({shard + ":" + last, -1, size, modified_ns(st)});
    members.push_back({shard_index, *offset, size});
  }
  for (size_t i = first_item; i < items.size(); ++i) {  // labels may come before or after their image
    const std::string member = items[i].path.substr(shard.size() + 1);
    if (auto it = label_of_key.find(sample_key(member).first); it != label_of_key.end()) items[i].label = it->second;
  }
}

}  // namespace

std::unique_ptr<Source> open_tar(const std::string& spec, const std::string& pattern,
                                 const std::function<void(size_t)>& progress, const std::string& data_root) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> shards(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  globfree(&g);
  if (shards.empty()) throw SourceError(spec + ": no shard matches " + pattern);
  std::sort(shards.begin(), shards.end());
  std::vector<ItemMeta> items;
  std::vector<TarMember> members;
  for (size_t i = 0; i < shards.size(); ++i) {
    check_confined(spec, shards[i], data_root);
    index_shard(spec, shards[i], static_cast<uint32_t>(i), items, members);
    if (progress) progress(items.size());
  }
  if (items.empty()) throw SourceError(spec + ": no image members (.jpg, .jpeg, .png) in " + std::to_string(shards.size()) + " shard(s)");
  return std::make_unique<TarSource>(spec, std::move(shards), std::move(items), std::move(members), data_root);
}

}  // namespace joader::source_detail
