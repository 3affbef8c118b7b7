#include "cache/eviction_policy.h"

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
  using Key = std::tuple<uint64_t, uint64_t, ItemId>;

  KeyedPolicy(KeyFn key, bool uses_signatures) : key_(std::move(key)), uses_sigs_(uses_signatures) {}

  void add(const EntryInfo& e) override {
    const Key k = key_(e);
    keys_[e.item] = k;
    order_.insert(k);
  }
  void remove(ItemId item) override {
    auto it = keys_.find(item);
    if (it == keys_.end()) return;
    order_.erase(it->second);
    keys_.erase(it);
  }
  std::optional<ItemId> victim() override {
    if (order_.empty()) return std::nullopt;
    return std::get<2>(*order_.begin());
  }
  bool uses_signatures() const override { return uses_sigs_; }

 private:
  KeyFn key_;
  bool uses_sigs_;
  std::set<Key> order_;
  std::unordered_map<ItemId, Key> keys_;
};

template <typename KeyFn>
std::unique_ptr<EvictionPolicy> keyed(KeyFn key, bool uses_signatures = false) {
  return std::make_unique<KeyedPolicy<KeyFn>>(std::move(key), uses_signatures);
}

// Expected request rate: an item x pending for job j is requested at rate speed_j / |R_j| (j
// draws uniformly from R_j at speed_j), so the item's rate is the sum over the jobs in sig[x].
// All items with one signature share a rate, so evictable items are grouped by signature (LRU
// inside a group) and a victim is the LRU item of the group with the lowest rate. A victim costs
// O(G·k) for G distinct signatures among evictable items (G ≤ min(2^k, cache items)): fine for a
// handful of jobs, which is where it is compared in the simulator.
class RatePolicy : public EvictionPolicy {
 public:
  explicit RatePolicy(const PolicyContext& ctx) : sets_(*ctx.sets), speed_(ctx.job_speed) {}

  void add(const EntryInfo& e) override {
    const uint64_t sig = sets_.signature(e.item);
    where_[e.item] = {sig, e.last_access};
    groups_[sig].insert({e.last_access, e.item});
  }
  void remove(ItemId item) override {
    auto it = where_.find(item);
    if (it == where_.end()) return;
    auto g = groups_.find(it->second.first);
    g->second.erase({it->second.second, item});
    if (g->second.empty()) groups_.erase(g);
    where_.erase(it);
  }
  std::optional<ItemId> victim() override {
    const std::pair<uint64_t, ItemId>* best = nullptr;
    double best_rate = std::numeric_limits<double>::infinity();
    for (const auto& [sig, members] : groups_) {
      double rate = 0;
      for (uint64_t rest = sig; rest != 0; rest &= rest - 1) {
        const JobSlot j = std::countr_zero(rest);
        rate += speed_(j) / static_cast<double>(sets_.size(j));
      }
      const auto& head = *members.begin();
      if (rate < best_rate || (rate == best_rate && head < *best)) {
        best_rate = rate;
        best = &head;
      }
    }
    if (best == nullptr) return std::nullopt;
    return best->second;
  }
  bool uses_signatures() const override { return true; }

 private:
  const RemainingSets& sets_;
  std::function<double(JobSlot)> speed_;
  std::unordered_map<ItemId, std::pair<uint64_t, uint64_t>> where_;  // item -> (sig, last access)
  std::map<uint64_t, std::set<std::pair<uint64_t, ItemId>>> groups_;
};

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"refcnt", "lru", "fifo", "belady", "rate"};
  return names;
}

std::unique_ptr<EvictionPolicy> make_policy(const std::string& name, const PolicyContext& ctx) {
  if (name == "lru") {
    return keyed([](const EntryInfo& e) { return std::tuple{e.last_access, uint64_t{0}, e.item}; });
  }
  if (name == "fifo") {
    return keyed([](const EntryInfo& e) { return std::tuple{e.inserted, uint64_t{0}, e.item}; });
  }
  if (name == "refcnt") {
    if (ctx.sets == nullptr) throw std::invalid_argument("refcnt needs the jobs' remaining sets");
    const RemainingSets* sets = ctx.sets;
    return keyed(
        [sets](const EntryInfo& e) {
          return std::tuple{uint64_t(std::popcount(sets->signature(e.item))), e.last_access, e.item};
        },
        /*uses_signatures=*/true);
  }
  if (name == "belady") {
    if (!ctx.next_use) throw std::invalid_argument("belady needs the future trace (simulator only)");
    auto next_use = ctx.next_use;
    return keyed([next_use](const EntryInfo& e) {
      return std::tuple{std::numeric_limits<uint64_t>::max() - next_use(e.item), uint64_t{0}, e.item};
    });
  }
  if (name == "rate") {
    if (ctx.sets == nullptr || !ctx.job_speed) {
      throw std::invalid_argument("rate needs the jobs' remaining sets and speeds");
    }
    return std::make_unique<RatePolicy>(ctx);
  }
  throw std::invalid_argument("unknown cache policy '" + name +
                              "' (expected refcnt, lru, fifo, belady or rate)");
}

}  // namespace joader
