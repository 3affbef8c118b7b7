#include "server/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <cstdio>
#include <map>

#include "common/augment_wire.h"
#include "common/protocol.h"
#include "common/source_spec.h"
#include "ipc/arena_allocator.h"
#include "prep/augment.h"
#include "prep/ops/op_family.h"
#include "prep/image_formats.h"

namespace joader {

void check_protocol(uint32_t version) {
  if (version != kProtocolVersion) {
    throw EngineError(EngineError::kFailedPrecondition,
                      fmt::format("client speaks protocol version {}, this daemon speaks {}", version, kProtocolVersion));
  }
}

EngineError too_many_items(uid_t uid, const ItemAllowance& allowance, uint64_t adding, bool partial) {
  return EngineError(EngineError::kResourceExhausted,
                     fmt::format("uid {}'s datasets hold {} items and this source lists {}{}: one user other than the "
                                 "daemon's owner and root may index at most {} items in all; remove a dataset first",
                                 uid, allowance.held, partial ? "more than " : "", adding, allowance.limit));
}

void check_text(const char* what, const std::string& text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("{} is {} bytes long, more than the limit of {}", what, text.size(), max_bytes));
  }
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw EngineError(EngineError::kInvalidArgument, fmt::format("{} contains a control character", what));
    }
  }
}

void check_add_request(const v1::AddDatasetRequest& req) {
  check_protocol(req.protocol_version());
  if (req.name().empty()) throw EngineError(EngineError::kInvalidArgument, "a dataset needs a name");
  check_text("the dataset name", req.name(), kMaxNameBytes);
  check_text("the source", req.source(), kMaxSourceBytes);
  if (const auto path = source_path(req.source()); path && !path->empty() && path->front() != '/') {
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("the source path '{}' is relative, and the daemon's working directory is not the "
                                  "caller's: give an absolute path (the joader command and the Python and C++ clients "
                                  "make relative paths absolute themselves)",
                                  *path));
  }
  if (req.on_error() != "" && req.on_error() != "fail" && req.on_error() != "skip") {
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("the on-error mode must be 'fail' or 'skip', not '{}'", req.on_error()));
  }
  if (req.crop() > kMaxAugmentSize || req.resize() > kMaxAugmentSize) {
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("resize and crop must be at most {} pixels", kMaxAugmentSize));
  }
  if (req.raw() && (req.crop() != 0 || req.resize() != 0)) {
    throw EngineError(EngineError::kInvalidArgument,
                      "a raw dataset passes the stored bytes through: it takes no resize or crop");
  }
}

std::string spec_difference(const v1::AddDatasetRequest& have, const v1::AddDatasetRequest& asked) {
  std::string out;
  auto field = [&out](const char* name, const std::string& a, const std::string& b) {
    if (a != b) out += std::string(out.empty() ? "" : ", ") + name + " " + a + " (this request: " + b + ")";
  };
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  auto mode = [](const v1::AddDatasetRequest& r) { return std::string(r.on_error() == "skip" ? "skip" : "fail"); };
  field("source", have.source(), asked.source());
  field("raw", flag(have.raw()), flag(asked.raw()));
  field("resize", std::to_string(have.resize()), std::to_string(asked.resize()));
  field("crop", std::to_string(have.crop()), std::to_string(asked.crop()));
  field("on_error", mode(have), mode(asked));
  return out;
}

uint64_t Dataset::batch_bound(std::span<const ItemId> subset, uint32_t batch) const {
  const uint64_t count = subset.empty() ? source->size() : subset.size();
  if (item_sizes.empty()) return std::min<uint64_t>(batch, count) * item_bytes;
  std::vector<uint64_t> sizes;
  if (subset.empty()) {
    sizes = item_sizes;
  } else {
    sizes.reserve(subset.size());
    for (ItemId id : subset) sizes.push_back(item_sizes[id]);
  }
  const auto top = sizes.begin() + static_cast<std::ptrdiff_t>(std::min<uint64_t>(batch, sizes.size()));
  std::nth_element(sizes.begin(), top - (top == sizes.begin() ? 0 : 1), sizes.end(), std::greater<>());
  return std::accumulate(sizes.begin(), top, uint64_t{0});
}

uint64_t Dataset::mean_bytes(std::span<const ItemId> subset) const {
  if (item_sizes.empty()) return std::max<uint64_t>(1, item_bytes);
  uint64_t sum = 0;
  if (subset.empty()) {
    sum = std::accumulate(item_sizes.begin(), item_sizes.end(), uint64_t{0});
  } else {
    for (ItemId id : subset) sum += item_sizes[id];
  }
  const uint64_t count = subset.empty() ? item_sizes.size() : subset.size();
  return std::max<uint64_t>(1, count == 0 ? 0 : sum / count);
}

std::string Dataset::item_name(ItemId item) const {
  return fmt::format("item {} ({})", item, source->item(item).path);
}

std::string Dataset::item_error(ItemId item, const std::string& what) const {
  return item_name(item) + ": " + what;
}

namespace {

// Own-size datasets: reads each item's header and returns the largest stored size in bytes; sets
// ds.item_sizes, ds.smallest and the format counts. Throws EngineError naming an item above
// kMaxStoredPixels, or the unreadable files unless they are to be skipped.
uint64_t probe_stored_sizes(Dataset& ds, const std::function<void(size_t)>& progress) {
  uint64_t largest = 0;
  std::vector<uint8_t> head;
  const size_t n = ds.source->size();
  ds.item_sizes.assign(n, 0);
  ds.item_shapes.assign(n, {});
  std::map<std::string, uint64_t> formats;
  std::vector<std::string> unreadable;
  for (uint32_t i = 0; i < n; ++i) {
    if (i % 1000 == 999) {
      if (progress) progress(i + 1);
    }
    auto [width, height] = ds.source->known_image_size(i);
    if (width == 0) {
      try {
        // The frame header is usually within the first 16 KiB; large APP segments (EXIF
        // thumbnails, ICC profiles) can push it further, and then the whole file is read.
        ds.source->read_prefix(i, 16 << 10, head);
        ImageSize size = probe_image(head, ds.prep.max_pixels);
        if (size.width == 0) {
          ds.source->read(i, head);
          size = probe_image(head, ds.prep.max_pixels);
          if (size.width == 0) {
            throw PrepError(std::string("corrupt or truncated ") + format_name(sniff_format(head)) +
                            ": its header is cut short");
          }
        }
        width = size.width;
        height = size.height;
        ++formats[format_name(sniff_format(head))];
      } catch (const std::exception& e) {
        unreadable.push_back(ds.item_error(i, e.what()));  // refused below, or skipped when loaded
        continue;
      }
    }
    const ImageSize stored = stored_size(ds.prep, width, height);
    if (stored.width == 0 || stored.height == 0) continue;
    const uint64_t pixels = uint64_t{stored.width} * stored.height;
    if (pixels > kMaxStoredPixels) {
      throw EngineError(EngineError::kInvalidArgument,
                        fmt::format("{} would be stored at {}×{} pixels, more than the limit of {} for images stored "
                                    "at their own size: give the dataset a resize",
                                    ds.item_name(i), stored.width, stored.height, kMaxStoredPixels));
    }
    largest = std::max(largest, pixels * 3);
    ds.item_sizes[i] = ArenaAllocator::rounded(pixels * 3);
    ds.item_shapes[i] = stored;
    if (ds.smallest.width == 0 || std::min(stored.width, stored.height) < std::min(ds.smallest.width, ds.smallest.height)) {
      ds.smallest = stored;
      ds.smallest_item = i;
    }
  }
  for (const auto& [format, count] : formats) {
    ds.formats += fmt::format("{}{} {}", ds.formats.empty() ? "" : ", ", format, count);
  }
  if (!unreadable.empty() && !ds.skip_bad_items()) {
    const std::span<const std::string> some(unreadable.data(), std::min<size_t>(unreadable.size(), 3));
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("{} of {} files cannot be read as images: {}{} — remove them, or add the dataset "
                                  "with on_error skip to leave them out",
                                  unreadable.size(), n, fmt::join(some, "; "), unreadable.size() > 3 ? "; ..." : ""));
  }
  for (const std::string& what : unreadable) {
    std::fprintf(stderr, "joader: dataset %s: skipping %s\n", ds.spec.name().c_str(), what.c_str());
  }
  ds.unreadable = unreadable.size();
  if (largest == 0) largest = 1 << 20;  // nothing could be probed: every load will fail or be skipped
  for (uint64_t& size : ds.item_sizes) {
    if (size == 0) size = ArenaAllocator::rounded(largest);  // unknown: as the largest
  }
  return largest;
}

}  // namespace

void open_dataset(Dataset& ds, const v1::AddDatasetRequest& req, const SourceOpener& open,
                  const std::string& data_root, const std::function<void(size_t)>& progress) {
  ds.spec = req;
  ds.prep.raw = req.raw();
  ds.prep.resize = req.resize();
  ds.prep.crop = req.crop();
  try {
    ds.source = open(req.source(), progress, data_root);
  } catch (const SourceError& e) {
    throw EngineError(EngineError::kInvalidArgument, e.what());
  }
  ds.fingerprint = fingerprint(*ds.source);
}

void size_items(Dataset& ds, const std::function<void(size_t)>& progress) {
  const size_t n = ds.source->size();
  uint64_t largest = prepared_size(ds.prep);
  if (ds.prep.raw) {
    for (uint32_t i = 0; i < n; ++i) largest = std::max(largest, ds.source->item(i).size);
    if (largest == 0) largest = 1 << 20;  // sizes unknown until read (synthetic): reserve 1 MiB per item
    ds.item_sizes.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t size = ds.source->item(i).size;
      ds.item_sizes[i] = ArenaAllocator::rounded(std::max<uint64_t>(size == 0 ? largest : size, 1));
    }
  }
  if (own_size(ds.prep)) largest = probe_stored_sizes(ds, progress);
  ds.item_bytes = ArenaAllocator::rounded(std::max<uint64_t>(largest, 1));
  if (std::all_of(ds.item_sizes.begin(), ds.item_sizes.end(), [&](uint64_t b) { return b == ds.item_bytes; })) {
    ds.item_sizes.clear();
  }
}

v1::DatasetInfo dataset_info(const Dataset& ds, size_t active_jobs) {
  v1::DatasetInfo out;
  out.set_name(ds.spec.name());
  out.set_source(ds.spec.source());
  out.set_prep(ds.prep.describe());
  out.set_items(ds.source->size());
  for (const std::string& c : ds.source->classes()) out.add_classes(c);
  if (!ds.prep.raw) {  // 0 × 0 × 3: decoded images at their own size
    out.set_height(ds.prep.crop);
    out.set_width(ds.prep.crop);
    out.set_channels(3);
  }
  out.set_raw(ds.prep.raw);
  out.set_on_error(ds.skip_bad_items() ? "skip" : "fail");
  out.set_skipped(ds.skipped.size());
  out.set_formats(ds.formats);
  out.set_unreadable(ds.unreadable);
  out.set_fingerprint(ds.fingerprint);
  out.set_reindexed(ds.reindexed);
  out.set_loads(ds.loads);
  out.set_deliveries(ds.deliveries);
  out.set_active_jobs(active_jobs);
  return out;
}

std::string check_augment(const v1::Register& req, const Dataset& ds) {
  const std::string python =
      req.python_augment().empty() ? "" : fmt::format("in Python: {}", fmt::join(req.python_augment(), ", "));
  if (req.augment().empty()) return python;
  if (ds.prep.raw) {
    throw EngineError(EngineError::kInvalidArgument,
                      fmt::format("augment needs a decoded dataset, and '{}' stores raw bytes: add one with a resize "
                                  "or without prep",
                                  ds.spec.name()));
  }
  std::vector<AugmentOp> ops;
  try {
    ops = from_wire(req.augment());
  } catch (const PrepError& e) {
    throw EngineError(EngineError::kInvalidArgument, std::string("augment: ") + e.what());
  }
  // The first op takes the stored images themselves: one that cannot take the smallest (a
  // CenterCrop larger than it, a RandomCrop that cannot pad enough) is refused here, not per item.
  const ImageSize smallest = own_size(ds.prep) ? ds.smallest : ImageSize{ds.prep.crop, ds.prep.crop};
  const OpFamily& first = family_of(ops.front());
  if (smallest.width != 0 && first.refuses_input) {
    const std::string refusal =
        first.refuses_input(ops.front(), smallest.width, smallest.height,
                            fmt::format("the smallest image '{}' stores", ds.spec.name()),
                            own_size(ds.prep) ? fmt::format("item {}", ds.smallest_item) : "");
    if (!refusal.empty()) throw EngineError(EngineError::kInvalidArgument, "augment: " + refusal);
  }
  std::vector<std::string> described;
  for (const AugmentOp& op : ops) described.push_back(op.describe());
  const std::string text = fmt::format("{}", fmt::join(described, ", "));
  return python.empty() ? text : text + "; " + python;
}

}  // namespace joader
