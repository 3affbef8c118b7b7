// ItemStore: the daemon's cached items in one place — which items are resident and in what order
// they go (the Cache and its eviction policy), where their bytes lie in the shared-memory arena
// (the ArenaAllocator's blocks), and which are pinned.
//
// Invariants, after every public call: an item is resident exactly when it holds arena blocks;
// the allocator's free bytes are capacity() − used(); pinned_bytes() ≤ used(); blocks() is the
// number of blocks resident items hold. An item leaves one way, whatever the reason (evicted by
// the policy to make room, discarded after a failed load, its dataset removed): its cache entry
// and its blocks go together.
//
// Placement: an item of n bytes takes rounded(n) bytes (ArenaAllocator::kAlign). Once as many bytes
// are free, it goes in one block: the smallest free one that holds it, or, when none does and the
// store was made with extra_evictions > 0, the first that evicting up to that many more items in
// the policy's order frees, within kExtraBytesPerItemBytes times the item's bytes (evictions that
// free no block, e.g. between pinned items, are hits lost). Only then is it split, into at most
// kMaxBlocksPerItem blocks while any other item can be evicted: when that many do not hold it, the
// store evicts more in the policy's order, and splits an item further only when every other item is
// pinned. Without the bound, a full arena shared by items of different sizes fragments without end
// (the soak measured blocks per cached item rising all run: docs/BENCHMARKS.md, "What the heap
// creep was: arena fragmentation"). Without the extra evictions, a full arena of photos of many
// sizes splits most items that it takes in (a tier's read-back epochs), and a split item costs its
// job a gather from several blocks; with them, in an arena that many jobs share, the evicted items
// cost more loads than that (docs/BENCHMARKS.md, "Whole blocks"): the daemon makes its store
// without them (ServingOptions::extra_evictions).
//
// Not thread-safe: the owner serialises calls (the Engine holds its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/cache.h"
#include "ipc/arena_allocator.h"

namespace joader {

// Where a resident item's bytes are, and what they hold.
struct Placement {
  std::vector<Extent> extents;     // in order; usually one block
  uint64_t length = 0;             // data bytes (the blocks hold rounded lengths)
  uint32_t width = 0, height = 0;  // the stored image's size (decoded forms)
};

class ItemStore {
 public:
  static constexpr size_t kMaxBlocksPerItem = 4;
  static constexpr size_t kExtraEvictions = 8;
  static constexpr uint64_t kExtraBytesPerItemBytes = 4;

  // `arena_bytes`: the arena's size (the usable capacity is that, rounded down to kAlign).
  // `extra_evictions`: the evictions a placement may add to free one block for an item (see
  // "Placement"; the daemon passes 0).
  ItemStore(uint64_t arena_bytes, std::unique_ptr<EvictionPolicy> policy, size_t extra_evictions = kExtraEvictions);
  ItemStore(const ItemStore&) = delete;
  ItemStore& operator=(const ItemStore&) = delete;

  bool contains(CacheKey k) const { return placements_.count(k) != 0; }
  // A resident item's placement. The reference stays valid while the item is pinned.
  const Placement& at(CacheKey k) const { return placements_.at(k); }

  // Makes k resident and pinned (so that nobody evicts it while its bytes are written), in blocks
  // for `length` bytes, evicting unpinned items as the placement rule above says. nullptr when
  // fewer bytes than rounded(length) can be freed (everything else is pinned): k is not placed
  // then, and the unpinned items evicted on the way stay evicted.
  const Placement* place(CacheKey k, uint64_t length, uint32_t width = 0, uint32_t height = 0);
  // The same without evicting anything: nullptr unless the bytes are free now.
  const Placement* place_if_free(CacheKey k, uint64_t length, uint32_t width = 0, uint32_t height = 0);

  void touch(CacheKey k) { cache_.touch(k); }  // a hit, for the policy's order
  void pin(CacheKey k) { cache_.pin(k); }
  void unpin(CacheKey k) { cache_.unpin(k); }
  uint32_t pins(CacheKey k) const { return cache_.pins(k); }
  // Drops a resident item, pinned or not, and frees its blocks. No-op if k is not resident.
  void discard(CacheKey k);
  // Drops the unpinned items of a dataset (pinned ones stay until evicted).
  void discard_unpinned(uint32_t dataset);

  // Re-ranks k in the policy after its next use changed (a plan's NextUses listener).
  void rank_changed(CacheKey k) { cache_.rank_changed(k); }
  // An observer for dataset `dataset`'s sampler (signature changes re-key the policy).
  SignatureObserver* observer_for(uint32_t dataset) { return cache_.observer_for(dataset); }

  uint64_t capacity() const { return cache_.capacity(); }
  uint64_t used() const { return cache_.used(); }
  uint64_t pinned_bytes() const { return cache_.pinned_units(); }
  uint64_t items() const { return placements_.size(); }
  uint64_t blocks() const { return blocks_; }
  uint64_t evictions() const { return cache_.evictions(); }
  uint64_t split_items() const { return split_items_; }  // items ever placed in more than one block

  // Checks the invariants above; returns what is broken, or "" when they hold. O(1).
  std::string broken_invariant() const;

 private:
  const Placement* admit(CacheKey k, std::vector<Extent> extents, uint64_t length, uint32_t width, uint32_t height);
  void free_blocks(CacheKey k);  // the one way an item's blocks are freed

  ArenaAllocator allocator_;
  Cache cache_;
  const size_t extra_evictions_;
  std::unordered_map<CacheKey, Placement> placements_;
  uint64_t blocks_ = 0;
  uint64_t split_items_ = 0;
};

}  // namespace joader
