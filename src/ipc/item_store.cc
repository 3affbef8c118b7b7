#include "ipc/item_store.h"

#include <algorithm>
#include <optional>

namespace joader {

ItemStore::ItemStore(uint64_t arena_bytes, std::unique_ptr<EvictionPolicy> policy, size_t extra_evictions)
    : allocator_(arena_bytes), cache_(allocator_.free_bytes(), std::move(policy)), extra_evictions_(extra_evictions) {
  cache_.set_eviction_listener([this](CacheKey k) { free_blocks(k); });
}

const Placement* ItemStore::place(CacheKey k, uint64_t length, uint32_t width, uint32_t height) {
  const uint64_t units = std::max<uint64_t>(length, 1);  // an empty item still takes one block
  if (!cache_.make_room(ArenaAllocator::rounded(units))) return nullptr;
  // Whole, if a few more evictions free a block for it (the header's "Placement").
  const uint64_t used = cache_.used();
  for (size_t extra = 0;; ++extra) {
    if (const std::optional<uint64_t> whole = allocator_.allocate(units)) {
      return admit(k, {{*whole, units}}, length, width, height);
    }
    if (extra == extra_evictions_ || used - cache_.used() >= kExtraBytesPerItemBytes * ArenaAllocator::rounded(units) ||
        !cache_.evict_one()) {
      break;
    }
  }
  for (;;) {
    if (auto extents = allocator_.allocate_extents(units, kMaxBlocksPerItem)) {
      return admit(k, std::move(*extents), length, width, height);
    }
    if (!cache_.evict_one()) {  // every other item is pinned: split it as far as it takes
      return admit(k, std::move(*allocator_.allocate_extents(units)), length, width, height);
    }
  }
}

const Placement* ItemStore::place_if_free(CacheKey k, uint64_t length, uint32_t width, uint32_t height) {
  const uint64_t units = std::max<uint64_t>(length, 1);
  if (used() + ArenaAllocator::rounded(units) > capacity()) return nullptr;
  auto extents = allocator_.allocate_extents(units, kMaxBlocksPerItem);
  if (!extents) return nullptr;
  return admit(k, std::move(*extents), length, width, height);
}

const Placement* ItemStore::admit(CacheKey k, std::vector<Extent> extents, uint64_t length, uint32_t width,
                                  uint32_t height) {
  if (extents.size() > 1) ++split_items_;
  blocks_ += extents.size();
  const Placement& p = placements_[k] = Placement{std::move(extents), length, width, height};
  // The bytes were just allocated, so the cache has room: inserting evicts nothing.
  cache_.insert(k, ArenaAllocator::rounded(std::max<uint64_t>(length, 1)));
  cache_.pin(k);
  return &p;
}

void ItemStore::discard(CacheKey k) {
  if (!contains(k)) return;
  cache_.erase(k);
  free_blocks(k);
}

void ItemStore::discard_unpinned(uint32_t dataset) {
  std::vector<CacheKey> keys;
  for (const auto& [k, p] : placements_) {
    if (key_dataset(k) == dataset && cache_.pins(k) == 0) keys.push_back(k);
  }
  for (CacheKey k : keys) discard(k);
}

void ItemStore::free_blocks(CacheKey k) {
  auto it = placements_.find(k);
  for (const Extent& e : it->second.extents) allocator_.free(e.offset, e.length);
  blocks_ -= it->second.extents.size();
  placements_.erase(it);
}

std::string ItemStore::broken_invariant() const {
  if (allocator_.free_bytes() + cache_.used() != cache_.capacity()) {
    return "arena free bytes " + std::to_string(allocator_.free_bytes()) + " + cached bytes " +
           std::to_string(cache_.used()) + " != capacity " + std::to_string(cache_.capacity());
  }
  if (placements_.size() != cache_.items()) {
    return std::to_string(placements_.size()) + " arena entries for " + std::to_string(cache_.items()) +
           " cached items";
  }
  if (cache_.pinned_units() > cache_.used()) return "more bytes pinned than cached";
  return "";
}

}  // namespace joader
