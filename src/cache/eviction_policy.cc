#include "cache/eviction_policy.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace joader {
namespace {

// A policy whose order is a key computed once when the item is added: the smallest key is the
// victim. Keys end with the item id, so they are unique and ties are deterministic.
template <typename KeyFn>
class KeyedPolicy : public EvictionPolicy {
 public:
  using Key = std::tuple<uint64_t, uint64_t, CacheKey>;

  KeyedPolicy(KeyFn key, bool uses_signatures) : key_(std::move(key)), uses_sigs_(uses_signatures) {}

  void add(const EntryInfo& e) override {
    const Key k = key_(e);
    keys_[e.key] = k;
    order_.insert(k);
  }
  void remove(CacheKey key) override {
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    order_.erase(it->second);
    keys_.erase(it);
  }
  std::optional<CacheKey> victim() override {
    if (order_.empty()) return std::nullopt;
    return std::get<2>(*order_.begin());
  }
  bool uses_signatures() const override { return uses_sigs_; }

 private:
  KeyFn key_;
  bool uses_sigs_;
  std::set<Key> order_;
  std::unordered_map<CacheKey, Key> keys_;
};

template <typename KeyFn>
std::unique_ptr<EvictionPolicy> keyed(KeyFn key, bool uses_signatures = false) {
  return std::make_unique<KeyedPolicy<KeyFn>>(std::move(key), uses_signatures);
}

// Expected request rate: an item x pending for job j is requested at rate speed_j / |R_j| (j
// draws uniformly from R_j at speed_j), so the item's rate is the sum over the jobs in sig[x].
// All items of one dataset with one signature share a rate, so evictable items are grouped by
// (dataset, signature), LRU inside a group, and a victim is the LRU item of the group with the
// lowest rate. A victim costs O(G·k) for G distinct groups among evictable items
// (G ≤ min(2^k, cache items)): fine for a handful of jobs, which is where it is compared.
class RatePolicy : public EvictionPolicy {
 public:
  explicit RatePolicy(const PolicyContext& ctx) : signature_(ctx.signature), rate_(ctx.request_rate) {}

  void add(const EntryInfo& e) override {
    const Group g{key_dataset(e.key), signature_(e.key)};
    where_[e.key] = {g, e.last_access};
    groups_[g].insert({e.last_access, e.key});
  }
  void remove(CacheKey key) override {
    auto it = where_.find(key);
    if (it == where_.end()) return;
    auto g = groups_.find(it->second.first);
    g->second.erase({it->second.second, key});
    if (g->second.empty()) groups_.erase(g);
    where_.erase(it);
  }
  std::optional<CacheKey> victim() override {
    const std::pair<uint64_t, CacheKey>* best = nullptr;
    double best_rate = std::numeric_limits<double>::infinity();
    for (const auto& [group, members] : groups_) {
      const double rate = rate_(group.first, group.second);
      const auto& head = *members.begin();
      if (best == nullptr || rate < best_rate || (rate == best_rate && head < *best)) {
        best_rate = rate;
        best = &head;
      }
    }
    if (best == nullptr) return std::nullopt;
    return best->second;
  }
  bool uses_signatures() const override { return true; }

 private:
  using Group = std::pair<uint32_t, uint64_t>;  // (dataset, signature)
  std::function<uint64_t(CacheKey)> signature_;
  std::function<double(uint32_t, uint64_t)> rate_;
  std::unordered_map<CacheKey, std::pair<Group, uint64_t>> where_;  // key -> (group, last access)
  std::map<Group, std::set<std::pair<uint64_t, CacheKey>>> groups_;
};

// The tie-break among items of equal rank: those that reload cheaply (PolicyContext) first, then
// the least recently used. Logical times stay far below 2^63.
std::function<uint64_t(const EntryInfo&)> cheap_first(const PolicyContext& ctx) {
  static constexpr uint64_t kDear = uint64_t{1} << 63;
  if (!ctx.reloads_cheaply) return [](const EntryInfo& e) { return e.last_access; };
  return [cheap = ctx.reloads_cheaply](const EntryInfo& e) { return (cheap(e.key) ? 0 : kDear) | e.last_access; };
}

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"refcnt", "lru", "fifo", "belady", "rate", "planned"};
  return names;
}

std::vector<std::string> daemon_policy_names() {
  std::vector<std::string> names = policy_names();
  std::erase(names, "belady");
  return names;
}

std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, const PolicyContext& ctx) {
  if (name == "lru") {
    return keyed([](const EntryInfo& e) { return std::tuple{e.last_access, uint64_t{0}, e.key}; });
  }
  if (name == "fifo") {
    return keyed([](const EntryInfo& e) { return std::tuple{e.inserted, uint64_t{0}, e.key}; });
  }
  if (name == "refcnt") {
    if (!ctx.signature) throw std::invalid_argument("refcnt needs the items' signatures");
    auto signature = ctx.signature;
    return keyed(
        [signature, tie = cheap_first(ctx)](const EntryInfo& e) {
          return std::tuple{uint64_t(std::popcount(signature(e.key))), tie(e), e.key};
        },
        /*uses_signatures=*/true);
  }
  if (name == "belady") {
    if (!ctx.next_use) throw std::invalid_argument("belady needs the future trace (simulator only)");
    auto next_use = ctx.next_use;
    return keyed([next_use](const EntryInfo& e) {
      return std::tuple{std::numeric_limits<uint64_t>::max() - next_use(e.key), uint64_t{0}, e.key};
    });
  }
  if (name == "planned") {
    if (!ctx.signature || !ctx.next_use) {
      throw std::invalid_argument("planned needs the items' signatures and the jobs' plans");
    }
    auto signature = ctx.signature;
    auto next_use = ctx.next_use;
    // Items no plan needs go first, fewest future references first (RefCnt's order): they are
    // needed, if at all, after every plan's end. Then the planned ones, the one needed last first.
    // Due times stay far below 2^62 (microseconds: 146 000 years), so the two ranges never meet.
    static constexpr uint64_t kLatest = uint64_t{1} << 62;
    return keyed(
        [signature, next_use, tie = cheap_first(ctx)](const EntryInfo& e) {
          const uint64_t due = next_use(e.key);
          const uint64_t rank = due == std::numeric_limits<uint64_t>::max()
                                    ? uint64_t(std::popcount(signature(e.key)))
                                    : 65 + (kLatest - std::min(due, kLatest));
          return std::tuple{rank, tie(e), e.key};
        },
        /*uses_signatures=*/true);
  }
  if (name == "rate") {
    if (!ctx.signature || !ctx.request_rate) {
      throw std::invalid_argument("rate needs the items' signatures and the jobs' request rates");
    }
    return std::make_unique<RatePolicy>(ctx);
  }
  throw std::invalid_argument("unknown cache policy '" + name +
                              "' (expected refcnt, lru, fifo, belady, rate or planned)");
}

}  // namespace joader
