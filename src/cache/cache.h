// Cache: which items are resident, their sizes and pins, and eviction under a policy.
// Capacity is in abstract units: items (size 1 each) in the simulator, bytes in the daemon.
//
// Invariants: used() = Σ sizes of resident items ≤ capacity() after every public call; a pinned
// item is never evicted; the policy sees exactly the resident unpinned items.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "cache/eviction_policy.h"
#include "sampler/remaining_sets.h"

namespace joader {

class Cache : public SignatureObserver {
 public:
  Cache(uint64_t capacity, std::unique_ptr<EvictionPolicy> policy);

  bool contains(ItemId x) const { return entries_.count(x) != 0; }
  // Records a hit on a resident item.
  void touch(ItemId x);
  // Makes x resident with `size` units, then evicts policy victims while over capacity; the
  // victim may be x itself (the policy declines to keep it). Returns whether x is resident
  // afterwards: false also when x is larger than the capacity (nothing is evicted then) or when
  // everything else is pinned.
  bool insert(ItemId x, uint64_t size);
  void pin(ItemId x);
  void unpin(ItemId x);
  // Drops x if resident, pinned or not (its pins are discarded).
  void erase(ItemId x);

  void signature_changed(ItemId x, uint64_t old_sig, uint64_t new_sig) override;

  // Called with each evicted item, e.g. to free its storage.
  void set_eviction_listener(std::function<void(ItemId)> listener) { on_evict_ = std::move(listener); }

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  size_t items() const { return entries_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint64_t size;
    uint32_t pins = 0;
    uint64_t inserted;
    uint64_t last_access;
  };
  void add_to_policy(ItemId x, const Entry& e) { policy_->add({x, e.inserted, e.last_access}); }
  void drop(ItemId x);

  uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unordered_map<ItemId, Entry> entries_;
  std::function<void(ItemId)> on_evict_;
};

}  // namespace joader
