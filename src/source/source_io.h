// File-reading helpers shared by the source kinds (src/source/*.cc): descriptors that close
// themselves, paths confined to the daemon's data root (checked on the open descriptor, so a
// symlink swapped after indexing cannot lead out), and reads that report which step failed.
// Internal to src/source.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "source/source.h"

namespace joader::source_detail {

inline std::string errno_text(int error) { return std::generic_category().message(error); }

// st_mtim in nanoseconds since the epoch (ItemMeta::modified_ns).
inline int64_t modified_ns(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

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
inline std::string join_path(const std::string& a, std::string_view b) {
  std::string out = a;
  if (!out.empty() && out.back() != '/') out += '/';
  out += b;
  return out;
}

// True if the resolved absolute path lies in the resolved directory root (or is root).
inline bool inside(std::string_view resolved, std::string_view root) {
  if (root == "/") return true;
  return resolved.substr(0, root.size()) == root &&
         (resolved.size() == root.size() || resolved[root.size()] == '/');
}

// The path an open descriptor really names, whatever symlinks led to it.
inline std::string fd_path(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf, static_cast<size_t>(n)) : "";
}

// realpath(path), or "" with errno set.
inline std::string resolved_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return "";
  std::string out = r;
  std::free(r);
  return out;
}

// Throws unless `path` (named `what` in the message) resolves inside root; no-op without a root.
inline void check_confined(const std::string& what, const std::string& path, const std::string& root) {
  if (root.empty()) return;
  const std::string real = resolved_path(path);
  if (real.empty()) throw SourceError(what + ": cannot resolve " + path + ": " + errno_text(errno));
  if (!inside(real, root))
    throw SourceError(what + ": " + path + " resolves to " + real + ", outside the daemon's data root " + root);
}

// Opens `path` read-only into fd; returns 0, or an errno value with `step` naming what failed.
// With a root, a file whose resolved path (after every symlink, checked on the open descriptor,
// so a link swapped after indexing cannot escape) lies outside it fails with EACCES.
inline int open_confined(const std::string& path, const std::string& root, UniqueFd& fd, const char*& step) {
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
inline int read_at(int fd, uint64_t offset, std::vector<uint8_t>& out, bool must_fill, const char*& step) {
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
inline int read_whole_file(const std::string& path, std::vector<uint8_t>& out, const char*& step,
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
inline int read_file_range(const std::string& path, uint64_t offset, uint64_t size, std::vector<uint8_t>& out,
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
                            std::to_string(items_.size()) + " items",
                        SourceError::kItem);
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
    throw SourceError("item " + std::to_string(id) + " (" + items_[id].path + "): " + what, SourceError::kItem);
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

// The whole of `text` as a number (std::from_chars: no sign for unsigned, no spaces).
template <typename T>
bool parse_number(std::string_view text, T& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// The kinds, each in its own file; open_source (source.cc) picks one by the spec's KIND.
std::unique_ptr<Source> open_imagefolder(const std::string& spec, const std::string& root,
                                         const std::function<void(size_t)>& progress, const std::string& data_root);
std::unique_ptr<Source> open_filelist(const std::string& spec, const std::string& file,
                                      const std::function<void(size_t)>& progress, const std::string& data_root);
std::unique_ptr<Source> open_lmdb(const std::string& spec, const std::string& path,
                                  const std::function<void(size_t)>& progress, const std::string& data_root);
std::unique_ptr<Source> open_tar(const std::string& spec, const std::string& pattern,
                                 const std::function<void(size_t)>& progress, const std::string& data_root);
std::unique_ptr<Source> open_synthetic(const std::string& spec, std::string_view arg,
                                       const std::function<void(size_t)>& progress);

}  // namespace joader::source_detail
