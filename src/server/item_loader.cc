#include "server/item_loader.h"

#include <algorithm>
#include <chrono>

#include "prep/scratch.h"

namespace joader {

LoadedItem load_item(const Dataset& ds, ItemId item, std::span<uint8_t> block, std::vector<uint8_t>& raw,
                     std::vector<uint8_t>& prepared) {
  LoadedItem out;
  const auto start = std::chrono::steady_clock::now();
  try {
    ds.source->read(item, raw);
    if (ds.prep.raw) {
      prepared.swap(raw);  // stored as read: no copy (raw gets the old buffer, as scratch)
    } else {
      out.shape = block.empty() ? prepare(ds.prep, raw, prepared) : prepare_into(ds.prep, raw, block);
    }
  } catch (const SourceError& e) {
    out.error = e.names_item() ? e.what() : ds.item_error(item, e.what());
  } catch (const std::exception& e) {  // PrepError: a file that does not decode
    out.error = ds.item_error(item, e.what());
  }
  release_if_large(raw);  // a very large file's bytes do not stay with the loader thread
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void LoadHistogram::add(double seconds) {
  sum_ += seconds;
  ++counts_[std::lower_bound(std::begin(kBounds), std::end(kBounds), seconds) - std::begin(kBounds)];
}

void LoadHistogram::write(v1::LoadHistogram* out) const {
  uint64_t total = 0;
  for (double b : kBounds) out->add_bounds(b);
  for (uint64_t c : counts_) {
    out->add_counts(c);
    total += c;
  }
  out->set_sum(sum_);
  out->set_count(total);
}

}  // namespace joader
