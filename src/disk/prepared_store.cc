#include "disk/prepared_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "common/mutex.h"

namespace joader {
namespace {

static_assert(std::endian::native == std::endian::little, "records are written in the host's byte order");

constexpr uint32_t kMagic = 0x3152444a;  // "JDR1"

struct RecordHeader {
  uint32_t magic = kMagic;
  uint32_t item = 0;
  uint32_t width = 0, height = 0;
  uint64_t length = 0;
  uint64_t payload_hash = 0;
  uint64_t header_hash = 0;  // of the fields above

  uint64_t hash_fields() const { return XXH3_64bits(this, offsetof(RecordHeader, header_hash)); }
  bool intact() const { return magic == kMagic && header_hash == hash_fields(); }
};
static_assert(sizeof(RecordHeader) == 40);

std::string errno_text() { return std::strerror(errno); }

// A segment file, closed when the last reader or writer holding it lets go.
struct Segment {
  std::string path;
  int fd = -1;
  int direct_fd = -1;  // the same file opened for reads that bypass the page cache; -1 where refused
  uint64_t size = 0;   // bytes of whole records (the end of the file, once cut)
  ~Segment() {
    if (fd >= 0) ::close(fd);
    if (direct_fd >= 0) ::close(direct_fd);
  }
};

struct Location {
  std::shared_ptr<Segment> segment;
  uint64_t offset = 0;  // of the record's header
  uint64_t length = 0;
  PreparedStore::Shape shape;
};

struct Space {
  std::string dir;
  std::string dataset;       // its meta's first line
  uint64_t generation = 0;  // unique to this Space object: a write reserved in a dropped one is discarded
  uint64_t bytes = 0;       // of the whole records in its segments (what disk_bytes counts for it)
  bool opened = false;      // open_namespace() asked for it in this process
  int64_t last_used = 0;    // its meta's mtime when found (seconds): how recently an earlier run used it
  std::vector<std::shared_ptr<Segment>> segments;  // the last one is appended to
  std::unordered_map<uint32_t, Location> index;
  std::unordered_set<uint32_t> queued;
  uint32_t next_segment = 0;  // the number of the next segment file made (one past the highest seen)
};

struct Pending {
  PreparedStore::Namespace ns;
  uint64_t generation;
  uint32_t item;
  PreparedStore::Shape shape;
  std::vector<uint8_t> bytes;
};

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

bool is_hex_name(const std::string& name) {
  return name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool is_segment_name(const std::string& name) {
  return name.size() == 10 && name.rfind("seg-", 0) == 0 &&
         std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// This process's own plain folder (or file) that nobody else may write: not a link, not planted.
bool owned(const std::string& path, bool folder) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) &&
         st.st_uid == ::geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// Deletes a namespace folder and the files in it (a link in its place is removed, not followed).
void remove_tree(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlink(dir.c_str());
    return;
  }
  for (const std::string& name : list_dir(dir)) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

bool full_pread(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got, n -= size_t(got), offset += uint64_t(got);
  }
  return true;
}

// Reads with O_DIRECT go through an aligned buffer of each reading thread: a record starts at any
// byte, and the caller's memory is not aligned. 4096 covers every logical block size in use.
constexpr size_t kDirectAlign = 4096;
constexpr size_t kDirectChunk = size_t{1} << 20;  // the most one read asks for (a large record takes several)

// Reads [offset, offset + n) of a file opened with O_DIRECT into the concatenation of `first`
// (whose size may be 0) and `second`. False on an error (errno says which) or when the file ends
// first.
bool direct_pread(int fd, std::span<uint8_t> first, std::span<uint8_t> second, uint64_t offset) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, Free> bounce(
      static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, kDirectChunk + kDirectAlign)));
  if (!bounce) return false;
  size_t done = 0;
  const size_t n = first.size() + second.size();
  while (done < n) {
    const uint64_t at = offset + done, aligned = at & ~uint64_t{kDirectAlign - 1};
    const size_t skip = size_t(at - aligned);
    const size_t want = (skip + std::min(n - done, kDirectChunk) + kDirectAlign - 1) & ~(kDirectAlign - 1);
    ssize_t got;
    do got = ::pread(fd, bounce.get(), want, static_cast<off_t>(aligned));
    while (got < 0 && errno == EINTR);
    if (got >= 0 && got <= ssize_t(skip)) errno = ENODATA;  // the file ends before the bytes asked for
    if (got <= ssize_t(skip)) return false;
    const size_t take = std::min(n - done, size_t(got) - skip);
    for (size_t k = 0; k < take;) {  // into `first`, then `second`
      const size_t pos = done + k;
      const std::span<uint8_t> to = pos < first.size() ? first.subspan(pos) : second.subspan(pos - first.size());
      const size_t m = std::min(take - k, to.size());
      std::memcpy(to.data(), bounce.get() + skip + k, m);
      k += m;
    }
    done += take;
  }
  return true;
}

// Opens a segment for direct reads where the file system allows it (tmpfs before Linux 6.6 does not).
int open_direct(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW); }

// Writes all of `parts` at `offset`, going on after short writes. 0, or the errno of the write
// that failed (a full disk's ENOSPC, EIO, a file size limit's EFBIG).
int full_pwritev(int fd, iovec* parts, int count, uint64_t offset) {
  while (count > 0) {
    const ssize_t wrote = ::pwritev(fd, parts, count, static_cast<off_t>(offset));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return errno;
    if (wrote == 0) return EIO;
    offset += uint64_t(wrote);
    for (size_t left = size_t(wrote); left > 0;) {
      const size_t used = std::min(left, parts->iov_len);
      parts->iov_base = static_cast<uint8_t*>(parts->iov_base) + used;
      parts->iov_len -= used;
      left -= used;
      if (parts->iov_len == 0) ++parts, --count;
    }
    while (count > 0 && parts->iov_len == 0) ++parts, --count;
  }
  return 0;
}

void remove_all(const std::vector<std::string>& trash) {
  for (const std::string& dir : trash) remove_tree(dir);
}

}  // namespace

struct PreparedStore::State {
  Options options;
  int lock_fd = -1;
  // Reads bypass the page cache: DIR's file system took O_DIRECT at opening, and no direct read
  // has failed where a read through the page cache then succeeded (one such turns them off).
  std::atomic<bool> direct{false};

  mutable Mutex mu;
  std::condition_variable changed;  // the queue grew or shrank, a write ended, or the writer should stop
  std::unordered_map<Namespace, Space> spaces JOADER_GUARDED_BY(mu);
  std::deque<Pending> queue JOADER_GUARDED_BY(mu);
  bool writing JOADER_GUARDED_BY(mu) = false;  // the writer holds a record taken from the queue
  bool stopping JOADER_GUARDED_BY(mu) = false;
  // Admission stops for want of room (until a namespace is dropped) or for a write error (for
  // good); items admitted before are still written, unless writing failed.
  bool full JOADER_GUARDED_BY(mu) = false;
  bool failed JOADER_GUARDED_BY(mu) = false;
  uint64_t disk_bytes JOADER_GUARDED_BY(mu) = 0;  // Σ Space::bytes
  uint64_t generations JOADER_GUARDED_BY(mu) = 0;
  uint64_t trash_count JOADER_GUARDED_BY(mu) = 0;
  Stats stats JOADER_GUARDED_BY(mu);
  std::thread writer;

  void log(const std::string& line) const {
    if (options.log) options.log("disk cache " + options.dir + ": " + line);
  }

  // ---- opening ----

  void lock_dir() {
    if (::mkdir(options.dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw PreparedStoreError(fmt::format("cannot create the disk cache folder {}: {}", options.dir, errno_text()));
    // Another user who may write in it, or who planted it (or a link in its place), could swap a
    // namespace folder for a link and have this process delete or overwrite files elsewhere, or
    // plant records (a root daemon's would be served to everyone).
    const int dir_fd = ::open(options.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    const bool is_dir = dir_fd >= 0 && ::fstat(dir_fd, &st) == 0;
    if (dir_fd >= 0) ::close(dir_fd);
    if (!is_dir) {
      throw PreparedStoreError(fmt::format("the disk cache {} is not a folder (a link to one is not taken)",
                                           options.dir));
    }
    if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      throw PreparedStoreError(fmt::format(
          "the disk cache {} belongs to uid {} with mode {:04o}: it must be a folder of uid {} that no one else "
          "may write",
          options.dir, st.st_uid, st.st_mode & 07777, ::geteuid()));
    }
    const std::string path = options.dir + "/LOCK";
    lock_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock_fd < 0) throw PreparedStoreError(fmt::format("cannot open {}: {}", path, errno_text()));
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = {};
      const ssize_t n = ::pread(lock_fd, pid, sizeof pid - 1, 0);
      ::close(lock_fd);
      lock_fd = -1;
      throw PreparedStoreError(fmt::format(
          "the disk cache {} is in use by another process{}: give each daemon a folder of its own", options.dir,
          n > 0 ? " (pid " + std::string(pid, std::strcspn(pid, "\n")) + ")" : ""));
    }
    const std::string mine = std::to_string(::getpid()) + "\n";
    if (::ftruncate(lock_fd, 0) != 0 || ::pwrite(lock_fd, mine.data(), mine.size(), 0) != ssize_t(mine.size())) {
      // The pid is for people; the lock is what counts.
    }
    // Reads bypass the page cache where they can: a tier is for data larger than memory, where the
    // cache rarely holds a record again before it is evicted, and a direct read costs no copy
    // into it and no readahead (BENCHMARKS.md, the disk tier).
    if (const int probe = options.direct_reads ? open_direct(path) : -1; probe >= 0) {
      direct.store(true);
      ::close(probe);
    }
    struct statfs fs;
    if (::statfs(options.dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
      log("warning: this folder is on tmpfs, which is memory, not disk: the items it keeps take RAM the arena "
          "could have");
    }
  }

  // Indexes the whole records of one segment, cutting it after the last one.
  void scan(Space& space, const std::string& path) JOADER_REQUIRES(mu) {
    auto seg = std::make_shared<Segment>();
    seg->path = path;
    seg->fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (seg->fd < 0 || ::fstat(seg->fd, &st) != 0) {
      log(fmt::format("cannot open {}: {}; left out", path, errno_text()));
      return;
    }
    // The scan reads one header per record, far apart: readahead would read most of the file.
    ::posix_fadvise(seg->fd, 0, 0, POSIX_FADV_RANDOM);
    if (direct.load()) seg->direct_fd = open_direct(path);
    const uint64_t end = uint64_t(st.st_size);
    uint64_t at = 0;
    while (at + sizeof(RecordHeader) <= end) {
      RecordHeader h;
      if (!full_pread(seg->fd, &h, sizeof h, at) || !h.intact() || h.length > end - at - sizeof h) break;
      space.index[h.item] = Location{seg, at, h.length, {h.width, h.height}};
      at += sizeof h + h.length;
    }
    if (at != end) {
      ++stats.corrupt;
      log(fmt::format("{}: a torn or corrupt record at byte {} of {}; the segment is cut there", path, at, end));
      if (::ftruncate(seg->fd, off_t(at)) != 0) log(fmt::format("cannot cut {}: {}", path, errno_text()));
    }
    ::posix_fadvise(seg->fd, 0, 0, POSIX_FADV_NORMAL);  // reads through the page cache, as for new segments
    seg->size = at;
    space.bytes += at;
    space.segments.push_back(std::move(seg));
  }

  void load() JOADER_REQUIRES(mu) {
    for (const std::string& name : list_dir(options.dir)) {
      const std::string dir = options.dir + "/" + name;
      if (name.rfind("trash-", 0) == 0) {  // a drop that a stop interrupted
        remove_tree(dir);
        continue;
      }
      if (!is_hex_name(name)) continue;
      if (!owned(dir, true)) {
        log(fmt::format("{} is not a folder of this user that only it may write; left alone", dir));
        continue;
      }
      Space space;
      space.dir = dir;
      space.generation = ++generations;
      std::ifstream meta(dir + "/meta");
      std::string fingerprint, prep;  // for people: the namespace's number already stands for them
      if (!owned(dir + "/meta", false) || !std::getline(meta, space.dataset) || !std::getline(meta, fingerprint) ||
          !std::getline(meta, prep)) {
        log(fmt::format("{} has no readable meta; removed", dir));
        remove_tree(dir);
        continue;
      }
      struct stat st;
      if (::stat((dir + "/meta").c_str(), &st) == 0) space.last_used = st.st_mtim.tv_sec;
      for (const std::string& file : list_dir(dir)) {
        if (!is_segment_name(file)) continue;
        space.next_segment = std::max<uint32_t>(space.next_segment, uint32_t(std::stoul(file.substr(4))) + 1);
        if (owned(dir + "/" + file, false)) {
          scan(space, dir + "/" + file);
        } else {
          log(fmt::format("{}/{} is not a file of this user that only it may write; left out", dir, file));
        }
      }
      stats.items += space.index.size();
      disk_bytes += space.bytes;
      spaces.emplace(std::stoull(name, nullptr, 16), std::move(space));
    }
  }

  // ---- admission ----

  bool admitting() const JOADER_REQUIRES(mu) { return !full && !failed; }

  void fail(const std::string& why) JOADER_REQUIRES(mu) {
    if (failed) return;
    failed = true;
    stats.stopped = why;
    log(why + "; no more items are admitted, the ones kept are still read");
  }

  void stop_full() JOADER_REQUIRES(mu) {
    if (!admitting()) return;
    full = true;
    stats.stopped = fmt::format("{} bytes kept or queued, the most allowed is {}", disk_bytes + stats.queued_bytes,
                                options.capacity);
    log(stats.stopped + "; no more items are admitted until a dataset is removed, the ones kept are still read");
  }

  // Room again after a drop (never after a write error).
  void maybe_resume() JOADER_REQUIRES(mu) {
    if (full && !failed && disk_bytes + stats.queued_bytes < options.capacity) {
      full = false;
      stats.stopped.clear();
    }
  }

  // Takes a namespace out of the store: its accounting, its queued items, its folder renamed to a
  // trash name, which the caller deletes without the lock. Returns that name.
  std::string detach(std::unordered_map<Namespace, Space>::iterator it) JOADER_REQUIRES(mu) {
    Space& space = it->second;
    disk_bytes -= space.bytes;
    stats.items -= space.index.size();
    const Namespace ns = it->first;
    for (auto p = queue.begin(); p != queue.end();) {
      if (p->ns == ns) {
        stats.queued_bytes -= sizeof(RecordHeader) + p->bytes.size();
        p = queue.erase(p);
      } else {
        ++p;
      }
    }
    std::string trash = fmt::format("{}/trash-{}-{}", options.dir, ::getpid(), ++trash_count);
    if (::rename(space.dir.c_str(), trash.c_str()) != 0) trash = space.dir;  // deleted in place
    spaces.erase(it);
    maybe_resume();
    changed.notify_all();
    return trash;
  }

  // Makes room for `record` more bytes by detaching namespaces that no open_namespace() of this
  // process asked for, least recently used first (their folders into `trash`). True if it fits.
  bool room_for(uint64_t record, Namespace keep, std::vector<std::string>& trash) JOADER_REQUIRES(mu) {
    while (disk_bytes + stats.queued_bytes + record > options.capacity) {
      auto oldest = spaces.end();
      for (auto it = spaces.begin(); it != spaces.end(); ++it) {
        if (!it->second.opened && it->first != keep &&
            (oldest == spaces.end() || it->second.last_used < oldest->second.last_used)) {
          oldest = it;
        }
      }
      if (oldest == spaces.end()) return false;
      log(fmt::format("dataset '{}' of an earlier run ({}) is not registered now: its kept items are removed to make "
                      "room",
                      oldest->second.dataset, oldest->second.dir));
      trash.push_back(detach(oldest));
    }
    return true;
  }

  // ---- writing ----

  // The segment to append `bytes` to in `space`, a new one when the last would grow past the
  // segment size. nullptr (and admission stopped) if it cannot be made.
  std::shared_ptr<Segment> segment_for(Space& space, uint64_t bytes) JOADER_REQUIRES(mu) {
    if (!space.segments.empty() && space.segments.back()->size + bytes <= options.segment_bytes) {
      return space.segments.back();
    }
    auto seg = std::make_shared<Segment>();
    seg->path = fmt::format("{}/seg-{:06}", space.dir, space.next_segment++);
    seg->fd = ::open(seg->path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (seg->fd < 0) {
      fail(fmt::format("cannot create {}: {}", seg->path, errno_text()));
      return nullptr;
    }
    if (direct.load()) seg->direct_fd = open_direct(seg->path);
    space.segments.push_back(seg);
    return seg;
  }

  // Where the writer appends a record of `record` bytes for `p`: the segment and the offset,
  // reserved (only the writer appends). None when its namespace is gone (or is another one of
  // the same number now) or writing failed.
  struct Slot {
    std::shared_ptr<Segment> segment;
    uint64_t at = 0;
  };
  std::optional<Slot> reserve(const Pending& p, uint64_t record) JOADER_REQUIRES(mu) {
    auto it = spaces.find(p.ns);
    if (it == spaces.end() || it->second.generation != p.generation || failed) return std::nullopt;
    std::shared_ptr<Segment> seg = segment_for(it->second, record);
    if (!seg) return std::nullopt;
    Slot slot{seg, seg->size};
    seg->size += record;
    return slot;
  }

  void written(const Pending& p, const Slot& slot, uint64_t record, int error) JOADER_REQUIRES(mu) {
    if (error != 0) {
      if (slot.segment->size == slot.at + record) {
        slot.segment->size = slot.at;
        if (::ftruncate(slot.segment->fd, off_t(slot.at)) != 0) {
          // The scan at the next open cuts a torn tail anyway.
        }
      }
      fail(fmt::format("writing {} failed: {}", slot.segment->path, std::strerror(error)));
      return;
    }
    auto it = spaces.find(p.ns);
    if (it == spaces.end() || it->second.generation != p.generation) return;  // dropped meanwhile: discarded
    ++stats.written;
    it->second.bytes += record;
    disk_bytes += record;
    if (it->second.index.insert_or_assign(p.item, Location{slot.segment, slot.at, p.bytes.size(), p.shape}).second) {
      ++stats.items;
    }
  }

  void write_loop() {
    MutexLock lk(mu);
    for (;;) {
      while (queue.empty() && !stopping) changed.wait(lk.native());
      if (queue.empty()) return;
      Pending p = std::move(queue.front());
      queue.pop_front();
      const uint64_t record = sizeof(RecordHeader) + p.bytes.size();
      if (const std::optional<Slot> slot = reserve(p, record)) {
        writing = true;
        lk.unlock();
        RecordHeader h;
        h.item = p.item;
        h.width = p.shape.width;
        h.height = p.shape.height;
        h.length = p.bytes.size();
        h.payload_hash = XXH3_64bits(p.bytes.data(), p.bytes.size());
        h.header_hash = h.hash_fields();
        iovec parts[2] = {{&h, sizeof h}, {p.bytes.data(), p.bytes.size()}};
        const int error = full_pwritev(slot->segment->fd, parts, 2, slot->at);
        lk.lock();
        writing = false;
        written(p, *slot, record, error);
      }
      stats.queued_bytes -= record;
      if (auto it = spaces.find(p.ns); it != spaces.end() && it->second.generation == p.generation) {
        it->second.queued.erase(p.item);
      }
      changed.notify_all();
    }
  }
};

PreparedStore::PreparedStore(Options options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  s.lock_dir();
  {
    MutexLock lk(s.mu);
    s.load();
    if (s.options.capacity == 0) {
      struct statvfs fs;
      const uint64_t free_bytes = ::statvfs(s.options.dir.c_str(), &fs) == 0 ? uint64_t(fs.f_bavail) * fs.f_frsize : 0;
      s.options.capacity = (s.disk_bytes + free_bytes) / 2;
    }
    // Over the capacity (a smaller one given, or less free space): admission waits until offers
    // find namespaces of earlier runs that no dataset registered now opens (room_for), or stops.
  }
  s.writer = std::thread([&s] { s.write_loop(); });
}

PreparedStore::~PreparedStore() {
  {
    MutexLock lk(state_->mu);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  state_->writer.join();
  if (state_->lock_fd >= 0) ::close(state_->lock_fd);  // releases the flock
}

PreparedStore::Namespace PreparedStore::namespace_of(const std::string& dataset, const std::string& fingerprint,
                                                     const std::string& prep) {
  const std::string key = dataset + '\0' + fingerprint + '\0' + prep;
  return XXH3_64bits(key.data(), key.size());
}

PreparedStore::Namespace PreparedStore::open_namespace(const std::string& dataset, const std::string& fingerprint,
                                                       const std::string& prep) {
  State& s = *state_;
  const Namespace ns = namespace_of(dataset, fingerprint, prep);
  const std::string dir = s.options.dir + "/" + hex(ns);
  std::vector<std::string> trash;
  bool exists = false;
  {
    MutexLock lk(s.mu);
    for (auto it = s.spaces.begin(); it != s.spaces.end();) {
      if (it->first != ns && it->second.dataset == dataset) {
        s.log(fmt::format("dataset '{}' changed (its files or prep): its kept items are removed", dataset));
        trash.push_back(s.detach(it++));
      } else {
        ++it;
      }
    }
    if (auto it = s.spaces.find(ns); it != s.spaces.end()) {
      it->second.opened = true;
      exists = true;
    }
  }
  remove_all(trash);
  if (exists) {
    ::utimensat(AT_FDCWD, (dir + "/meta").c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // used now (for later runs)
    return ns;
  }
  // A new namespace: its folder and meta made without the lock.
  std::string error;
  if (::mkdir(dir.c_str(), 0700) != 0 && (errno != EEXIST || !owned(dir, true))) {
    error = fmt::format("cannot create {}: {}", dir, errno == EEXIST ? "it is not this user's own folder" : errno_text());
  } else {
    const std::string meta = dir + "/meta", temporary = meta + ".new";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << dataset << '\n' << fingerprint << '\n' << prep << '\n';
      if (!out.flush()) error = fmt::format("cannot write {}", temporary);
    }
    if (error.empty() && ::rename(temporary.c_str(), meta.c_str()) != 0) {
      error = fmt::format("cannot write {}: {}", meta, errno_text());
    }
  }
  MutexLock lk(s.mu);
  if (!error.empty()) {
    s.fail(error);
    return ns;
  }
  if (auto it = s.spaces.find(ns); it != s.spaces.end()) {  // another thread opened it meanwhile
    it->second.opened = true;
    return ns;
  }
  Space space;
  space.dir = dir;
  space.dataset = dataset;
  space.generation = ++s.generations;
  space.opened = true;
  s.spaces.emplace(ns, std::move(space));
  return ns;
}

void PreparedStore::drop_namespace(Namespace ns) {
  std::string trash;
  {
    MutexLock lk(state_->mu);
    auto it = state_->spaces.find(ns);
    if (it == state_->spaces.end()) return;
    trash = state_->detach(it);
  }
  remove_tree(trash);
}

void PreparedStore::forget(Namespace ns, uint32_t item) {
  MutexLock lk(state_->mu);
  auto it = state_->spaces.find(ns);
  if (it != state_->spaces.end() && it->second.index.erase(item) != 0) --state_->stats.items;
}

std::optional<PreparedStore::Entry> PreparedStore::find(Namespace ns, uint32_t item) const {
  MutexLock lk(state_->mu);
  auto it = state_->spaces.find(ns);
  if (it != state_->spaces.end()) {
    if (auto at = it->second.index.find(item); at != it->second.index.end()) {
      return Entry{at->second.length, at->second.shape};
    }
  }
  ++state_->stats.misses;
  return std::nullopt;
}

bool PreparedStore::holds(Namespace ns, uint32_t item) const {
  if (!state_->mu.try_lock()) return false;
  const auto it = state_->spaces.find(ns);
  const bool held = it != state_->spaces.end() && it->second.index.contains(item);
  state_->mu.unlock();
  return held;
}

bool PreparedStore::read(Namespace ns, uint32_t item, std::span<uint8_t> out) {
  Location where;
  {
    MutexLock lk(state_->mu);
    auto it = state_->spaces.find(ns);
    const Location* found = nullptr;
    if (it != state_->spaces.end()) {
      if (auto at = it->second.index.find(item); at != it->second.index.end()) found = &at->second;
    }
    if (found == nullptr) {
      ++state_->stats.misses;
      return false;
    }
    where = *found;
  }
  RecordHeader h;
  const auto intact = [&] {
    return h.intact() && h.item == item && h.length == where.length &&
           XXH3_64bits(out.data(), out.size()) == h.payload_hash;
  };
  const auto read_cached = [&] {
    return full_pread(where.segment->fd, &h, sizeof h, where.offset) &&
           full_pread(where.segment->fd, out.data(), out.size(), where.offset + sizeof h) && intact();
  };
  bool good = false;
  std::string direct_off;  // why direct reads were turned off here, if they were
  if (where.length == out.size()) {
    const int direct_fd = state_->direct.load(std::memory_order_relaxed) ? where.segment->direct_fd : -1;
    if (direct_fd < 0) {
      good = read_cached();
    } else {
      const std::span<uint8_t> header(reinterpret_cast<uint8_t*>(&h), sizeof h);
      const bool got = direct_pread(direct_fd, header, out, where.offset);
      const int error = got ? 0 : errno;
      good = got && intact();
      // A direct read that fails or reads bytes that do not check is tried through the page cache
      // before the record is called corrupt: a file system may take O_DIRECT at open and refuse
      // this alignment, or serve direct reads apart from its cache. If that read is good, direct
      // reads are off from then on, with one log line.
      if (!good && read_cached()) {
        good = true;
        if (state_->direct.exchange(false)) {
          direct_off = fmt::format("a direct read of {} failed ({}) where a read through the page cache did not: "
                                   "reads go through the page cache from now on",
                                   where.segment->path,
                                   error != 0 ? std::strerror(error) : "its bytes differ from the page cache's");
        }
      }
    }
  }
  MutexLock lk(state_->mu);
  if (!direct_off.empty()) state_->log(direct_off);
  if (good) {
    ++state_->stats.hits;
    return true;
  }
  if (where.length != out.size()) return false;  // the caller's mistake, not the record's
  ++state_->stats.corrupt;
  auto it = state_->spaces.find(ns);
  if (it != state_->spaces.end()) {
    auto at = it->second.index.find(item);
    if (at != it->second.index.end() && at->second.segment == where.segment && at->second.offset == where.offset) {
      it->second.index.erase(at);
      --state_->stats.items;
      state_->log(fmt::format("{}: the record of item {} at byte {} is short or corrupt; the item will be "
                              "prepared again",
                              where.segment->path, item, where.offset));
    }
  }
  return false;
}

bool PreparedStore::offer(Namespace ns, uint32_t item, Shape shape, std::span<const uint8_t> bytes) {
  State& s = *state_;
  const uint64_t record = sizeof(RecordHeader) + bytes.size();
  std::vector<std::string> trash;
  uint64_t generation = 0;
  {
    MutexLock lk(s.mu);
    auto it = s.spaces.find(ns);
    if (it == s.spaces.end() || !s.admitting() || s.stopping) return false;
    if (it->second.index.count(item) || it->second.queued.count(item)) return false;
    if (record > s.options.segment_bytes || record > s.options.capacity || record > s.options.queue_bytes) {
      return false;  // never fits
    }
    if (!s.room_for(record, ns, trash)) {
      s.stop_full();
    } else if (s.stats.queued_bytes + record <= s.options.queue_bytes) {  // else the disk is behind: not now
      generation = it->second.generation;  // (room_for detaches only other namespaces: `it` stands)
      it->second.queued.insert(item);
      s.stats.queued_bytes += record;  // held for it while it is copied without the lock
    }
  }
  remove_all(trash);
  if (generation == 0) return false;
  Pending pending{ns, generation, item, shape, std::vector<uint8_t>(bytes.begin(), bytes.end())};
  MutexLock lk(s.mu);
  auto it = s.spaces.find(ns);
  if (it == s.spaces.end() || it->second.generation != generation) {  // dropped meanwhile
    s.stats.queued_bytes -= record;
    s.maybe_resume();
    return false;
  }
  s.queue.push_back(std::move(pending));
  s.changed.notify_all();
  return true;
}

void PreparedStore::flush() {
  MutexLock lk(state_->mu);
  while (!state_->queue.empty() || state_->writing) state_->changed.wait(lk.native());
}

PreparedStore::Stats PreparedStore::stats() const {
  MutexLock lk(state_->mu);
  Stats out = state_->stats;
  out.bytes = state_->disk_bytes;
  out.admitting = state_->admitting();
  out.capacity = state_->options.capacity;
  out.direct_reads = state_->direct.load();
  return out;
}

}  // namespace joader
