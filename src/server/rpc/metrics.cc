#include "server/rpc/metrics.h"

// poll(2), not select(2): the daemon raises its descriptor limit, and select cannot watch a
// descriptor numbered 1024 or above.
#define CPPHTTPLIB_USE_POLL
#include <httplib.h>

#include <cstdio>
#include <map>
#include <stdexcept>
#include <vector>

#include "server/engine.h"

namespace joader {
namespace {

std::string escape(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

struct Writer {
  std::string out;
  void family(const char* name, const char* type, const char* help) {
    out += std::string("# HELP joader_") + name + " " + help + "\n# TYPE joader_" + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    out += "joader_" + name + (labels.empty() ? "" : "{" + labels + "}") + " " + number(value) + "\n";
  }
};

// The dataset="…" label of each dataset, by name: its name, or its number unless `names`.
std::map<std::string, std::string> dataset_labels(const v1::StatusReply& s, bool names) {
  std::map<std::string, std::string> out;
  for (const auto& d : s.datasets())
    out[d.name()] = "dataset=\"" + (names ? escape(d.name()) : std::to_string(d.id())) + "\"";
  return out;
}

}  // namespace

std::string prometheus_text(const v1::StatusReply& s, bool names) {
  Writer w;
  auto counter = [&](const char* name, const char* help, double v) {
    w.family(name, "counter", help);
    w.sample(name, "", v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    w.family(name, "gauge", help);
    w.sample(name, "", v);
  };
  counter("loads_total", "Items loaded into the cache (cache misses), from their source or the disk tier.",
          double(s.loads()));
  counter("disk_reads_total", "Of the loads, items read back from the disk tier instead of prepared.",
          double(s.disk_reads()));
  if (s.has_disk_cache()) {
    const v1::DiskCacheStatus& d = s.disk_cache();
    gauge("disk_cache_bytes", "Bytes of prepared items the disk tier holds.", double(d.bytes()));
    gauge("disk_cache_capacity_bytes", "Bytes the disk tier may hold.", double(d.capacity()));
    gauge("disk_cache_items", "Prepared items the disk tier holds.", double(d.items()));
    gauge("disk_cache_queued_bytes", "Bytes waiting to be written to the disk tier.", double(d.queued_bytes()));
    gauge("disk_cache_admitting", "1 while the disk tier admits items, 0 once full or after a write error.",
          d.admitting() ? 1 : 0);
    counter("disk_cache_written_total", "Records written to the disk tier.", double(d.written()));
    counter("disk_cache_corrupt_total", "Records of the disk tier found torn or corrupt and dropped.",
            double(d.corrupt()));
  }
  counter("deliveries_total", "Items delivered to jobs.", double(s.deliveries()));
  counter("cache_hits_total", "Decided items found in the cache.", double(s.hits()));
  counter("evictions_total", "Items evicted from the cache.", double(s.evictions()));
  counter("space_waits_total", "Loads that had to wait for arena space.", double(s.space_waits()));
  counter("split_items_total", "Items placed in several arena blocks (fragmentation, no wait).",
          double(s.split_items()));
  gauge("cache_bytes", "Bytes of cached items in the arena.", double(s.cache_bytes()));
  gauge("cache_capacity_bytes", "Size of the shared-memory arena.", double(s.cache_capacity()));
  gauge("cached_items", "Items in the cache.", double(s.cached_items()));
  gauge("cached_blocks", "Arena blocks holding the cached items (above cached_items: fragmentation).",
        double(s.cached_blocks()));
  gauge("arena_huge_page_bytes", "Bytes of the arena the daemon has mapped in huge pages.",
        double(s.arena_huge_bytes()));
  gauge("pinned_bytes", "Bytes of cached items decided for jobs and not yet acknowledged.", double(s.pinned_bytes()));
  gauge("jobs", "Jobs registered.", double(s.jobs_size()));
  gauge("datasets", "Datasets registered.", double(s.datasets_size()));
  gauge("loader_threads", "Threads that read and prepare items.", double(s.loader_threads()));
  gauge("uptime_seconds", "Seconds since the daemon started.", s.uptime_seconds());

  w.family("skipped_items_total", "counter", "Items (files) skipped because they could not be prepared, each counted once.");
  const std::map<std::string, std::string> dataset_label = dataset_labels(s, names);
  for (const auto& d : s.datasets()) w.sample("skipped_items_total", dataset_label.at(d.name()), double(d.skipped()));
  // A job's labels: its dataset's, and its name or number.
  std::vector<std::string> job_labels;
  for (const auto& j : s.jobs()) {
    const auto it = dataset_label.find(j.dataset());
    job_labels.push_back((it == dataset_label.end() ? std::string("dataset=\"\"") : it->second) + ",job=\"" +
                         (names ? escape(j.name()) : std::to_string(j.id())) + "\"");
  }
  struct JobFamily {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const v1::JobStatus&);
  };
  const JobFamily job_families[] = {
      {"job_delivered_items_total", "counter", "Items delivered to the job.",
       [](const v1::JobStatus& j) { return double(j.delivered()); }},
      {"job_wait_seconds_total", "counter",
       "Seconds the job's consumer spent waiting for batches (measured in the client, reported with its acks).",
       [](const v1::JobStatus& j) { return j.wait_seconds(); }},
      {"job_epoch", "gauge", "The job's current epoch, from 0.", [](const v1::JobStatus& j) { return double(j.epoch()); }},
      {"job_items_per_second", "gauge", "The job's consumption rate (moving average of acknowledged items).",
       [](const v1::JobStatus& j) { return j.items_per_second(); }},
      {"job_queued_items", "gauge", "Items decided for the job and not yet acknowledged.",
       [](const v1::JobStatus& j) { return double(j.queued()); }},
      {"job_planned_items", "gauge", "Of the queued items, those decided beyond the job's window (policy planned): not loaded yet.",
       [](const v1::JobStatus& j) { return double(j.planned()); }},
  };
  for (const JobFamily& f : job_families) {
    w.family(f.name, f.type, f.help);
    for (int i = 0; i < s.jobs_size(); ++i) w.sample(f.name, job_labels[size_t(i)], f.value(s.jobs(i)));
  }

  const v1::LoadHistogram& h = s.load_seconds();
  w.family("load_seconds", "histogram", "Seconds to read and prepare an item.");
  uint64_t cumulative = 0;
  for (int i = 0; i < h.bounds_size() && i < h.counts_size(); ++i) {
    cumulative += h.counts(i);
    w.sample("load_seconds_bucket", "le=\"" + number(h.bounds(i)) + "\"", double(cumulative));
  }
  w.sample("load_seconds_bucket", "le=\"+Inf\"", double(h.count()));
  w.sample("load_seconds_sum", "", h.sum());
  w.sample("load_seconds_count", "", double(h.count()));
  return w.out;
}

std::pair<std::string, int> parse_listen_address(const std::string& text) {
  std::string host = "127.0.0.1", port = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string::npos) throw std::invalid_argument("expected [ADDRESS]:PORT, not '" + text + "'");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value < 0 || value > 65535 || host.empty()) {
    throw std::invalid_argument("expected PORT or HOST:PORT (e.g. 127.0.0.1:9464), not '" + text + "'");
  }
  return {host, int(value)};
}

MetricsServer::MetricsServer(Engine& engine, const std::string& host, int port, bool names)
    : server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics", [&engine, names](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(engine.status(), names), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) throw std::runtime_error("cannot listen for metrics on " + host + ":" + std::to_string(port));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace joader
