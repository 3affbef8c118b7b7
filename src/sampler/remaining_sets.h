// RemainingSets: the state every sampler shares — for each job j its remaining set R_j (items of
// its subset not yet decided this epoch), and for each item x its signature sig[x] (bit j set iff
// x ∈ R_j). Items with equal signatures form the paper's "regions"; this structure never scans
// regions, so its cost does not grow with their number (which tends to min(2^k, N)).
//
// Layout and costs (k = number of jobs):
//   sig:        8 bytes per item of the universe.
//   per job:    its subset as one uint32 array `arr`, 4 bytes per subset item. The prefix
//               arr[0, end) holds every live member of R_j plus some "stale" entries whose bit has
//               been cleared by a removal whose index was not known (removal by value). Stale
//               entries are dropped when a draw lands on them, and the prefix is compacted when it
//               grows past twice the live count, so a uniform draw takes < 2 tries on average.
//               A refill is `end = |subset|` plus setting bits: no copy.
//   inter:      k×k matrix of |R_i ∩ R_j| (diagonal = |R_j|), updated in O(popcount(sig)) per
//               removal and O(|subset|·k) per refill.
// Draws are exactly uniform (rejection over a uniform index), which the samplers' exactness needs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "common/rng.h"
#include "common/types.h"

namespace joader {

// Told about every change of an item's signature (removal, refill, job join/leave), so that a
// cache policy can keep its order of cached items in step with their future references.
class SignatureObserver {
 public:
  virtual ~SignatureObserver() = default;
  virtual void signature_changed(ItemId item, uint64_t old_sig, uint64_t new_sig) = 0;
};

// Thrown for caller errors (bad ids, too many jobs): the message is meant for the user; kFull
// when the request was fine but the dataset already has as many jobs as it can hold.
class SamplerError : public std::runtime_error {
 public:
  enum Code { kInvalid, kFull };
  explicit SamplerError(const std::string& message, Code code = kInvalid)
      : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

class RemainingSets {
 public:
  static constexpr uint32_t kNoIndex = UINT32_MAX;

  explicit RemainingSets(uint32_t universe);

  uint32_t universe() const { return static_cast<uint32_t>(sig_.size()); }

  // Registers a job whose remaining set is its whole subset. Throws SamplerError if an id is out
  // of range or repeated, the subset is empty, or all kMaxJobs slots are taken.
  JobSlot add_job(std::vector<ItemId> subset);
  // Forgets the job: clears its bit in every signature and frees the slot.
  void remove_job(JobSlot job);

  bool active(JobSlot job) const { return (active_mask_ >> job) & 1; }
  uint64_t active_mask() const { return active_mask_; }

  uint64_t signature(ItemId x) const { return sig_[x]; }
  bool contains(JobSlot job, ItemId x) const { return (sig_[x] >> job) & 1; }
  uint32_t size(JobSlot job) const { return inter_[job][job]; }
  uint32_t intersection(JobSlot a, JobSlot b) const { return inter_[a][b]; }
  const std::vector<ItemId>& subset(JobSlot job) const { return jobs_[job].arr; }

  // Uniform draw from R_job (must be non-empty). *index receives the draw's position for a
  // cheaper remove(); it stays valid until the next call that touches this job.
  ItemId draw(JobSlot job, Rng& rng, uint32_t* index);
  // Uniform draw from R_job \ R_excluded (must be non-empty). Rejection from R_job, with the
  // number of tries capped near |R_job|/8 and an exact scan after that: expected O(1) per call
  // averaged over the DSA's use (see docs/SAMPLER.md), O(|subset|) in the worst case.
  ItemId draw_excluding(JobSlot job, JobSlot excluded, Rng& rng, uint32_t* index);

  // Removes x from R_job (x must be in it). `index` is a hint from draw(), or kNoIndex.
  void remove(JobSlot job, ItemId x, uint32_t index = kNoIndex);
  // R_job := the job's whole subset again (R_job must be empty): the next epoch.
  void refill(JobSlot job);

  void set_observer(SignatureObserver* observer) { observer_ = observer; }

  // Bytes held by this structure (signatures, subset arrays, matrix).
  size_t memory_bytes() const;

 private:
  struct Job {
    std::vector<ItemId> arr;  // a permutation of the subset; arr[0, end) ⊇ R_j
    uint32_t end = 0;
  };

  void set_bit(JobSlot job, ItemId x);
  void clear_bit(JobSlot job, ItemId x);
  void drop_stale_at(Job& j, uint32_t i);
  void compact(JobSlot job);
  void check_job(JobSlot job) const;

  std::vector<uint64_t> sig_;
  std::array<Job, kMaxJobs> jobs_;
  std::array<std::array<uint32_t, kMaxJobs>, kMaxJobs> inter_{};
  uint64_t active_mask_ = 0;
  SignatureObserver* observer_ = nullptr;
};

}  // namespace joader
