// JobQueue: one job's decided, unconsumed items, in decision order — first its window, then its
// plan — and their state machine; the daemon's engine and the simulator both keep their jobs'
// queues in it, so that `joader simulate` answers for the daemon's queues as well as its pacing.
//
//   decide ──room──▶ window: kLoading ──▶ kReady (pinned) or kFailed ──take──▶ consumed
//      │                 ▲        │
//      └──no room──▶ plan: kPlanned (NextUses holds its due time)
//                     promote ┘  └ demote (the window shrank)
//
// The window is a prefix of the queue: the entries accessed (loaded or loading, hit, or failed
// under on_error skip); the plan is the rest, ids only, each recorded in NextUses with the time its
// job should consume it (policy `planned` evicts by it; dispatch/dispatcher.h, "Plan"). A decision
// enters the window only when the plan is empty, so the plan's entries enter it in order.
//
// The queue does the NextUses bookkeeping of every transition. It does not hold the store: the
// caller starts each entry the queue hands it (a hit it pins, a load it joins or starts; the
// caller sets `pinned` when it pins), and unpins the keys the queue returns when entries leave the
// window (demote), are consumed (take) or dropped (clear). When to promote and where to demote
// from are the caller's (the daemon counts its sent, unacknowledged batches against the window,
// the simulator has none).
//
// A job that leaves clears its queue (its plan leaves NextUses). Entry is the caller's struct, derived from QueueEntry (the daemon's carries the label and the
// item's place in the arena, the simulator's when its load ends). Not thread-safe; pointers to
// entries stay valid until they are taken or cleared (a deque, appended and popped at the ends).
#pragma once

#include <cassert>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "cache/eviction_policy.h"
#include "cache/next_uses.h"
#include "sampler/sampler.h"

namespace joader {

struct QueueEntry {
  ItemId item = 0;
  uint32_t epoch = 0;  // the job's epoch it belongs to
  enum State { kPlanned, kLoading, kReady, kFailed } state = kLoading;
  bool pinned = false;  // the caller holds a pin on the item for it (set by the caller)
  uint64_t due = 0;     // kPlanned: when its job should consume it (NextUses' unit)
};

template <class Entry>
class JobQueue {
 public:
  // Entries' items are `dataset`'s (their NextUses keys cache_key(dataset, item)).
  JobQueue(uint32_t dataset, NextUses& next_uses) : dataset_(dataset), next_uses_(&next_uses) {}
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  CacheKey key(const Entry& e) const { return cache_key(dataset_, e.item); }

  // A decided item. With `room` (the caller's window has a place) and an empty plan it enters the
  // window: returned (kLoading) for the caller to start. Otherwise it joins the plan, due at `due`:
  // nullptr.
  Entry* decide(Entry e, bool room, uint64_t due) {
    if (room && planned_ == 0) {
      e.state = QueueEntry::kLoading;
      entries_.push_back(std::move(e));
      return &entries_.back();
    }
    e.state = QueueEntry::kPlanned;
    e.due = due;
    e.pinned = false;
    entries_.push_back(std::move(e));
    ++planned_;
    next_uses_->add(key(entries_.back()), due);
    return nullptr;
  }

  // The plan's first entry enters the window (kLoading): returned for the caller to start.
  // Requires planned() > 0.
  Entry& promote() {
    assert(planned_ > 0);
    Entry& e = entries_[entries_.size() - planned_];
    --planned_;
    next_uses_->remove(key(e), e.due);
    e.state = QueueEntry::kLoading;
    return e;
  }

  // What entries leaving the window hand back to the caller.
  struct Left {
    std::vector<CacheKey> unpin;     // pinned entries' keys: unpin each once
    std::vector<Entry*> loading;     // entries that were waiting on loads: forget them there
  };

  // The window's entries from position `first` on join the plan again (still decided), due at
  // `due`; kFailed entries cannot (the caller keeps them inside). Requires first ≤ window_size().
  Left demote(size_t first, uint64_t due) {
    Left left;
    const size_t end = window_size();
    assert(first <= end);
    for (size_t i = first; i < end; ++i) {
      Entry& e = entries_[i];
      assert(e.state != QueueEntry::kFailed);
      if (e.pinned) left.unpin.push_back(key(e));
      if (e.state == QueueEntry::kLoading) left.loading.push_back(&e);
      e.state = QueueEntry::kPlanned;
      e.pinned = false;
      e.due = due;
      next_uses_->add(key(e), due);
    }
    planned_ += end - first;
    return left;
  }

  // Consumes the first n entries (all in the window), oldest first; the caller unpins the pinned
  // ones when the consumer is done with them.
  std::vector<Entry> take(size_t n) {
    assert(n <= window_size());
    std::vector<Entry> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      out.push_back(std::move(entries_.front()));
      entries_.pop_front();
    }
    return out;
  }

  // Drops every entry (the job leaves): the plan leaves NextUses; returns the pinned entries' keys.
  // The caller forgets the loading entries first (pointers to them die here).
  std::vector<CacheKey> clear() {
    std::vector<CacheKey> unpin;
    for (const Entry& e : entries_) {
      if (e.state == QueueEntry::kPlanned) next_uses_->remove(key(e), e.due);
      if (e.pinned) unpin.push_back(key(e));
    }
    entries_.clear();
    planned_ = 0;
    return unpin;
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  size_t planned() const { return planned_; }
  size_t window_size() const { return entries_.size() - planned_; }
  Entry& operator[](size_t i) { return entries_[i]; }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  Entry& back() { return entries_.back(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  uint32_t dataset_;
  NextUses* next_uses_;
  std::deque<Entry> entries_;
  size_t planned_ = 0;  // its last entries, kPlanned
};

}  // namespace joader
