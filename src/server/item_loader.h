// Loading one item: what a loader thread does without the Engine's lock — read the item from its
// dataset's source and prepare it (decode, resize, crop), straight into the arena block claimed
// for it when there is one, else into a buffer (raw items, which are moved there as read; images
// whose size was not known beforehand; an item split between several blocks). And the histogram
// of the time each load takes.
#pragma once

#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "disk/prepared_store.h"
#include "joader.pb.h"
#include "prep/image_prep.h"
#include "server/catalog.h"

namespace joader {

struct LoadedItem {
  ImageSize shape;     // the prepared image's size (decoded forms)
  std::string error;   // "" when loaded; else the error, naming the item
  double seconds = 0;  // the time the read and the preparation took
  bool from_disk = false;  // read back from the disk tier, not prepared
};

// Reads and prepares `item` of `ds`: into `block` when it is not empty (the item's one claimed
// arena block), else into `prepared`. `raw` is scratch for the encoded bytes. With a disk tier
// (`disk`, and ds.disk_namespace set): an item it holds is read back from it instead, and one
// prepared is offered to it. A record is used only if it is whole RGB (width · height · 3 bytes)
// and, when `expected_length` is not 0 (the bytes claimed for it; a block's size when there is
// one), exactly that long; else it is
// forgotten and the item prepared (and offered) again. Thread-safe for distinct buffers (a
// Source's reads, the preparation and PreparedStore are).
LoadedItem load_item(const Dataset& ds, ItemId item, std::span<uint8_t> block, std::vector<uint8_t>& raw,
                     std::vector<uint8_t>& prepared, PreparedStore* disk = nullptr, uint64_t expected_length = 0);

// Seconds per load in fixed buckets (kBounds[i] is the upper bound of bucket i; one more bucket for
// the rest), as `status` and the metrics report them. Not thread-safe.
class LoadHistogram {
 public:
  static constexpr double kBounds[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                       0.1,    0.25,  0.5,   1,     2.5,  5,    10};
  void add(double seconds);
  void write(v1::LoadHistogram* out) const;

 private:
  uint64_t counts_[std::size(kBounds) + 1] = {};
  double sum_ = 0;
};

}  // namespace joader
