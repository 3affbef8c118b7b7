#include "server/item_loader.h"

#include <algorithm>
#include <chrono>

#include "prep/scratch.h"

namespace joader {

namespace {

// The item from the disk tier into the block (or `prepared`), if it holds it whole and intact.
bool read_back(PreparedStore& disk, uint64_t ns, ItemId item, std::span<uint8_t> block, uint64_t expected_length,
               std::vector<uint8_t>& prepared, LoadedItem& out) {
  const std::optional<PreparedStore::Entry> entry = disk.find(ns, item);
  if (!entry) return false;
  if (!block.empty()) expected_length = block.size();
  if (entry->length != uint64_t{entry->shape.width} * entry->shape.height * 3 ||
      (expected_length != 0 && entry->length != expected_length)) {
    disk.forget(ns, item);  // not what this item's arena bytes must be: prepared and kept again
    return false;
  }
  if (block.empty()) prepared.resize(entry->length);
  if (!disk.read(ns, item, block.empty() ? std::span<uint8_t>(prepared) : block)) return false;
  out.shape = {entry->shape.width, entry->shape.height};
  out.from_disk = true;
  return true;
}

}  // namespace

LoadedItem load_item(const Dataset& ds, ItemId item, std::span<uint8_t> block, std::vector<uint8_t>& raw,
                     std::vector<uint8_t>& prepared, PreparedStore* disk, uint64_t expected_length) {
  LoadedItem out;
  const auto start = std::chrono::steady_clock::now();
  if (disk && ds.disk_namespace &&
      read_back(*disk, *ds.disk_namespace, item, block, expected_length, prepared, out)) {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
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
  if (disk && ds.disk_namespace && out.error.empty()) {
    const std::span<const uint8_t> bytes = block.empty() ? std::span<const uint8_t>(prepared) : block;
    disk->offer(*ds.disk_namespace, item, {out.shape.width, out.shape.height}, bytes);
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
