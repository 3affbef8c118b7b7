// Sampler throughput: decisions per second on an ImageNet-sized dataset (N = 1.28 M items) with k
// jobs whose subsets are random 50–100 % samples and whose epochs are at random phases (each job
// first runs alone for a random fraction of its epoch). Every round asks all k jobs.
//
//   build/sampler_bench --benchmark_min_time=1
#include <map>
#include <memory>

#include <benchmark/benchmark.h>

#include "sampler/sampler.h"
#include "sim/scenario.h"

namespace joader {
namespace {

constexpr uint32_t kItems = 1'280'000;

struct Setup {
  std::unique_ptr<Sampler> sampler;
  std::vector<JobSlot> jobs;
  uint64_t subset_items = 0;
};

// Built once per configuration: setting up 64 jobs on 1.28 M items takes seconds.
Setup& setup(const std::string& name, int k, bool identical) {
  static std::map<std::tuple<std::string, int, bool>, Setup> cache;
  auto key = std::tuple{name, k, identical};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Setup s;
  s.sampler = make_sampler(name, kItems, 1);
  Rng rng(99);
  std::vector<Decision> out;
  for (int j = 0; j < k; ++j) {
    const uint32_t size = identical ? kItems : kItems / 2 + static_cast<uint32_t>(rng.uniform(kItems / 2 + 1));
    std::vector<ItemId> subset = sample_subset(kItems, size, identical ? 0 : 1000 + j);
    s.subset_items += subset.size();
    const JobSlot slot = s.sampler->add_job(std::move(subset));
    s.jobs.push_back(slot);
    if (identical) continue;
    const std::array<JobSlot, 1> alone{slot};
    for (uint64_t n = rng.uniform(size); n > 0; --n) s.sampler->round(alone, out);
  }
  return cache[key] = std::move(s);
}

void run(benchmark::State& state, const std::string& name, bool identical) {
  Setup& s = setup(name, static_cast<int>(state.range(0)), identical);
  std::vector<Decision> out;
  uint64_t decisions = 0;
  for (auto _ : state) {
    s.sampler->round(s.jobs, out);
    decisions += out.size();
  }
  state.counters["decisions/s"] = benchmark::Counter(double(decisions), benchmark::Counter::kIsRate);
  const double per_job_items = double(s.sampler->memory_bytes() - 8.0 * kItems) / double(s.subset_items);
  state.counters["B/item"] = 8.0;  // the signature array
  state.counters["B/job_item"] = per_job_items;
  state.counters["MiB"] = double(s.sampler->memory_bytes()) / (1 << 20);
}

void BM_Dsa_RandomSubsetsRandomPhases(benchmark::State& state) { run(state, "dsa", false); }
void BM_Dsa_IdenticalSubsetsSamePhase(benchmark::State& state) { run(state, "dsa", true); }
void BM_Independent_RandomSubsetsRandomPhases(benchmark::State& state) { run(state, "independent", false); }

BENCHMARK(BM_Dsa_RandomSubsetsRandomPhases)->Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Dsa_IdenticalSubsetsSamePhase)->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Independent_RandomSubsetsRandomPhases)->Arg(16)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace joader

BENCHMARK_MAIN();
