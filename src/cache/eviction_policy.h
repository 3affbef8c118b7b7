// EvictionPolicy: orders the evictable (cached, unpinned) items of a Cache and names the next
// victim. The Cache tells the policy when an item becomes evictable (add) or stops being so
// (remove); whenever something the order depends on changes (an access, a new signature), the
// Cache removes and re-adds the item, so each policy is a plain ordered set keyed at add() time.
// Every operation is O(log n) in the number of evictable items (the rate policy excepted, see
// its header).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"
#include "sampler/remaining_sets.h"

namespace joader {

// What the Cache knows of an entry, handed to the policy at add().
struct EntryInfo {
  ItemId item;
  uint64_t inserted;     // logical time of insertion
  uint64_t last_access;  // logical time of the last insertion or hit
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void add(const EntryInfo& entry) = 0;
  virtual void remove(ItemId item) = 0;
  // The item to evict next, among those added and not removed; nullopt if none.
  virtual std::optional<ItemId> victim() = 0;
  // True if the order depends on signatures (the Cache then re-adds items whose signature changes).
  virtual bool uses_signatures() const { return false; }
};

// Inputs some policies need besides the entries themselves.
struct PolicyContext {
  const RemainingSets* sets = nullptr;              // refcnt, rate: the jobs' remaining sets
  std::function<double(JobSlot)> job_speed;         // rate: a job's consumption rate (items/time)
  // belady: the next time `item` will be requested after the current moment, or UINT64_MAX if
  // never. Offline knowledge of the future: simulator only.
  std::function<uint64_t(ItemId item)> next_use;
};

// Builds a policy by name: refcnt, lru, fifo, belady, rate. Throws std::invalid_argument on an
// unknown name or on a context that lacks what the policy needs.
std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, const PolicyContext& ctx);

// The policy names make_policy accepts, for help texts.
const std::vector<std::string>& policy_names();

}  // namespace joader
