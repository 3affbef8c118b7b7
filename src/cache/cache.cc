#include "cache/cache.h"

#include <stdexcept>

namespace joader {

Cache::Cache(uint64_t capacity, std::unique_ptr<EvictionPolicy> policy)
    : capacity_(capacity), policy_(std::move(policy)) {}

void Cache::touch(ItemId x) {
  Entry& e = entries_.at(x);
  e.last_access = ++clock_;
  if (e.pins == 0) {
    policy_->remove(x);
    add_to_policy(x, e);
  }
}

bool Cache::insert(ItemId x, uint64_t size) {
  if (contains(x)) throw std::logic_error("Cache::insert: item already resident");
  if (size > capacity_) return false;
  ++clock_;
  const Entry& e = entries_[x] = Entry{size, 0, clock_, clock_};
  used_ += size;
  add_to_policy(x, e);
  while (used_ > capacity_) {
    const std::optional<ItemId> victim = policy_->victim();
    if (!victim) break;
    drop(*victim);
    ++evictions_;
    if (on_evict_) on_evict_(*victim);
  }
  if (used_ > capacity_) drop(x);  // everything else is pinned: x does not fit now
  return contains(x);
}

void Cache::pin(ItemId x) {
  Entry& e = entries_.at(x);
  if (e.pins++ == 0) policy_->remove(x);
}

void Cache::unpin(ItemId x) {
  Entry& e = entries_.at(x);
  if (e.pins == 0) throw std::logic_error("Cache::unpin: item is not pinned");
  if (--e.pins == 0) add_to_policy(x, e);
}

void Cache::erase(ItemId x) {
  if (contains(x)) drop(x);
}

void Cache::drop(ItemId x) {
  auto it = entries_.find(x);
  if (it->second.pins == 0) policy_->remove(x);
  used_ -= it->second.size;
  entries_.erase(it);
}

void Cache::signature_changed(ItemId x, uint64_t, uint64_t) {
  if (!policy_->uses_signatures()) return;
  auto it = entries_.find(x);
  if (it == entries_.end() || it->second.pins != 0) return;
  policy_->remove(x);
  add_to_policy(x, it->second);
}

}  // namespace joader
