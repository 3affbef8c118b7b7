// The daemon's datasets and status as JSON: one definition of the field names for
// `joader dataset list --json`, `joader status --json` and the Python client's dicts.
#pragma once

#include <nlohmann/json.hpp>

#include "joader.pb.h"

namespace joader {

// {name, source, prep, items, classes: [names], height, width, channels, raw, on_error, skipped,
// active_jobs}
nlohmann::json to_json(const v1::DatasetInfo& dataset);

// {loads, deliveries, ld_ratio, hits, evictions, skipped, cache_bytes, cache_capacity,
// pinned_bytes, policy, loader_threads, uptime_seconds, datasets: [...], jobs: [{name, dataset,
// epoch, delivered, delivered_in_epoch, subset_size, items_per_second, queued, batch_size, epochs}]}
nlohmann::json to_json(const v1::StatusReply& status);

// loads / deliveries, 0 before the first delivery.
double ld_ratio(const v1::StatusReply& status);

}  // namespace joader
