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
namespace {

constexpr std::array<std::string_view, 9> kImageExtensions = {
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

// torchvision's has_file_allowed_extension: name.lower().endswith(ext). ASCII lowering is
// enough: no non-ASCII character lowercases to a letter of these extensions.
bool has_image_extension(std::string_view name) {
  return std::any_of(kImageExtensions.begin(), kImageExtensions.end(), [&](std::string_view ext) {
    return name.size() >= ext.size() &&
           std::equal(
               ext.begin(), ext.end(), name.end() - static_cast<ptrdiff_t>(ext.size()),
               [](char e, char c) { return e == (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  });
}

struct FileEntry {
  std::string name;
  uint64_t size;
  int64_t modified_ns;
};

struct DirEntries {
  std::vector<std::string> subdirs;
  std::vector<FileEntry> images;  // non-directories with an image extension
};

// Splits an open directory's entries as os.walk does: DirEntry.is_dir() follows symlinks and counts
// an entry it cannot stat (a broken symlink) as a non-directory. Takes over fd.
bool list_dir(UniqueFd fd, DirEntries& out) {
  UniqueDir dir(::fdopendir(fd.get()));
  if (!dir) return false;
  fd.release();
  const int dfd = ::dirfd(dir.get());
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    const bool image = has_image_extension(name);
    bool is_dir = e->d_type == DT_DIR;
    struct stat st;
    bool stat_ok = false;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN || (!is_dir && image)) {
      stat_ok = ::fstatat(dfd, e->d_name, &st, 0) == 0;
      is_dir = stat_ok && S_ISDIR(st.st_mode);
    }
    if (is_dir)
      out.subdirs.emplace_back(name);
    else if (image)
      out.images.push_back({std::string(name), stat_ok ? static_cast<uint64_t>(st.st_size) : 0,
                            stat_ok ? modified_ns(st) : 0});
  }
  return true;
}

struct DirImages {
  std::string root;
  std::vector<FileEntry> images;
};

// os.walk(root, followlinks=True), collecting each directory's images into `out` (in no particular
// order). ancestors_ holds the (device, inode) of the directories above, to cut symlink loops.
class FolderWalker {
 public:
  FolderWalker(const std::function<void(size_t)>& progress, const std::string& data_root)
      : progress_(progress), data_root_(data_root) {}

  // Opens and walks the directory at path; one that cannot be opened or listed is recorded in
  // failures() (os.walk would skip it silently, losing its images).
  void walk(const std::string& path, std::vector<DirImages>& out) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return fail(path, errno_text(errno));
    if (!data_root_.empty()) {
      const std::string real = fd_path(fd.get());
      if (!inside(real, data_root_)) return fail(path, "resolves to " + real + ", outside the daemon's data root " + data_root_);
    }
    walk(std::move(fd), path, out);
  }

  // The first failure ("PATH: reason") and how many there were.
  const std::string& first_failure() const { return first_failure_; }
  size_t failures() const { return failures_; }

 private:
  void fail(const std::string& path, const std::string& why) {
    if (failures_++ == 0) first_failure_ = path + ": " + why;
  }

  void walk(UniqueFd fd, const std::string& root, std::vector<DirImages>& out) {
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return fail(root, errno_text(errno));
    const std::pair<dev_t, ino_t> self{st.st_dev, st.st_ino};
    if (std::find(ancestors_.begin(), ancestors_.end(), self) != ancestors_.end()) return;
    DirEntries entries;
    if (!list_dir(std::move(fd), entries)) return fail(root, errno_text(errno));
    if (!entries.images.empty()) {
      const size_t before = found_;
      found_ += entries.images.size();
      if (progress_ && before / 1000 != found_ / 1000) progress_(found_);
      out.push_back({root, std::move(entries.images)});
    }
    ancestors_.push_back(self);
    // Opened by path, not relative to the parent's fd: list_dir has closed that one, and a
    // descriptor per level would cap the depth at the process's open-file limit.
    for (const std::string& name : entries.subdirs) walk(join_path(root, name), out);
    ancestors_.pop_back();
  }

  const std::function<void(size_t)>& progress_;
  const std::string& data_root_;
  std::vector<std::pair<dev_t, ino_t>> ancestors_;
  size_t found_ = 0;
  std::string first_failure_;
  size_t failures_ = 0;
};

std::string extension_list() {
  std::string out;
  for (std::string_view ext : kImageExtensions) out += (out.empty() ? "" : ", ") + std::string(ext);
  return out;
}

}  // namespace

std::unique_ptr<Source> open_imagefolder(const std::string& spec, const std::string& root,
                                         const std::function<void(size_t)>& progress, const std::string& data_root) {
  check_confined(spec, root, data_root);
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) throw SourceError(spec + ": cannot open: " + errno_text(errno));
  DirEntries top;
  if (!list_dir(std::move(root_fd), top))
    throw SourceError(spec + ": cannot list: " + errno_text(errno));
  std::vector<std::string> classes = std::move(top.subdirs);
  if (classes.empty()) throw SourceError(spec + ": no class folders");
  std::sort(classes.begin(), classes.end());

  std::vector<ItemMeta> items;
  std::vector<std::string> empty_classes;
  FolderWalker walker(progress, data_root);
  for (size_t label = 0; label < classes.size(); ++label) {
    const std::string class_root = join_path(root, classes[label]);
    std::vector<DirImages> dirs;
    walker.walk(class_root, dirs);
    // sorted(os.walk(...)): directories by their full path string, files by name within each.
    std::sort(dirs.begin(), dirs.end(),
              [](const DirImages& a, const DirImages& b) { return a.root < b.root; });
    const size_t before = items.size();
    for (DirImages& dir : dirs) {
      std::sort(dir.images.begin(), dir.images.end(),
                [](const FileEntry& a, const FileEntry& b) { return a.name < b.name; });
      for (const FileEntry& image : dir.images)
        items.push_back({join_path(dir.root, image.name), static_cast<int64_t>(label), image.size, image.modified_ns});
    }
    if (items.size() == before) empty_classes.push_back(classes[label]);
  }
  if (walker.failures() > 0) {
    const size_t more = walker.failures() - 1;
    throw SourceError(spec + ": cannot list " + walker.first_failure() +
                      (more > 0 ? " (and " + std::to_string(more) + " more directories)" : "") +
                      "; torchvision would skip it silently, Joader refuses rather than leave its images out");
  }
  if (!empty_classes.empty()) {
    std::string names;
    for (size_t i = 0; i < std::min<size_t>(empty_classes.size(), 5); ++i)
      names += (i ? ", " : "") + empty_classes[i];
    if (empty_classes.size() > 5)
      names += " and " + std::to_string(empty_classes.size() - 5) + " more";
    throw SourceError(spec + ": found no images with extensions " + extension_list() +
                      " in class folders " + names);
  }
  return std::make_unique<FileSource>(spec, std::move(items), std::move(classes), data_root);
}

}  // namespace joader::source_detail
