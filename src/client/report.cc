#include "client/report.h"

namespace joader {

nlohmann::json to_json(const v1::DatasetInfo& d) {
  return {{"name", d.name()},
          {"source", d.source()},
          {"prep", d.prep()},
          {"items", d.items()},
          {"classes", std::vector<std::string>(d.classes().begin(), d.classes().end())},
          {"height", d.height()},
          {"width", d.width()},
          {"channels", d.channels()},
          {"raw", d.raw()},
          {"on_error", d.on_error()},
          {"skipped", d.skipped()},
          {"formats", d.formats()},
          {"unreadable", d.unreadable()},
          {"fingerprint", d.fingerprint()},
          {"reindexed", d.reindexed()},
          {"loads", d.loads()},
          {"deliveries", d.deliveries()},
          {"ld_ratio", ld_ratio(d)},
          {"active_jobs", d.active_jobs()},
          {"id", d.id()},
          {"owner_uid", d.owner_uid()}};
}

bool finished(const v1::JobStatus& j) { return j.epochs() > 0 && j.epoch() >= j.epochs(); }

std::string epoch_column(const v1::JobStatus& j) { return finished(j) ? "done" : std::to_string(j.epoch()); }

static double ratio(uint64_t loads, uint64_t deliveries) {
  return deliveries == 0 ? 0.0 : double(loads) / double(deliveries);
}

double ld_ratio(const v1::StatusReply& s) { return ratio(s.loads(), s.deliveries()); }

double ld_ratio(const v1::DatasetInfo& d) { return ratio(d.loads(), d.deliveries()); }

nlohmann::json to_json(const v1::StatusReply& s) {
  nlohmann::json datasets = nlohmann::json::array(), jobs = nlohmann::json::array();
  for (const auto& d : s.datasets()) datasets.push_back(to_json(d));
  for (const auto& j : s.jobs()) {
    jobs.push_back({{"name", j.name()}, {"dataset", j.dataset()}, {"epoch", j.epoch()}, {"finished", finished(j)},
                    {"delivered", j.delivered()},
                    {"delivered_in_epoch", j.delivered_in_epoch()}, {"subset_size", j.subset_size()},
                    {"items_per_second", j.items_per_second()}, {"queued", j.queued()}, {"planned", j.planned()},
                    {"batch_size", j.batch_size()}, {"epochs", j.epochs()}, {"augment", j.augment()}, {"ordered", j.ordered()},
                    {"wait_seconds", j.wait_seconds()}, {"id", j.id()}, {"owner_uid", j.owner_uid()}});
  }
  nlohmann::json out = {{"loads", s.loads()},
          {"disk_reads", s.disk_reads()},
          {"deliveries", s.deliveries()},
          {"ld_ratio", ld_ratio(s)},
          {"hits", s.hits()},
          {"evictions", s.evictions()},
          {"skipped", s.skipped()},
          {"cache_bytes", s.cache_bytes()},
          {"cache_capacity", s.cache_capacity()},
          {"pinned_bytes", s.pinned_bytes()},
          {"space_waits", s.space_waits()},
          {"split_items", s.split_items()},
          {"cached_items", s.cached_items()},
          {"cached_blocks", s.cached_blocks()},
          {"arena_huge_bytes", s.arena_huge_bytes()},
          {"arena_pages", s.arena_pages()},
          {"arena_ready", s.arena_ready()},
          {"load_seconds",
           {{"bounds", std::vector<double>(s.load_seconds().bounds().begin(), s.load_seconds().bounds().end())},
            {"counts", std::vector<uint64_t>(s.load_seconds().counts().begin(), s.load_seconds().counts().end())},
            {"sum", s.load_seconds().sum()},
            {"count", s.load_seconds().count()}}},
          {"policy", s.policy()},
          {"loader_threads", s.loader_threads()},
          {"uptime_seconds", s.uptime_seconds()},
          {"pid", s.pid()},
          {"jobs_opened", s.jobs_opened()},
          {"datasets", datasets},
          {"jobs", jobs}};
  if (s.has_disk_cache()) {
    const v1::DiskCacheStatus& d = s.disk_cache();
    out["disk_cache"] = {{"dir", d.dir()},         {"capacity", d.capacity()}, {"bytes", d.bytes()},
                         {"items", d.items()},     {"hits", d.hits()},         {"misses", d.misses()},
                         {"corrupt", d.corrupt()}, {"written", d.written()},   {"queued_bytes", d.queued_bytes()},
                         {"admitting", d.admitting()}, {"stopped", d.stopped()}};
  }
  return out;
}

}  // namespace joader
