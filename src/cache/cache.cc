#include "cache/cache.h"

#include <stdexcept>

namespace joader {

Cache::Cache(uint64_t capacity, std::unique_ptr<EvictionPolicy> policy)
    : capacity_(capacity), policy_(std::move(policy)) {}

void Cache::touch(CacheKey k) {
  Entry& e = entries_.at(k);
  e.last_access = ++clock_;
  if (e.pins == 0) {
    policy_->remove(k);
    add_to_policy(k, e);
  }
}

bool Cache::evict_one() {
  const std::optional<CacheKey> victim = policy_->victim();
  if (!victim) return false;
  drop(*victim);
  ++evictions_;
  if (on_evict_) on_evict_(*victim);
  return true;
}

bool Cache::insert(CacheKey k, uint64_t size) {
  if (contains(k)) throw std::logic_error("Cache::insert: item already resident");
  if (size > capacity_) return false;
  ++clock_;
  const Entry& e = entries_[k] = Entry{size, 0, clock_, clock_};
  used_ += size;
  add_to_policy(k, e);
  while (used_ > capacity_ && evict_one()) {
  }
  if (used_ > capacity_) drop(k);  // everything else is pinned: k does not fit now
  return contains(k);
}

bool Cache::make_room(uint64_t size) {
  if (size > capacity_) return false;
  while (used_ + size > capacity_ && evict_one()) {
  }
  return used_ + size <= capacity_;
}

void Cache::pin(CacheKey k) {
  Entry& e = entries_.at(k);
  if (e.pins++ == 0) {
    policy_->remove(k);
    pinned_ += e.size;
  }
}

void Cache::unpin(CacheKey k) {
  Entry& e = entries_.at(k);
  if (e.pins == 0) throw std::logic_error("Cache::unpin: item is not pinned");
  if (--e.pins == 0) {
    pinned_ -= e.size;
    add_to_policy(k, e);
  }
}

uint32_t Cache::pins(CacheKey k) const {
  auto it = entries_.find(k);
  return it == entries_.end() ? 0 : it->second.pins;
}

void Cache::erase(CacheKey k) {
  if (contains(k)) drop(k);
}

void Cache::drop(CacheKey k) {
  auto it = entries_.find(k);
  if (it->second.pins == 0) {
    policy_->remove(k);
  } else {
    pinned_ -= it->second.size;
  }
  used_ -= it->second.size;
  entries_.erase(it);
}

void Cache::signature_changed(CacheKey k) {
  if (policy_->uses_signatures()) rank_changed(k);
}

void Cache::rank_changed(CacheKey k) {
  auto it = entries_.find(k);
  if (it == entries_.end() || it->second.pins != 0) return;
  policy_->remove(k);
  add_to_policy(k, it->second);
}

SignatureObserver* Cache::observer_for(uint32_t dataset) {
  observers_.push_back(std::make_unique<DatasetObserver>(*this, dataset));
  return observers_.back().get();
}

}  // namespace joader
