// ArenaAllocator: where items go inside the daemon's shared-memory arena (src/ipc/shared_arena.h).
// Only the daemon allocates; clients read the offsets that batch descriptors carry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace joader {

// Bytes of an item in the arena: `length` data bytes at `offset` (its block is rounded(length)).
struct Extent {
  uint64_t offset = 0, length = 0;
  bool operator==(const Extent&) const = default;
};

// Offsets inside the arena: best fit over free blocks, coalescing on free; O(log n) per call.
// Blocks are multiples of kAlign bytes, so equal-size items (decode + crop) never fragment; items
// of different sizes may, and then allocate_extents() places an item in several blocks.
class ArenaAllocator {
 public:
  static constexpr uint64_t kAlign = 64;
  explicit ArenaAllocator(uint64_t size);

  static uint64_t rounded(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  // An offset for rounded(n) bytes, or nullopt if no free block is large enough.
  std::optional<uint64_t> allocate(uint64_t n);
  // n data bytes in one block when a free block is large enough (best fit), else in the largest
  // free blocks in turn, the last one split: fails (nullopt, nothing allocated) only when fewer
  // than rounded(n) bytes are free, whatever the fragmentation — or when it would take more than
  // max_blocks blocks. The extents' lengths add up to n; free each with free(offset, length).
  std::optional<std::vector<Extent>> allocate_extents(uint64_t n, size_t max_blocks = SIZE_MAX);
  // Returns a block; throws std::logic_error if it overlaps a free block (freed twice).
  void free(uint64_t offset, uint64_t n);
  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t largest_free_block() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

 private:
  std::map<uint64_t, uint64_t> by_offset_;             // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> by_size_;    // (size, offset)
  uint64_t free_bytes_;
};

}  // namespace joader
