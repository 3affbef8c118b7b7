// What the daemon's loader threads do per item, isolated from everything else the daemon does:
// prepare a JPEG (decode where the window reads, Resize(256), CenterCrop(224)) and put the 150 KB
// crop into the shared-memory arena, on 1, 2 and 4 threads of a 2-core machine. It answers the
// question docs/BENCHMARKS.md left open ("memory-bound work runs 15-35x slower inside the e2e
// window"): do the loaders slow each other's arena writes down, and does oversubscribing the
// cores (4 loader threads on 2) cost anything, when no client and no gRPC runs beside them?
//
//   build/arena_write_bench --benchmark_min_time=2 [DIR] [--reader]
//       DIR: an ImageFolder, default build/e2e-data (the first 200 images). --reader: a child
//       process gathers arena items into a batch (hwc_to_chw, as the Python binding does) round
//       and round while the benchmarks run, as a job beside the loaders would; its gathers per
//       second are printed at the end.
//
// Counters, per item: prep_cpu_us and write_cpu_us (the thread's CPU time in each step, so a
// thread that is descheduled mid-step does not count the wait), write_wall_us (the step's elapsed
// time), and items/s over all threads (real time).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "client/layout.h"
#include "ipc/shared_arena.h"
#include "image_files.h"
#include "prep/image_prep.h"

namespace joader {
namespace {

std::string g_dir = "build/e2e-data";
constexpr uint64_t kItem = 224 * 224 * 3;
constexpr uint64_t kArenaBytes = uint64_t{512} << 20;
constexpr uint64_t kSlots = kArenaBytes / kItem;
const PrepSpec kEval{.raw = false, .resize = 256, .crop = 224};

const std::vector<std::vector<uint8_t>>& files() {
  static const std::vector<std::vector<uint8_t>> all = read_image_files(g_dir);
  return all;
}

// One arena for the whole run, every page written once before any benchmark (as the daemon's
// populate thread does), so that no measurement pays first-touch faults.
SharedArena& arena() {
  static SharedArena* a = [] {
    auto* made = new SharedArena(kArenaBytes);
    std::memset(made->data(), 1, kArenaBytes);
    return made;
  }();
  return *a;
}
std::atomic<uint64_t> g_next_slot{0};

uint8_t* next_slot() { return arena().data() + (g_next_slot.fetch_add(1) % kSlots) * kItem; }

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

double wall_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void report(benchmark::State& state, double prep_cpu, double write_cpu, double write_wall) {
  const double n = double(state.iterations());
  state.counters["prep_cpu_us"] = benchmark::Counter(prep_cpu / n, benchmark::Counter::kAvgThreads);
  state.counters["write_cpu_us"] = benchmark::Counter(write_cpu / n, benchmark::Counter::kAvgThreads);
  state.counters["write_wall_us"] = benchmark::Counter(write_wall / n, benchmark::Counter::kAvgThreads);
  state.SetItemsProcessed(state.iterations());
}

// The 150 KB copy alone, from a buffer the thread just wrote (hot in its cache).
void BM_CopyIntoArena(benchmark::State& state) {
  arena();
  std::vector<uint8_t> item(kItem, 7);
  double cpu = 0, wall = 0;
  for (auto _ : state) {
    item[state.iterations() % kItem] ^= 1;
    const double c0 = thread_cpu_us(), w0 = wall_us();
    std::memcpy(next_slot(), item.data(), kItem);
    cpu += thread_cpu_us() - c0;
    wall += wall_us() - w0;
  }
  report(state, 0, cpu, wall);
}

// The daemon's path before prepare_into: prepare into a thread-local buffer, then copy it in.
void BM_PrepareThenCopy(benchmark::State& state) {
  arena();
  std::vector<uint8_t> out;
  size_t i = size_t(state.thread_index()) * 37;
  double prep = 0, cpu = 0, wall = 0;
  for (auto _ : state) {
    const double p0 = thread_cpu_us();
    prepare(kEval, files()[i++ % files().size()], out);
    const double c0 = thread_cpu_us(), w0 = wall_us();
    std::memcpy(next_slot(), out.data(), kItem);
    cpu += thread_cpu_us() - c0;
    wall += wall_us() - w0;
    prep += c0 - p0;
  }
  report(state, prep, cpu, wall);
}

// The daemon's path now: the resampler's last pass writes the crop straight into the arena.
void BM_PrepareIntoArena(benchmark::State& state) {
  arena();
  size_t i = size_t(state.thread_index()) * 37;
  double prep = 0;
  for (auto _ : state) {
    const double p0 = thread_cpu_us();
    prepare_into(kEval, files()[i++ % files().size()], {next_slot(), kItem});
    prep += thread_cpu_us() - p0;
  }
  report(state, prep, 0, 0);
}

BENCHMARK(BM_CopyIntoArena)->ThreadRange(1, 4)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrepareThenCopy)->ThreadRange(1, 4)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrepareIntoArena)->ThreadRange(1, 4)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The job beside the loaders (--reader): a child process that shares the arena's mapping and
// gathers one item after the other into a 64-item batch, counting its gathers in shared memory.
struct Reader {
  pid_t pid = -1;
  std::atomic<uint64_t>* gathers = nullptr;
  std::chrono::steady_clock::time_point start;
};

Reader start_reader() {
  Reader r;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) std::exit(2);
  r.gathers = new (page) std::atomic<uint64_t>(0);
  const uint8_t* items = arena().data();
  r.pid = fork();
  if (r.pid == 0) {
    std::vector<uint8_t> batch(64 * kItem);
    for (uint64_t i = 0;; ++i) {
      hwc_to_chw(items + (i % kSlots) * kItem, 224 * 224, batch.data() + (i % 64) * kItem);
      r.gathers->fetch_add(1, std::memory_order_relaxed);
    }
  }
  r.start = std::chrono::steady_clock::now();
  return r;
}

void stop_reader(const Reader& r) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
  kill(r.pid, SIGKILL);
  waitpid(r.pid, nullptr, 0);
  std::printf("reader: %.0f gathers/s of 224x224x3 items (%.1f us each) while the benchmarks ran\n",
              double(r.gathers->load()) / seconds, 1e6 * seconds / double(r.gathers->load()));
}

}  // namespace
}  // namespace joader

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  bool reader = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reader") {
      reader = true;
    } else {
      joader::g_dir = argv[i];
    }
  }
  joader::files();
  joader::Reader r;
  if (reader) r = joader::start_reader();
  benchmark::RunSpecifiedBenchmarks();
  if (reader) joader::stop_reader(r);
  return 0;
}
