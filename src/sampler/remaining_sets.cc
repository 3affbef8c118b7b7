#include "sampler/remaining_sets.h"

#include <bit>
#include <string>
#include <utility>

namespace joader {

RemainingSets::RemainingSets(uint32_t universe) : sig_(universe, 0) {
  if (universe == 0) throw SamplerError("the universe must hold at least one item");
}

void RemainingSets::check_job(JobSlot job) const {
  if (job < 0 || job >= kMaxJobs || !active(job)) {
    throw SamplerError("no active job in slot " + std::to_string(job));
  }
}

JobSlot RemainingSets::add_job(std::vector<ItemId> subset) {
  if (active_mask_ == ~uint64_t{0}) {
    throw SamplerError("too many jobs: at most " + std::to_string(kMaxJobs) + " jobs may share one dataset",
                       SamplerError::kFull);
  }
  if (subset.empty()) throw SamplerError("the job's subset is empty");
  std::vector<bool> seen(sig_.size(), false);
  for (ItemId x : subset) {
    if (x >= sig_.size()) {
      throw SamplerError("item id " + std::to_string(x) + " is outside the dataset (" +
                         std::to_string(sig_.size()) + " items)");
    }
    if (seen[x]) throw SamplerError("item id " + std::to_string(x) + " appears twice in the subset");
    seen[x] = true;
  }
  const JobSlot slot = std::countr_one(active_mask_);
  active_mask_ |= uint64_t{1} << slot;
  jobs_[slot].arr = std::move(subset);
  jobs_[slot].end = 0;
  refill(slot);
  return slot;
}

void RemainingSets::remove_job(JobSlot job) {
  check_job(job);
  Job& j = jobs_[job];
  for (uint32_t i = 0; i < j.end; ++i) {
    if (contains(job, j.arr[i])) clear_bit(job, j.arr[i]);
  }
  active_mask_ &= ~(uint64_t{1} << job);
  j = Job{};
  for (auto& row : inter_) row[job] = 0;
  inter_[job].fill(0);
}

void RemainingSets::set_bit(JobSlot job, ItemId x) {
  const uint64_t old = sig_[x];
  for (uint64_t rest = old; rest != 0; rest &= rest - 1) {
    const int b = std::countr_zero(rest);
    ++inter_[job][b];
    ++inter_[b][job];
  }
  ++inter_[job][job];
  sig_[x] = old | (uint64_t{1} << job);
  if (observer_ != nullptr) observer_->signature_changed(x, old, sig_[x]);
}

void RemainingSets::clear_bit(JobSlot job, ItemId x) {
  const uint64_t old = sig_[x];
  sig_[x] = old & ~(uint64_t{1} << job);
  for (uint64_t rest = sig_[x]; rest != 0; rest &= rest - 1) {
    const int b = std::countr_zero(rest);
    --inter_[job][b];
    --inter_[b][job];
  }
  --inter_[job][job];
  if (observer_ != nullptr) observer_->signature_changed(x, old, sig_[x]);
}

void RemainingSets::drop_stale_at(Job& j, uint32_t i) {
  std::swap(j.arr[i], j.arr[j.end - 1]);
  --j.end;
}

ItemId RemainingSets::draw(JobSlot job, Rng& rng, uint32_t* index) {
  Job& j = jobs_[job];
  for (;;) {
    const auto i = static_cast<uint32_t>(rng.uniform(j.end));
    const ItemId x = j.arr[i];
    if (contains(job, x)) {
      *index = i;
      return x;
    }
    drop_stale_at(j, i);
  }
}

ItemId RemainingSets::draw_excluding(JobSlot job, JobSlot excluded, Rng& rng, uint32_t* index) {
  Job& j = jobs_[job];
  const uint64_t want = uint64_t{1} << job;
  const uint64_t mask = want | (uint64_t{1} << excluded);
  // Rejection: accept a uniform member of R_job that is not in R_excluded. Stale entries are
  // dropped as they are met. The cap keeps the worst case near one scan of the array.
  for (uint32_t tries = 16 + j.end / 8; tries > 0; --tries) {
    const auto i = static_cast<uint32_t>(rng.uniform(j.end));
    const ItemId x = j.arr[i];
    const uint64_t s = sig_[x] & mask;
    if (s == want) {
      *index = i;
      return x;
    }
    if ((s & want) == 0) drop_stale_at(j, i);
  }
  // Exact fallback: the k-th member of R_job \ R_excluded in array order, k uniform.
  compact(job);
  const uint32_t candidates = size(job) - intersection(job, excluded);
  uint64_t k = rng.uniform(candidates);
  for (uint32_t i = 0; i < j.end; ++i) {
    if ((sig_[j.arr[i]] & mask) == want && k-- == 0) {
      *index = i;
      return j.arr[i];
    }
  }
  throw std::logic_error("draw_excluding: R_job \\ R_excluded is empty");
}

void RemainingSets::remove(JobSlot job, ItemId x, uint32_t index) {
  clear_bit(job, x);
  Job& j = jobs_[job];
  if (index < j.end && j.arr[index] == x) drop_stale_at(j, index);
  // Keep stale entries below half of the prefix so draws stay cheap; amortized O(1).
  if (j.end > 2 * size(job) + 32) compact(job);
}

void RemainingSets::compact(JobSlot job) {
  Job& j = jobs_[job];
  uint32_t live = 0;
  for (uint32_t i = 0; i < j.end; ++i) {
    if (contains(job, j.arr[i])) std::swap(j.arr[live++], j.arr[i]);
  }
  j.end = live;
}

void RemainingSets::refill(JobSlot job) {
  Job& j = jobs_[job];
  if (size(job) != 0) throw std::logic_error("refill of a job whose remaining set is not empty");
  j.end = static_cast<uint32_t>(j.arr.size());
  for (ItemId x : j.arr) set_bit(job, x);
}

size_t RemainingSets::memory_bytes() const {
  size_t bytes = sig_.capacity() * sizeof(uint64_t) + sizeof(inter_);
  for (const Job& j : jobs_) bytes += j.arr.capacity() * sizeof(ItemId);
  return bytes;
}

}  // namespace joader
