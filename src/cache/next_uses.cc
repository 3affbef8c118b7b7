#include "cache/next_uses.h"

#include <algorithm>
#include <stdexcept>

namespace joader {

void NextUses::add(CacheKey k, uint64_t due) {
  const uint64_t before = next_use(k);
  dues_[k].push_back(due);
  ++planned_;
  if (due < before && on_change_) on_change_(k);
}

void NextUses::remove(CacheKey k, uint64_t due) {
  auto it = dues_.find(k);
  if (it == dues_.end()) throw std::logic_error("NextUses::remove: no planned use of the item");
  std::vector<uint64_t>& dues = it->second;
  auto d = std::find(dues.begin(), dues.end(), due);
  if (d == dues.end()) throw std::logic_error("NextUses::remove: no planned use at that time");
  const uint64_t before = *std::min_element(dues.begin(), dues.end());
  *d = dues.back();
  dues.pop_back();
  --planned_;
  if (dues.empty()) dues_.erase(it);
  if (next_use(k) != before && on_change_) on_change_(k);
}

uint64_t NextUses::next_use(CacheKey k) const {
  auto it = dues_.find(k);
  if (it == dues_.end()) return kNever;
  return *std::min_element(it->second.begin(), it->second.end());
}

}  // namespace joader
