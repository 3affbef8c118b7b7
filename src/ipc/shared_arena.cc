#include "ipc/shared_arena.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>

namespace joader {
namespace {

std::string prefix() { return "joader-" + std::to_string(getuid()) + "-"; }

// Asks for huge pages on a mapping of the arena (see "Huge pages" in the header); the kernel
// decides. An older kernel's EINVAL changes nothing.
void advise_huge_pages(const void* data, uint64_t size) { madvise(const_cast<void*>(data), size, MADV_HUGEPAGE); }

// See SharedArena::huge_page_bytes.
uint64_t mapped_huge_bytes(const void* mapping) {
  // smaps lists each mapping as a line "start-end perms ..." (addresses in hex) followed by lines
  // "Field:   N kB" (field names are not hex digits throughout).
  static constexpr std::string_view kField = "ShmemPmdMapped:";
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapping);
  std::string line;
  bool mine = false;
  while (std::getline(smaps, line)) {
    const size_t dash = line.find('-');
    const bool header = dash != std::string::npos && dash > 0 &&
                         std::all_of(line.begin(), line.begin() + dash, [](unsigned char c) { return std::isxdigit(c); });
    if (header) {
      if (mine) return 0;  // past our mapping without the field (a kernel older than 4.8)
      mine = std::strtoull(line.c_str(), nullptr, 16) == start;
    } else if (mine && line.starts_with(kField)) {
      return std::strtoull(line.c_str() + kField.size(), nullptr, 10) * 1024;
    }
  }
  return 0;
}

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

SharedArena::SharedArena(uint64_t size, std::optional<gid_t> group) : size_(size) {
  static std::atomic<int> counter{0};
  name_ = "/" + prefix() + std::to_string(getpid()) + "-" + std::to_string(counter++);
  const int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail("cannot create shared memory " + name_);
  if (group && (fchown(fd, static_cast<uid_t>(-1), *group) != 0 || fchmod(fd, 0640) != 0)) {
    const int err = errno;
    close(fd);
    shm_unlink(name_.c_str());
    errno = err;
    fail("cannot give group " + std::to_string(*group) + " read access to shared memory " + name_);
  }
  // posix_fallocate, not just ftruncate: a sparse object larger than what /dev/shm can hold would
  // kill the daemon with SIGBUS at the first write beyond the limit, long after start-up.
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || (errno = posix_fallocate(fd, 0, static_cast<off_t>(size))) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name_.c_str());
    errno = err;
    fail("cannot reserve " + std::to_string(size) + " bytes of shared memory for the cache (is /dev/shm large enough? "
         "use a smaller --cache-size)");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name_.c_str());
    errno = err;
    fail("cannot map shared memory " + name_);
  }
  data_ = static_cast<uint8_t*>(p);
  advise_huge_pages(data_, size_);
  populate_ = std::jthread([this](std::stop_token stop) { populate(stop); });
}

std::string arena_page_setting() {
  std::ifstream sys("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string word;
  while (sys >> word) {
    if (word == "[force]" || word == "[deny]") return "shmem_enabled=" + word.substr(1, word.size() - 2);
  }
  std::ifstream mounts("/proc/mounts");
  std::string device, dir, type, options;
  std::string found = "unknown";
  while (mounts >> device >> dir >> type >> options && std::getline(mounts, word)) {
    if (dir != "/dev/shm") continue;
    found = "huge=never";  // tmpfs's default
    for (size_t at = 0; at < options.size();) {
      const size_t end = std::min(options.find(',', at), options.size());
      if (options.compare(at, 5, "huge=") == 0) found = options.substr(at, end - at);
      at = end + 1;
    }
  }
  return found;
}

uint64_t SharedArena::huge_page_bytes() const {
  return populated_.load(std::memory_order_acquire) ? populated_huge_bytes_ : mapped_huge_bytes(data_);
}

namespace {

// One read of the first byte of each 4 KiB page of [data, data + size): SharedArena::populate's touch,
// and the pages ArenaView times.
// Loader threads may be writing items into these pages meanwhile: a read that races with them reads
// a byte it discards, so ThreadSanitizer is told not to report it.
__attribute__((no_sanitize("thread"))) void touch_pages(const uint8_t* data, uint64_t size) {
  for (uint64_t at = 0; at < size; at += ArenaReads::kPage) {
    (void)*static_cast<const volatile uint8_t*>(data + at);
  }
}

}  // namespace

void SharedArena::populate(const std::stop_token& stop) {
  constexpr uint64_t kChunk = uint64_t{32} << 20;
  for (uint64_t at = 0; at < size_ && !stop.stop_requested(); at += kChunk) {
    const uint64_t n = std::min(kChunk, size_ - at);
    // Maps the pages writable without touching their bytes (Linux 5.14+); older kernels answer
    // EINVAL, and the touch below maps them (read-faulted; a first write then faults again).
    madvise(data_ + at, n, MADV_POPULATE_WRITE);
    touch_pages(data_ + at, n);
  }
  if (stop.stop_requested()) return;
  populated_huge_bytes_ = mapped_huge_bytes(data_);  // every page is mapped: it stays as it is now
  populated_.store(true, std::memory_order_release);
}

SharedArena::~SharedArena() {
  populate_.request_stop();
  if (populate_.joinable()) populate_.join();
  munmap(data_, size_);
  shm_unlink(name_.c_str());
}

int SharedArena::remove_stale() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const std::string mine = prefix();
  int removed = 0;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(mine, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + mine.size(), nullptr, 10));
    // Our own pid can only be a leftover of a dead daemon that had the same pid (containers).
    if (pid > 0 && (pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH))) {
      removed += shm_unlink(("/" + name).c_str()) == 0;
    }
  }
  closedir(dir);
  return removed;
}

namespace {

// µs per page of this process's first reads of `data` (a new mapping): one byte of each of 64
// pages read in a row, at the end of the arena (the allocator fills it from the start), twice, the
// lesser of the two (a preemption in one does not count). Timed as a whole: the cost lies in the
// faults, each mapping up to 16 pages, not in every page (timed alone, most pages cost nothing).
double measure_first_reads(const uint8_t* data, uint64_t size) {
  constexpr uint64_t kPages = 64;
  if (size < 2 * kPages * ArenaReads::kPage) return 0;
  double best = 1e9;
  for (int round = 0; round < 2; ++round) {
    const uint8_t* first = data + size - (2 - round) * kPages * ArenaReads::kPage;
    const auto t = std::chrono::steady_clock::now();
    touch_pages(first, kPages * ArenaReads::kPage);
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count());
  }
  return best / kPages;
}

uint8_t copy_reads_for(double first_read_micros) {
  if (const char* env = std::getenv("JOADER_ARENA_COPY_READS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n >= 0 && n <= 255) return static_cast<uint8_t>(n);
  }
  return first_read_micros >= ArenaReads::kTrapMicros ? ArenaReads::kCopyReads : 0;
}

}  // namespace

ArenaView::ArenaView(const std::string& name, uint64_t size, uid_t owner) : size_(size), reads_(0, 0) {
  fd_ = shm_open(name.c_str(), O_RDONLY | O_NOFOLLOW, 0);
  if (fd_ < 0) fail("cannot open the daemon's shared memory " + name);
  if (struct stat st {}; fstat(fd_, &st) != 0 || st.st_uid != owner || (st.st_mode & 022) != 0) {
    const std::string why = st.st_uid != owner ? "belongs to uid " + std::to_string(st.st_uid) + ", not to the daemon's uid " +
                                                     std::to_string(owner)
                                               : "may be written by other users";
    close(fd_);
    throw std::runtime_error("refusing the daemon's shared memory " + name + ": it " + why);
  }
  void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd_);
    errno = err;
    fail("cannot map the daemon's shared memory " + name);
  }
  data_ = static_cast<const uint8_t*>(p);
  try {
    // A smaller object than the daemon announced would fault (SIGBUS) at the first read past its end.
    struct stat st {};
    if (fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < size_) {
      throw std::runtime_error("the daemon's shared memory " + name + " is smaller than announced");
    }
    advise_huge_pages(data_, size_);  // the daemon's huge pages are mapped whole here too
    first_read_micros_ = measure_first_reads(data_, size_);
    reads_ = ArenaReads(size_, copy_reads_for(first_read_micros_));
  } catch (...) {
    munmap(p, size_);
    close(fd_);
    throw;
  }
}

ArenaView::~ArenaView() {
  munmap(const_cast<uint8_t*>(data_), size_);
  close(fd_);
}

void ArenaView::copy(uint64_t offset, uint64_t n, uint8_t* dst) const {
  if (offset > size_ || n > size_ - offset) {
    throw std::runtime_error("an item outside the daemon's shared memory");
  }
  while (n > 0) {
    const ssize_t got = pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) errno = EIO;  // shorter than the daemon made it
    if (got <= 0) fail("cannot read the daemon's shared memory");
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

}  // namespace joader
