// Catalog: what the daemon knows of each dataset, and the checks and the indexing that make one.
//
// A Dataset is a registered spec (name, source, prep, on_error), its item list (the Source), how
// its items are prepared and how many arena bytes each takes once stored (known from each image's
// header at `dataset add`, so that a batch reserves what its items take and one huge image costs
// only itself), its fingerprint, and the sampler its jobs draw from. Its jobs are the ServingState's.
//
// open_dataset() and size_items() are the slow part of `dataset add` — listing the source, reading
// every header — and run without any lock; the Engine then registers the result under its own. The other
// functions check requests against a dataset and describe one; none keeps state.
//
// Thread safety: a Dataset is guarded by its owner (the Engine's lock) once registered.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "joader.pb.h"
#include "prep/image_prep.h"
#include "sampler/sampler.h"
#include "server/engine_error.h"
#include "source/source.h"

namespace joader {

inline constexpr size_t kMaxDatasets = 1024;     // registered at once
// In a daemon several uids use, what one uid other than the daemon's owner and root may hold at
// once, so that it cannot lock the others out: half of a dataset's job slots (kMaxJobs, the
// sampler's signature width), jobs in all, datasets (which the others cannot remove), and items
// indexed in all those datasets (each costs the daemon ~100 bytes of index and sampler state:
// 2^24 of them ~1.6 GiB; docs/DAEMON.md, "Limits").
inline constexpr size_t kMaxJobsPerUserAndDataset = kMaxJobs / 2;
inline constexpr size_t kMaxJobsPerUser = 256;
inline constexpr size_t kMaxDatasetsPerUser = kMaxDatasets / 4;
inline constexpr uint64_t kMaxItemsPerUser = uint64_t{1} << 24;
inline constexpr size_t kMaxNameBytes = 256;     // dataset and job names
inline constexpr size_t kMaxSourceBytes = 4096;  // a source spec (PATH_MAX)
// Images stored at their own size: at most 8192 × 8192 pixels (192 MiB) each.
inline constexpr uint64_t kMaxStoredPixels = uint64_t{8192} * 8192;

// kFailedPrecondition unless the client speaks this daemon's protocol version.
void check_protocol(uint32_t version);
// Names and sources end up in status replies, logs and the state file: at most max_bytes long,
// no control characters; kInvalidArgument naming `what` otherwise.
void check_text(const char* what, const std::string& text, size_t max_bytes);
// What a uid's datasets hold of the items it may index in all.
struct ItemAllowance {
  uint64_t held = 0;
  uint64_t limit = UINT64_MAX;
  uint64_t room() const { return held >= limit ? 0 : limit - held; }
};
// The refusal of a dataset of `adding` items (more, when `partial`: its indexing was stopped) that
// does not fit `uid`'s allowance (kResourceExhausted).
EngineError too_many_items(uid_t uid, const ItemAllowance& allowance, uint64_t adding, bool partial);
// Everything about an AddDatasetRequest that can be checked without reading its source.
void check_add_request(const v1::AddDatasetRequest& request);
// The fields in which `asked` differs from the registered `have`, e.g. "on_error fail (this
// request: skip)"; empty when they are the same dataset.
std::string spec_difference(const v1::AddDatasetRequest& have, const v1::AddDatasetRequest& asked);

struct Dataset {
  uint32_t index = 0;  // the ServingState's number for it (cache keys)
  v1::AddDatasetRequest spec;
  std::unique_ptr<Source> source;
  PrepSpec prep;
  uint64_t item_bytes = 0;  // arena bytes of its largest item (rounded): every item when they are all alike
  // Raw and own-size datasets: each item's arena bytes (rounded; an item whose size the probe could
  // not tell counts as the largest). Empty when every item takes item_bytes.
  std::vector<uint64_t> item_sizes;
  // Own size: each item's stored size, from its header ({0, 0} where the probe could not tell), so
  // that a loader can claim its arena blocks before preparing it.
  std::vector<ImageSize> item_shapes;
  ImageSize smallest;  // own size: the stored image with the shortest side (for crop checks)
  uint32_t smallest_item = 0;
  std::unique_ptr<Sampler> sampler;
  std::unordered_set<ItemId> skipped;  // under on_error skip: the items that could not be prepared
  std::string formats;                 // own size: "JPEG 200, PNG 40"
  uint64_t unreadable = 0;             // own size: files whose header could not be read (skipped)
  std::string fingerprint;             // of the item list (source.h)
  std::string reindexed;               // what a restart's re-index found changed; "" if nothing
  uint64_t loads = 0, deliveries = 0;  // its part of the daemon's counts: its own L/D
  // Its namespace in the disk tier (serve --disk-cache; PreparedStore), when it has one: decoded
  // forms only (a raw item is a file's bytes, which the disk holds already).
  std::optional<uint64_t> disk_namespace;

  bool skip_bad_items() const { return spec.on_error() == "skip"; }
  uint64_t bytes_of(ItemId item) const { return item_sizes.empty() ? item_bytes : item_sizes[item]; }
  // What a batch that is not yet decided reserves: the sum of the `batch` largest items of the
  // subset (every item when `subset` is empty), a bound on any batch of its items, so that a huge
  // image costs only itself (docs/DAEMON.md, "Memory").
  uint64_t batch_bound(std::span<const ItemId> subset, uint32_t batch) const;
  uint64_t mean_bytes(std::span<const ItemId> subset) const;  // of the subset's items (at least 1)
  std::string item_name(ItemId item) const;                           // "item N (path)"
  std::string item_error(ItemId item, const std::string& what) const;  // "item N (path): what"
};

using SourceOpener = std::function<std::unique_ptr<Source>(
    const std::string& spec, const std::function<void(size_t)>& progress, const std::string& data_root)>;

// Fills ds from a checked request, in two steps that need no lock. open_dataset: its spec and
// prep, its source (every file inside data_root when that is set) and the item list's
// fingerprint — enough to compare it with a registered dataset of that name. size_items: every
// item's stored size — a raw item's file size, an image stored at its own size from its header
// (unreadable headers are refused, or logged and skipped under on_error skip). progress(n) is
// called as items are indexed and probed; it may throw to abandon (the daemon stopping). Both
// throw EngineError.
void open_dataset(Dataset& ds, const v1::AddDatasetRequest& request, const SourceOpener& open,
                  const std::string& data_root, const std::function<void(size_t)>& progress);
void size_items(Dataset& ds, const std::function<void(size_t)>& progress);

// The dataset as `status` and `dataset list` show it.
v1::DatasetInfo dataset_info(const Dataset& ds, size_t active_jobs);

// Checks a job's augmentation against its dataset (an op the dataset's images cannot take, e.g. a
// CenterCrop larger than its smallest image); returns its description for `status`.
std::string check_augment(const v1::Register& request, const Dataset& ds);

}  // namespace joader
