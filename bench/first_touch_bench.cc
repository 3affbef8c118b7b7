// What the first access to each page of shared memory costs a process, against the same access once
// the page has been touched: the cost that separates a first epoch from the ones after it, where
// the daemon writes each item into arena pages and every job reads it from its own new mapping.
//
//   build/first_touch_bench [--mib 256] [--runs 3]
//
// Each run makes a POSIX shared-memory object of --mib MiB (as the daemon's arena, posix_fallocate
// reserving its pages) and times, per 4 KiB page and per 150 528-byte item (a 224×224 RGB crop):
//   writer: a pass writing the whole object item by item, the first after mapping it (a) lazily,
//           (b) after MADV_POPULATE_WRITE (what the daemon did before), (c) after that and a read of
//           one byte per page (what the daemon's populate thread does now); then a second pass.
//   reader: a new process (fork) maps the written object read-only and reads it item by item into
//           a 64-item batch, the first pass on (d) a lazy mapping, (e) one mapped with
//           MAP_POPULATE; then a second pass.
// On bare metal a populated page's first access costs nothing extra; on a virtual machine whose
// hypervisor fills its own copy of each page table on first access (shadow paging), it is a trap
// per page and per process, which mapping ahead does not remove and touching ahead does.
// Medians of --runs; "ahead" is the time spent mapping or touching before the first pass, per page.
// Prints one table; the figures in docs/BENCHMARKS.md come from it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kItem = 224 * 224 * 3;
constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (Linux 5.14), absent from older headers

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

[[noreturn]] void die(const std::string& what) {
  std::perror(what.c_str());
  std::exit(1);
}

struct Object {
  std::string name;
  size_t size;
  uint8_t* data;
};

Object make_object(size_t size) {
  Object o{"/joader-first-touch-" + std::to_string(getpid()), size, nullptr};
  const int fd = shm_open(o.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) die("shm_open");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || posix_fallocate(fd, 0, static_cast<off_t>(size)) != 0) {
    die("reserving shared memory (is /dev/shm large enough? use a smaller --mib)");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) die("mmap");
  o.data = static_cast<uint8_t*>(p);
  return o;
}

void drop_object(const Object& o) {
  munmap(o.data, o.size);
  shm_unlink(o.name.c_str());
}

// Seconds for one pass writing every whole item of the object.
double write_pass(uint8_t* data, size_t size) {
  static const std::vector<uint8_t> item(kItem, 7);
  const auto t = Clock::now();
  for (size_t at = 0; at + kItem <= size; at += kItem) std::memcpy(data + at, item.data(), kItem);
  return seconds_since(t);
}

double read_pass(const uint8_t* data, size_t size, std::vector<uint8_t>& batch) {
  const auto t = Clock::now();
  size_t slot = 0;
  for (size_t at = 0; at + kItem <= size; at += kItem, slot = (slot + 1) % 64) {
    std::memcpy(batch.data() + slot * kItem, data + at, kItem);
  }
  return seconds_since(t);
}

struct Passes {
  double ahead, first, second;  // seconds: mapping (or touching) ahead, the first pass, the second
};

// writer case: 0 lazy, 1 populated, 2 populated and touched.
Passes writer(size_t size, int mode) {
  Object o = make_object(size);
  const auto t = Clock::now();
  if (mode >= 1) madvise(o.data, size, kPopulateWrite);
  if (mode >= 2) {
    for (size_t at = 0; at < size; at += kPage) (void)*static_cast<volatile uint8_t*>(o.data + at);
  }
  const double ahead = seconds_since(t);
  const double first = write_pass(o.data, size);
  const double second = write_pass(o.data, size);
  drop_object(o);
  return {ahead, first, second};
}

// Seconds for one pass reading every whole item of the object with pread (no mapping: the kernel
// copies from its own mapping of the pages).
double pread_pass(int fd, size_t size, std::vector<uint8_t>& batch) {
  const auto t = Clock::now();
  size_t slot = 0;
  for (size_t at = 0; at + kItem <= size; at += kItem, slot = (slot + 1) % 64) {
    if (pread(fd, batch.data() + slot * kItem, kItem, static_cast<off_t>(at)) != static_cast<ssize_t>(kItem)) _exit(4);
  }
  return seconds_since(t);
}

// reader case, in a new process: 0 lazy mapping, 1 MAP_POPULATE, 2 pread.
Passes reader(size_t size, int mode) {
  Object o = make_object(size);
  write_pass(o.data, size);
  int pipefd[2];
  if (pipe(pipefd) != 0) die("pipe");
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    std::vector<uint8_t> batch(64 * kItem, 0);  // written before the passes: its own first touches
    const auto start = Clock::now();
    const int fd = shm_open(o.name.c_str(), O_RDONLY, 0);
    double t[3];
    if (mode == 2) {
      if (fd < 0) _exit(2);
      t[0] = seconds_since(start);
      t[1] = pread_pass(fd, size, batch);
      t[2] = pread_pass(fd, size, batch);
    } else {
      void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED | (mode == 1 ? MAP_POPULATE : 0), fd, 0);
      if (fd < 0 || p == MAP_FAILED) _exit(2);
      t[0] = seconds_since(start);
      t[1] = read_pass(static_cast<const uint8_t*>(p), size, batch);
      t[2] = read_pass(static_cast<const uint8_t*>(p), size, batch);
    }
    _exit(write(pipefd[1], t, sizeof t) == sizeof t ? 0 : 3);
  }
  close(pipefd[1]);
  double t[3] = {0, 0, 0};
  const bool got = read(pipefd[0], t, sizeof t) == sizeof t;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  drop_object(o);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "first_touch_bench: the reader process failed\n");
    std::exit(1);
  }
  return {t[0], t[1], t[2]};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--mib" || a == "--runs") && i + 1 < argc) {
      const long v = std::strtol(argv[++i], nullptr, 10);
      if (v <= 0) {
        std::fprintf(stderr, "first_touch_bench: %s needs a positive number\n", a.c_str());
        return 2;
      }
      if (a == "--mib") {
        mib = static_cast<size_t>(v);
      } else {
        runs = static_cast<int>(v);
      }
    } else {
      std::fprintf(stderr, "usage: first_touch_bench [--mib 256] [--runs 3]\n");
      return 2;
    }
  }
  const size_t size = mib << 20;
  const double pages = static_cast<double>(size) / kPage, items = static_cast<double>(size / kItem);
  struct Case {
    const char* what;
    bool is_writer;
    int mode;
  };
  const Case cases[] = {
      {"writer, lazy mapping", true, 0},
      {"writer, after MADV_POPULATE_WRITE", true, 1},
      {"writer, populated and one byte per page read", true, 2},
      {"reader (new process), lazy mapping", false, 0},
      {"reader (new process), MAP_POPULATE", false, 1},
      {"reader (new process), pread, no mapping", false, 2},
  };
  std::printf("first access to shared memory, %zu MiB, median of %d runs (us per 4 KiB page / per 150 KB item)\n",
              mib, runs);
  std::printf("%-46s %12s %12s %12s %12s\n", "", "ahead", "first pass", "per item", "second pass");
  for (const Case& c : cases) {
    std::vector<double> ahead, first, second;
    for (int r = 0; r < runs; ++r) {
      const Passes p = c.is_writer ? writer(size, c.mode) : reader(size, c.mode);
      ahead.push_back(p.ahead);
      first.push_back(p.first);
      second.push_back(p.second);
    }
    const double a = median(ahead), f = median(first), s = median(second);
    std::printf("%-46s %9.2f us %9.2f us %9.1f us %9.2f us\n", c.what, 1e6 * a / pages, 1e6 * f / pages,
                1e6 * f / items, 1e6 * s / pages);
  }
  return 0;
}
