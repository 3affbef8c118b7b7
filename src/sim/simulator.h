// Simulator: runs a Scenario on a virtual clock with the same Sampler and Cache/EvictionPolicy
// classes as the daemon.
//
// Clock: integer steps of one millisecond on the Dispatcher's clock (src/dispatch/dispatcher.h), the
// same dispatcher the daemon runs: a job is active from step `start` (until `stop` or its last
// epoch); each step its consumer earns `speed` items and takes whole batches of `batch` items
// from its queue of decided items, acknowledging them; then the dispatcher forms every round
// that is due (credit at the measured rates, catch-up below one batch, `prefetch` batches
// ahead). A round's distinct items not in the cache are loads (one load per item, however many
// jobs got it); then they enter the cache under the policy. A delivery is a hit when its item
// was resident at the start of the round, and is counted when it is decided. Loads take the
// scenario's load_ms steps each (disk.read_ms for an item its disk tier holds) on `loaders` loader
// threads (0: instant): a consumer takes a batch
// once its items are loaded, and a job whose window waits on loads says so to the dispatcher, as
// the daemon's engine does. As in the daemon, a decided item stays pinned in the cache until its job
// consumes it. Under `lockstep` a round may be blocked (the shared order waits for a job
// outside it); the step then ends.
//
// `belady` needs the future: the scenario is run once without a cache to record the trace (the
// sampler never depends on the cache, so the same seed replays the same trace), then again with
// the offline-optimal policy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sampler/sampler.h"
#include "sim/scenario.h"

namespace joader {

struct TraceEvent {
  uint64_t t;        // step
  size_t job;        // index into Scenario::jobs
  uint32_t epoch;    // the job's epoch, 0-based
  ItemId item;
  bool hit;
};

struct SimJobResult {
  std::string name;
  uint64_t deliveries = 0;
  uint32_t epochs = 0;  // completed epochs
  uint64_t end_step = 0;  // the step in which the job finished or left
};

struct SimResult {
  uint64_t loads = 0;       // decodes + disk_reads
  uint64_t decodes = 0;     // loads that prepare the item from its file
  uint64_t disk_reads = 0;  // loads that read it back from the disk tier (Scenario::disk)
  uint64_t deliveries = 0;
  uint64_t hits = 0;
  uint64_t rounds = 0;
  uint64_t steps = 0;
  std::vector<SimJobResult> jobs;
  double ld_ratio() const { return deliveries == 0 ? 0.0 : double(loads) / double(deliveries); }
  double decodes_per_delivery() const { return deliveries == 0 ? 0.0 : double(decodes) / double(deliveries); }
};

using SamplerFactory = std::function<std::unique_ptr<Sampler>(const Scenario&)>;

// Runs the scenario. `on_delivery` (optional) sees every delivery in order. `make_sampler_for`
// (optional) replaces the scenario's named sampler, e.g. by a deliberately biased one in tests.
// Throws ScenarioError or SamplerError (e.g. more than kMaxJobs jobs at once) for scenarios that
// cannot run.
SimResult simulate(const Scenario& scenario, const std::function<void(const TraceEvent&)>& on_delivery = {},
                   const SamplerFactory& make_sampler_for = {});

}  // namespace joader
