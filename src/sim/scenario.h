// Scenario: the input of `joader simulate` (docs/SIMULATOR.md), parsed and validated from JSON.
//
// Fields: universe (item count), cache_items, epochs, seed, sampler (dsa|independent|lockstep),
// policy (refcnt|lru|fifo|belady|rate|planned), horizon, load_ms, loaders, disk?: {read_ms, items?,
// warm?, cheap_first?}, jobs: [{name, subset, start, speed, epochs?, stop?, batch?,
// prefetch?, jitter?}] with
// subset one of {"all": true} | {"range": [lo, hi)} | {"ids": [...]} | {"sample": count, "seed": s}.
// {"sample": c, "seed": s} is the first c ids of a permutation of the universe drawn from s, so
// samples with one seed are nested: the 25/50/75/100 % subsets of S4 share one seed.
// `stop` (extension): the step at which the job leaves, finished or not.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/types.h"

namespace joader {

// A user-facing error: one line saying what is wrong and where.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest universe a scenario may have: 2^24 items, as for the daemon's datasets (each job's
// subset is held as a list of ids, 4 bytes per item).
constexpr uint64_t kMaxUniverse = uint64_t{1} << 24;

struct JobSpec {
  std::string name;
  std::vector<ItemId> subset;
  uint64_t start = 0;
  std::optional<uint64_t> stop;
  double speed = 1.0;
  uint32_t epochs = 1;
  uint32_t batch = 1;     // items the job consumes (and acknowledges) at a time
  uint32_t prefetch = 4;  // batches decided ahead, as the daemon's jobs
  // Each batch takes batch / speed steps × (1 + u), u uniform in [-jitter, jitter]: a training
  // step's time varies.
  double jitter = 0;
  // Each epoch in the order of `subset` (a job with shuffle=False; Sampler::add_job).
  bool ordered = false;
};

struct Scenario {
  uint32_t universe = 0;
  uint64_t cache_items = 0;
  uint32_t epochs = 1;
  uint64_t seed = 0;
  std::string sampler = "dsa";
  std::string policy = "refcnt";
  // Items each job decides ahead, its window included (dispatch/dispatcher.h, "Plan"); 0: the
  // policy's default (kDefaultHorizon for `planned`, none for the others).
  uint64_t horizon = 0;
  // Load time: each load of an item takes load_ms steps on one of `loaders` loader threads (first
  // come, first served); a job takes a batch only once its items are loaded. 0: loads are instant.
  double load_ms = 0;
  uint32_t loaders = 1;
  // The disk tier (serve --disk-cache): an item enters it with its first load (a decode), and a
  // later load of it is a read of read_ms steps instead of load_ms. `items`: its capacity (0: no
  // bound); `warm`: it holds items from the start, the first `items` ids or all (a restarted
  // daemon whose tier holds the dataset). `cheap_first`: under refcnt and planned the cache evicts the items the tier holds
  // first among equals, as the daemon does (false: to measure what that gives).
  struct DiskTier {
    bool enabled = false;
    double read_ms = 0;
    uint64_t items = 0;
    bool warm = false;
    bool cheap_first = true;
  } disk;
  std::vector<JobSpec> jobs;
};

// Parses and validates; throws ScenarioError on any problem.
Scenario parse_scenario(const std::string& json_text);

// The first `count` ids of a seeded random permutation of 0..universe-1.
std::vector<ItemId> sample_subset(uint32_t universe, uint32_t count, uint64_t seed);

}  // namespace joader
