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

namespace joader {

// A cached item across datasets: the dataset's index in the high 32 bits, the item id in the low.
using CacheKey = uint64_t;
inline constexpr CacheKey cache_key(uint32_t dataset, ItemId item) { return (CacheKey{dataset} << 32) | item; }
inline constexpr uint32_t key_dataset(CacheKey k) { return static_cast<uint32_t>(k >> 32); }
inline constexpr ItemId key_item(CacheKey k) { return static_cast<ItemId>(k); }

// What the Cache knows of an entry, handed to the policy at add().
struct EntryInfo {
  CacheKey key;
  uint64_t inserted;     // logical time of insertion
  uint64_t last_access;  // logical time of the last insertion or hit
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void add(const EntryInfo& entry) = 0;
  virtual void remove(CacheKey key) = 0;
  // The item to evict next, among those added and not removed; nullopt if none.
  virtual std::optional<CacheKey> victim() = 0;
  // True if the order depends on signatures (the Cache then re-adds items whose signature changes).
  virtual bool uses_signatures() const { return false; }
};

// Inputs some policies need besides the entries themselves.
struct PolicyContext {
  // refcnt, rate: the item's signature in its dataset's sampler (bit j: job j still needs it).
  std::function<uint64_t(CacheKey)> signature;
  // rate: expected request rate of an item of `dataset` with signature `sig`,
  // Σ_{j ∈ sig} speed_j / |R_j| (see docs/SAMPLER.md).
  std::function<double(uint32_t dataset, uint64_t sig)> request_rate;
  // belady: the next time `key` will be requested after the current moment, or UINT64_MAX if
  // never (offline knowledge of the future: simulator only). planned: the earliest due time of
  // the key in the jobs' plans (cache/next_uses.h), UINT64_MAX if no plan holds it.
  std::function<uint64_t(CacheKey)> next_use;
  // refcnt, planned (optional): whether reloading the item is cheap — the disk tier holds its
  // prepared bytes, so a load reads them back instead of decoding. Among items of equal rank
  // (RefCnt's count, or planned's class and due time) the cheap ones go first, least recently
  // used first among them; the rank itself keeps its order. Asked when the item becomes
  // evictable or its rank changes: an item written to the tier later keeps its place until then.
  std::function<bool(CacheKey)> reloads_cheaply;
};

// Builds a policy by name: refcnt, lru, fifo, belady, rate, planned. Throws std::invalid_argument on an
// unknown name or on a context that lacks what the policy needs.
std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, const PolicyContext& ctx);

// The policy names make_policy accepts, for help texts.
const std::vector<std::string>& policy_names();
// The daemon's: all but belady, which needs the future (the simulator's trace).
std::vector<std::string> daemon_policy_names();

}  // namespace joader
