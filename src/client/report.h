// The daemon's datasets and status as JSON: one definition of the field names for
// `joader dataset list --json`, `joader status --json` and the Python client's dicts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "joader.pb.h"

namespace joader {

// {name, source, prep, items, classes: [names], height, width, channels, raw, on_error, skipped,
// formats, unreadable, fingerprint, reindexed, loads, deliveries, ld_ratio, active_jobs}
nlohmann::json to_json(const v1::DatasetInfo& dataset);

// {loads, deliveries, ld_ratio, hits, evictions, skipped, cache_bytes, cache_capacity,
// pinned_bytes, policy, loader_threads, uptime_seconds, datasets: [...], jobs: [{name, dataset,
// epoch, finished, delivered, delivered_in_epoch, subset_size, items_per_second, queued, planned,
// batch_size, epochs, augment, wait_seconds}]}. epoch counts from 0; a job that has delivered all
// its epochs shows epoch = epochs and finished = true.
nlohmann::json to_json(const v1::StatusReply& status);

// True once the job has delivered all its epochs (a job with epochs 0 never finishes).
bool finished(const v1::JobStatus& job);
// The EPOCH column of `status` and `top`: the 0-based epoch, or "done" once finished.
std::string epoch_column(const v1::JobStatus& job);

// loads / deliveries, 0 before the first delivery: the daemon's, or one dataset's own.
double ld_ratio(const v1::StatusReply& status);
double ld_ratio(const v1::DatasetInfo& dataset);

}  // namespace joader
