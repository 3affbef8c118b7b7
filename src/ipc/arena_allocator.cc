#include "ipc/arena_allocator.h"

#include <iterator>
#include <stdexcept>

namespace joader {

ArenaAllocator::ArenaAllocator(uint64_t size) : free_bytes_(size / kAlign * kAlign) {
  if (free_bytes_ > 0) {
    by_offset_[0] = free_bytes_;
    by_size_.insert({free_bytes_, 0});
  }
}

std::optional<uint64_t> ArenaAllocator::allocate(uint64_t n) {
  n = rounded(n);
  auto it = by_size_.lower_bound({n, 0});
  if (it == by_size_.end()) return std::nullopt;
  const auto [size, offset] = *it;
  by_size_.erase(it);
  by_offset_.erase(offset);
  if (size > n) {
    by_offset_[offset + n] = size - n;
    by_size_.insert({size - n, offset + n});
  }
  free_bytes_ -= n;
  return offset;
}

std::optional<std::vector<Extent>> ArenaAllocator::allocate_extents(uint64_t n, size_t max_blocks) {
  if (rounded(n) > free_bytes_ || max_blocks == 0) return std::nullopt;
  if (const std::optional<uint64_t> whole = allocate(n)) return std::vector<Extent>{{*whole, n}};
  if (max_blocks < by_size_.size()) {  // do the largest max_blocks blocks hold it?
    uint64_t room = 0;
    size_t blocks = 0;
    for (auto it = by_size_.rbegin(); it != by_size_.rend() && blocks < max_blocks; ++it, ++blocks) room += it->first;
    if (room < rounded(n)) return std::nullopt;
  }
  std::vector<Extent> out;
  uint64_t left = n;
  while (left > 0) {  // no block holds the rest: take the largest whole, until one does
    const auto [size, offset] = *by_size_.rbegin();
    if (size >= rounded(left)) {
      out.push_back({*allocate(left), left});
      break;
    }
    out.push_back({*allocate(size), size});
    left -= size;
  }
  return out;
}

void ArenaAllocator::free(uint64_t offset, uint64_t n) {
  n = rounded(n);
  auto next = by_offset_.lower_bound(offset);
  // A block freed twice, or overlapping a free one, would later be handed out twice: two items
  // in the same bytes.
  if ((next != by_offset_.end() && next->first < offset + n) ||
      (next != by_offset_.begin() && std::prev(next)->first + std::prev(next)->second > offset)) {
    throw std::logic_error("ArenaAllocator::free: block [" + std::to_string(offset) + ", +" + std::to_string(n) +
                           ") overlaps a free block");
  }
  free_bytes_ += n;
  if (next != by_offset_.end() && offset + n == next->first) {  // merge with the block after
    n += next->second;
    by_size_.erase({next->second, next->first});
    next = by_offset_.erase(next);
  }
  if (next != by_offset_.begin()) {  // merge with the block before
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      by_size_.erase({prev->second, prev->first});
      offset = prev->first;
      n += prev->second;
      by_offset_.erase(prev);
    }
  }
  by_offset_[offset] = n;
  by_size_.insert({n, offset});
}

}  // namespace joader
