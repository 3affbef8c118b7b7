// Cache: which items are resident, their sizes and pins, and eviction under a policy.
// Capacity is in abstract units: items (size 1 each) in the simulator, bytes in the daemon.
// Keys are CacheKeys (dataset, item), so one cache can serve several datasets.
//
// Invariants: used() = Σ sizes of resident items ≤ capacity() after every public call; a pinned
// item is never evicted; the policy sees exactly the resident unpinned items.
// Not thread-safe: the owner serialises calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cache/eviction_policy.h"
#include "sampler/remaining_sets.h"

namespace joader {

class Cache {
 public:
  Cache(uint64_t capacity, std::unique_ptr<EvictionPolicy> policy);

  bool contains(CacheKey k) const { return entries_.count(k) != 0; }
  // Records a hit on a resident item.
  void touch(CacheKey k);
  // Makes k resident with `size` units, then evicts policy victims while over capacity; the
  // victim may be k itself (the policy declines to keep it). Returns whether k is resident
  // afterwards: false also when k is larger than the capacity (nothing is evicted then) or when
  // everything else is pinned.
  bool insert(CacheKey k, uint64_t size);
  // Evicts unpinned victims until `size` more units fit; returns whether they do.
  bool make_room(uint64_t size);
  // Evicts the policy's next victim; false if every resident item is pinned.
  bool evict_one();
  void pin(CacheKey k);
  void unpin(CacheKey k);
  uint32_t pins(CacheKey k) const;
  // Drops k if resident, pinned or not (its pins are discarded).
  void erase(CacheKey k);

  // Re-keys k in the policy after its signature changed (no-op for policies that ignore them).
  void signature_changed(CacheKey k);
  // Re-keys k in the policy after something else its rank depends on changed (its next use).
  void rank_changed(CacheKey k);
  // An observer to attach to dataset `dataset`'s sampler; owned by the cache.
  SignatureObserver* observer_for(uint32_t dataset);

  // Called with each evicted key, e.g. to free its storage.
  void set_eviction_listener(std::function<void(CacheKey)> listener) { on_evict_ = std::move(listener); }

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t pinned_units() const { return pinned_; }
  size_t items() const { return entries_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint64_t size;
    uint32_t pins = 0;
    uint64_t inserted;
    uint64_t last_access;
  };
  class DatasetObserver : public SignatureObserver {
   public:
    DatasetObserver(Cache& cache, uint32_t dataset) : cache_(cache), dataset_(dataset) {}
    void signature_changed(ItemId x, uint64_t, uint64_t) override {
      cache_.signature_changed(cache_key(dataset_, x));
    }

   private:
    Cache& cache_;
    uint32_t dataset_;
  };

  void add_to_policy(CacheKey k, const Entry& e) { policy_->add({k, e.inserted, e.last_access}); }
  void drop(CacheKey k);

  uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t pinned_ = 0;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unordered_map<CacheKey, Entry> entries_;
  std::function<void(CacheKey)> on_evict_;
  std::vector<std::unique_ptr<DatasetObserver>> observers_;
};

}  // namespace joader
