// The shared-memory arena: one POSIX shared-memory object per daemon, created 0600 (0640 for a
// shared daemon's group), mapped
// read-write by the daemon and read-only by its clients. Prepared items live here; clients read
// them in place through the offsets carried by batch descriptors.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace joader {

class SharedArena {
 public:
  // Creates and maps a new object named "/joader-<uid>-<pid>-<n>" of `size` bytes, 0600, or
  // 0640 owned by `group` when the daemon is shared with one. Throws std::runtime_error (with
  // errno text) on failure.
  explicit SharedArena(uint64_t size, std::optional<gid_t> group = std::nullopt);
  ~SharedArena();  // unmaps and unlinks
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }

  // Unlinks arenas of this user left by daemons that no longer run (their pid is gone).
  // Returns how many were removed.
  static int remove_stale();

 private:
  std::string name_;
  uint64_t size_;
  uint8_t* data_ = nullptr;
};

// A read-only mapping of a daemon's arena, for clients.
class ArenaView {
 public:
  ArenaView(const std::string& name, uint64_t size);
  ~ArenaView();
  ArenaView(const ArenaView&) = delete;
  ArenaView& operator=(const ArenaView&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint64_t size_;
  const uint8_t* data_ = nullptr;
};

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
  // than rounded(n) bytes are free, whatever the fragmentation. The extents' lengths add up to n;
  // free each with free(offset, length).
  std::optional<std::vector<Extent>> allocate_extents(uint64_t n);
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
