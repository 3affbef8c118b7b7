#include "prep/scratch.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>

#include "common/mutex.h"

namespace joader {
namespace {

uint64_t default_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  return std::max<uint64_t>(uint64_t{1} << 30, physical / 16);
}

struct Budget {
  Mutex mu;
  std::condition_variable room;  // in_use went down
  uint64_t limit JOADER_GUARDED_BY(mu) = default_budget();
  uint64_t in_use JOADER_GUARDED_BY(mu) = 0;
};

// Never destroyed: threads of a process that is exiting may still end their scopes.
Budget& budget() {
  static Budget* b = new Budget;
  return *b;
}

// This thread's open scopes and what it holds of the budget.
thread_local int scope_depth = 0;
thread_local uint64_t held = 0;

}  // namespace

DecodeMemoryScope::DecodeMemoryScope() { ++scope_depth; }

DecodeMemoryScope::~DecodeMemoryScope() {
  if (--scope_depth > 0 || held == 0) return;
  Budget& b = budget();
  {
    MutexLock lk(b.mu);
    b.in_use -= held;
  }
  held = 0;
  b.room.notify_all();
}

void reserve_decode_memory(uint64_t bytes) {
  if (scope_depth == 0 || bytes <= kKeepScratchBytes) return;
  Budget& b = budget();
  MutexLock lk(b.mu);
  const uint64_t want = std::min(bytes, b.limit);
  if (held == 0) {
    while (b.in_use + want > b.limit) b.room.wait(lk.native());
  }
  b.in_use += want;
  held += want;
}

uint64_t decode_memory_budget() {
  MutexLock lk(budget().mu);
  return budget().limit;
}

void set_decode_memory_budget(uint64_t bytes) {
  MutexLock lk(budget().mu);
  budget().limit = bytes;
}

uint64_t decode_memory_in_use() {
  MutexLock lk(budget().mu);
  return budget().in_use;
}

}  // namespace joader
