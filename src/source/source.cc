#include "source/source.h"

#include <dirent.h>
#include <fcntl.h>
#include <archive.h>
#include <archive_entry.h>
#include <glob.h>
#include <lmdb.h>
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

namespace joader {
namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

// os.path.join(a, b) for a relative b.
std::string join_path(const std::string& a, std::string_view b) {
  std::string out = a;
  if (!out.empty() && out.back() != '/') out += '/';
  out += b;
  return out;
}

// True if the resolved absolute path lies in the resolved directory root (or is root).
bool inside(std::string_view resolved, std::string_view root) {
  if (root == "/") return true;
  return resolved.substr(0, root.size()) == root &&
         (resolved.size() == root.size() || resolved[root.size()] == '/');
}

// The path an open descriptor really names, whatever symlinks led to it.
std::string fd_path(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf, static_cast<size_t>(n)) : "";
}

// realpath(path), or "" with errno set.
std::string resolved_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return "";
  std::string out = r;
  std::free(r);
  return out;
}

// Throws unless `path` (named `what` in the message) resolves inside root; no-op without a root.
void check_confined(const std::string& what, const std::string& path, const std::string& root) {
  if (root.empty()) return;
  const std::string real = resolved_path(path);
  if (real.empty()) throw SourceError(what + ": cannot resolve " + path + ": " + errno_text(errno));
  if (!inside(real, root))
    throw SourceError(what + ": " + path + " resolves to " + real + ", outside the daemon's data root " + root);
}

// Opens `path` read-only into fd; returns 0, or an errno value with `step` naming what failed.
// With a root, a file whose resolved path (after every symlink, checked on the open descriptor,
// so a link swapped after indexing cannot escape) lies outside it fails with EACCES.
int open_confined(const std::string& path, const std::string& root, UniqueFd& fd, const char*& step) {
  fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    step = "cannot open";
    return errno;
  }
  if (!root.empty() && !inside(fd_path(fd.get()), root)) {
    step = "outside the daemon's data root";
    return EACCES;
  }
  return 0;
}

// Reads out.size() bytes at `offset` of fd into out; returns 0, or an errno value with `step`
// naming what failed. A file that ends first: out is cut to what was there, or, with
// `must_fill`, EIO ("shorter than when it was indexed").
int read_at(int fd, uint64_t offset, std::vector<uint8_t>& out, bool must_fill, const char*& step) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      step = "read failed";
      return errno;
    }
    if (n == 0) {
      if (!must_fill) break;  // the file shrank since fstat
      step = "the file is shorter than when it was indexed";
      return EIO;
    }
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return 0;
}

// Replaces out with the whole file (at most `limit` bytes), confined to root as open_confined.
int read_whole_file(const std::string& path, std::vector<uint8_t>& out, const char*& step,
                    const std::string& root = "", size_t limit = SIZE_MAX) {
  UniqueFd fd;
  if (const int error = open_confined(path, root, fd, step)) return error;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    step = "cannot stat";
    return errno;
  }
  out.resize(std::min(static_cast<size_t>(st.st_size), limit));
  return read_at(fd.get(), 0, out, false, step);
}

// Replaces out with `size` bytes at `offset` of the file, confined to root as open_confined.
int read_file_range(const std::string& path, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
                    const char*& step, const std::string& root) {
  UniqueFd fd;
  if (const int error = open_confined(path, root, fd, step)) return error;
  out.resize(static_cast<size_t>(size));
  return read_at(fd.get(), offset, out, true, step);
}

// What every kind shares: the item table, the class names and the description.
class IndexedSource : public Source {
 public:
  explicit IndexedSource(std::string spec, std::vector<ItemMeta> items = {},
                         std::vector<std::string> classes = {})
      : spec_(std::move(spec)), items_(std::move(items)), classes_(std::move(classes)) {}

  size_t size() const override { return items_.size(); }
  const ItemMeta& item(uint32_t id) const override {
    if (id >= items_.size())
      throw SourceError("item " + std::to_string(id) + " out of range: " + spec_ + " has " +
                        std::to_string(items_.size()) + " items");
    return items_[id];
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override {
    std::string out = spec_ + " (" + std::to_string(items_.size()) + " items";
    if (!classes_.empty()) out += ", " + std::to_string(classes_.size()) + " classes";
    return out + ")";
  }

 protected:
  [[noreturn]] void fail_read(uint32_t id, const std::string& what) const {
    throw SourceError("item " + std::to_string(id) + " (" + items_[id].path + "): " + what);
  }

  std::string spec_;
  std::vector<ItemMeta> items_;
  std::vector<std::string> classes_;
};

// Items that are files: imagefolder and filelist; confined to root if one is set.
class FileSource : public IndexedSource {
 public:
  FileSource(std::string spec, std::vector<ItemMeta> items, std::vector<std::string> classes, std::string root)
      : IndexedSource(std::move(spec), std::move(items), std::move(classes)), root_(std::move(root)) {}

  void read(uint32_t id, std::vector<uint8_t>& out) const override { read_prefix(id, SIZE_MAX, out); }
  void read_prefix(uint32_t id, size_t n, std::vector<uint8_t>& out) const override {
    const char* step = "";
    if (const int error = read_whole_file(item(id).path, out, step, root_, n))
      fail_read(id, std::string(step) + ": " + errno_text(error));
  }

 private:
  std::string root_;
};

// ---- imagefolder ----

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
      out.images.push_back({std::string(name), stat_ok ? static_cast<uint64_t>(st.st_size) : 0});
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
        items.push_back({join_path(dir.root, image.name), static_cast<int64_t>(label), image.size});
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

// ---- filelist ----

template <typename T>
bool parse_number(std::string_view text, T& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

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
    items.push_back({std::move(full), label, static_cast<uint64_t>(st.st_size)});
    if (progress && items.size() % 1000 == 0) progress(items.size());
  }
  if (items.empty()) throw SourceError(spec + ": no items");
  return std::make_unique<FileSource>(spec, std::move(items), std::vector<std::string>{}, data_root);
}

// ---- lmdb ----

// Keys as readable text: printable ASCII as is, other bytes and '\' as \xNN.
std::string printable_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out += escaped;
    }
  }
  return out;
}

constexpr size_t kLabelBytes = 8;

struct EnvClose {
  void operator()(MDB_env* env) const { mdb_env_close(env); }
};
struct TxnAbort {
  void operator()(MDB_txn* txn) const { mdb_txn_abort(txn); }
};
struct CursorClose {
  void operator()(MDB_cursor* cursor) const { mdb_cursor_close(cursor); }
};
using UniqueTxn = std::unique_ptr<MDB_txn, TxnAbort>;

class LmdbSource : public IndexedSource {
 public:
  LmdbSource(const std::string& spec, const std::string& path,
             const std::function<void(size_t)>& progress)
      : IndexedSource(spec) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      throw SourceError(spec + ": cannot open: " + errno_text(errno));
    // A directory holds data.mdb and lock.mdb; anything else is the data file itself. MDB_NOTLS:
    // read transactions are begun and ended by whichever loader thread calls read().
    if (S_ISDIR(st.st_mode) && ::access((path + "/data.mdb").c_str(), F_OK) != 0) {
      throw SourceError(spec + ": " + path + "/data.mdb: " + errno_text(errno) +
                        " (an LMDB directory holds data.mdb; or name the data file itself)");
    }
    const unsigned flags = MDB_RDONLY | MDB_NOTLS | (S_ISDIR(st.st_mode) ? 0 : MDB_NOSUBDIR);
    int rc = open_env(path, flags);
    // Without write access to the lock file (a dataset owned by another user), read without
    // locking, as Python loaders do with lmdb.open(readonly=True, lock=False).
    if (rc == EACCES) rc = open_env(path, flags | MDB_NOLOCK);
    if (rc != 0) throw SourceError(spec + ": cannot open: " + mdb_strerror(rc));
    index(progress);
  }

  void read(uint32_t id, std::vector<uint8_t>& out) const override {
    item(id);  // range check
    MDB_txn* txn = nullptr;
    if (const int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn))
      fail_read(id, std::string("cannot begin a read transaction: ") + mdb_strerror(rc));
    const UniqueTxn txn_guard(txn);
    MDB_val key{key_offsets_[id + 1] - key_offsets_[id],
                const_cast<char*>(keys_.data() + key_offsets_[id])};
    MDB_val value{};
    if (const int rc = mdb_get(txn, dbi_, &key, &value))
      fail_read(id, std::string("cannot read the record: ") + mdb_strerror(rc));
    if (value.mv_size < kLabelBytes) fail_read(id, "record is shorter than its 8-byte label");
    const auto* bytes = static_cast<const uint8_t*>(value.mv_data);
    out.assign(bytes + kLabelBytes, bytes + value.mv_size);
  }

 private:
  // Returns mdb_env_open's result; env_ holds the handle either way (a failed open must be closed).
  int open_env(const std::string& path, unsigned flags) {
    MDB_env* env = nullptr;
    if (const int rc = mdb_env_create(&env)) return rc;
    env_.reset(env);
    return mdb_env_open(env, path.c_str(), flags, 0);
  }

  void check(int rc) const {
    if (rc != 0) throw SourceError(spec_ + ": cannot read: " + mdb_strerror(rc));
  }

  void index(const std::function<void(size_t)>& progress) {
    MDB_txn* txn = nullptr;
    check(mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn));
    const UniqueTxn txn_guard(txn);
    check(mdb_dbi_open(txn, nullptr, 0, &dbi_));
    MDB_cursor* cursor = nullptr;
    check(mdb_cursor_open(txn, dbi_, &cursor));
    const std::unique_ptr<MDB_cursor, CursorClose> cursor_guard(cursor);
    key_offsets_.push_back(0);
    MDB_val key, value;
    int rc;
    while ((rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) == 0) {
      const std::string_view key_bytes(static_cast<const char*>(key.mv_data), key.mv_size);
      if (value.mv_size < kLabelBytes)
        throw SourceError(spec_ + ": record " + printable_key(key_bytes) +
                          " is shorter than its 8-byte label");
      const auto* bytes = static_cast<const uint8_t*>(value.mv_data);
      uint64_t label = 0;
      for (size_t i = 0; i < kLabelBytes; ++i) label |= static_cast<uint64_t>(bytes[i]) << (8 * i);
      items_.push_back({"lmdb:" + printable_key(key_bytes), static_cast<int64_t>(label),
                        value.mv_size - kLabelBytes});
      keys_.append(key_bytes);
      key_offsets_.push_back(keys_.size());
      if (progress && items_.size() % 1000 == 0) progress(items_.size());
    }
    if (rc != MDB_NOTFOUND) check(rc);
    if (items_.empty()) throw SourceError(spec_ + ": no records");
  }

  std::unique_ptr<MDB_env, EnvClose> env_;
  MDB_dbi dbi_ = 0;                  // the unnamed database's handle, valid for every transaction
  std::string keys_;                 // every key, concatenated in item order
  std::vector<size_t> key_offsets_;  // item i's key is keys_[key_offsets_[i], key_offsets_[i + 1])
};

// ---- tar (WebDataset shards) ----

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
    items.push_back({shard + ":" + last, -1, size});
    members.push_back({shard_index, *offset, size});
  }
  for (size_t i = first_item; i < items.size(); ++i) {  // labels may come before or after their image
    const std::string member = items[i].path.substr(shard.size() + 1);
    if (auto it = label_of_key.find(sample_key(member).first); it != label_of_key.end()) items[i].label = it->second;
  }
}

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

// ---- synthetic ----

class SyntheticSource : public IndexedSource {
 public:
  SyntheticSource(const std::string& spec, uint32_t count, uint32_t width, uint32_t height)
      : IndexedSource(spec), width_(width), height_(height) {
    for (int c = 0; c < 10; ++c) classes_.push_back("class" + std::to_string(c));
    items_.reserve(count);
    for (uint32_t id = 0; id < count; ++id)
      items_.push_back({"synthetic:" + std::to_string(id), id % 10, 0});
  }

  void read(uint32_t id, std::vector<uint8_t>& out) const override {
    item(id);  // range check
    out = synthetic_jpeg(id, width_, height_);
  }
  std::pair<uint32_t, uint32_t> known_image_size(uint32_t) const override { return {width_, height_}; }

 private:
  uint32_t width_, height_;
};

// Each item costs ~80 bytes of index: 2^24 of them (1.3 GiB) is more than any benchmark needs.
constexpr uint32_t kMaxSyntheticItems = 1u << 24;
// Each read renders the whole image in memory (3 bytes per pixel): 8192² is 192 MiB.
constexpr uint32_t kMaxSyntheticSide = 8192;

std::unique_ptr<Source> open_synthetic(const std::string& spec, std::string_view arg) {
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
  return std::make_unique<SyntheticSource>(spec, count, width, height);
}

// SplitMix64: a tiny, well-mixed generator, so that the synthetic images depend on nothing but id.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

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

std::unique_ptr<Source> open_source(const std::string& spec, const std::function<void(size_t)>& progress,
                                    const std::string& data_root) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos)
    throw SourceError("source '" + spec +
                      "' is not KIND:ARG, with KIND imagefolder, filelist, lmdb, tar or synthetic");
  const std::string kind = spec.substr(0, colon), arg = spec.substr(colon + 1);
  if (kind == "imagefolder") return open_imagefolder(spec, arg, progress, data_root);
  if (kind == "filelist") return open_filelist(spec, arg, progress, data_root);
  if (kind == "lmdb") {
    check_confined(spec, arg, data_root);
    return std::make_unique<LmdbSource>(spec, arg, progress);
  }
  if (kind == "synthetic") return open_synthetic(spec, arg);
  if (kind == "tar") return open_tar(spec, arg, progress, data_root);
  throw SourceError("unknown source kind '" + kind + "' in '" + spec +
                    "' (expected imagefolder, filelist, lmdb, tar or synthetic)");
}

}  // namespace joader
