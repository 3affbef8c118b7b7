#include "ipc/arena_reads.h"

#include <algorithm>

namespace joader {

ArenaReads::ArenaReads(uint64_t size, uint8_t copy_reads)
    : pages_((size + kPage - 1) / kPage), copy_reads_(copy_reads) {
  if (copy_reads_ > 0) reads_ = std::make_unique<std::atomic<uint8_t>[]>(pages_);  // zeroed
}

bool ArenaReads::copy(uint64_t offset, uint64_t length) {
  if (copy_reads_ == 0 || length == 0 || offset / kPage >= pages_) return false;
  const uint64_t first = offset / kPage;
  const uint64_t last = std::min((offset + length - 1) / kPage, pages_ - 1);
  bool copied = false;
  for (uint64_t p = first; p <= last; ++p) {
    const uint8_t n = reads_[p].load(std::memory_order_relaxed);
    if (n < copy_reads_) {
      copied = true;
      reads_[p].store(static_cast<uint8_t>(n + 1), std::memory_order_relaxed);
    }
  }
  return copied;
}

}  // namespace joader
