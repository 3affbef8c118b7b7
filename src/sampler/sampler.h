// Sampler: decides, round by round, which item each requesting job receives next.
//
// Contract shared by every implementation: each job receives every id of its subset exactly once
// per epoch (epochs follow each other without gaps); a round gives each requesting job at most one
// item; all decisions of a round are computed against the state at the start of the round, and
// the removals (and refills of emptied jobs) are applied after the round. Implementations differ
// only in how they couple the jobs' choices (see dsa_sampler.h).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/types.h"
#include "sampler/remaining_sets.h"

namespace joader {

struct Decision {
  JobSlot job;
  ItemId item;
  uint32_t epoch = 0;                          // the job's epoch (0-based) this item belongs to
  uint32_t index = RemainingSets::kNoIndex;    // internal: position hint for the removal
};

class Sampler {
 public:
  Sampler(uint32_t universe, uint64_t seed);
  virtual ~Sampler() = default;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Adds a job; `epochs` = 0 means unbounded. Throws SamplerError on a bad subset or when all
  // kMaxJobs slots are in use. A resumed job starts in epoch `first_epoch` with the items of
  // `consumed` (a subset of `subset`) already taken in that epoch; epochs count from 0 in all
  // cases, so the job finishes after epoch `epochs` - 1.
  //
  // An `ordered` job receives each epoch's items in the order of `subset` (torch's
  // SequentialSampler; a resumed epoch skips the consumed ones) instead of a uniformly random
  // order. Its decisions are made after the random jobs' and are never a DSA parent: a random
  // job's order stays exactly uniform beside it. It shares with the others through the cache only
  // (its remaining set counts in every item's signature, so the cache keeps what it will need).
  JobSlot add_job(std::vector<ItemId> subset, uint32_t epochs = 0, uint32_t first_epoch = 0,
                  std::span<const ItemId> consumed = {}, bool ordered = false);
  bool ordered(JobSlot job) const { return !order_[job].empty(); }
  // The job leaves now, mid-epoch or not; its slot is freed.
  void remove_job(JobSlot job);

  // One round for the given jobs (duplicates and finished jobs are ignored). Decisions are
  // appended to `out` (cleared first). A job may get no item in a round only under `lockstep`.
  void round(std::span<const JobSlot> requesting, std::vector<Decision>& out);

  // Epochs the job has completed; it is finished when that reaches its epoch limit.
  uint32_t epoch(JobSlot job) const { return epoch_[job]; }
  bool finished(JobSlot job) const { return limit_[job] != 0 && epoch_[job] >= limit_[job]; }

  const RemainingSets& sets() const { return sets_; }
  void set_observer(SignatureObserver* observer) { sets_.set_observer(observer); }
  size_t memory_bytes() const { return sets_.memory_bytes(); }

 protected:
  // Decides items for `jobs` (distinct, active, unfinished, non-empty R) against the current
  // state, without modifying any R_j; appends {job, item, index} to out.
  virtual void decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) = 0;

  RemainingSets sets_;
  Rng rng_;

 private:
  std::array<uint32_t, kMaxJobs> epoch_{};
  std::array<uint32_t, kMaxJobs> limit_{};
  std::array<std::vector<ItemId>, kMaxJobs> order_;  // an ordered job's subset in its order; else empty
  std::array<uint32_t, kMaxJobs> next_{};             // its place in order_ this epoch
  std::vector<JobSlot> scratch_, ordered_scratch_;
};

// The samplers by name: "dsa", "independent" (no coupling: the benchmarks' baseline), "lockstep"
// (one shared order: the simulator only) and "biased-dsa" (the statistical tests' deliberately
// non-uniform control, never for training).
const std::vector<std::string>& sampler_names();
// Builds a sampler by name (sampler_names()). Throws SamplerError otherwise.
std::unique_ptr<Sampler> make_sampler(const std::string& name, uint32_t universe, uint64_t seed);

}  // namespace joader
