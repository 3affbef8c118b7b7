// Prometheus metrics of the daemon: the text exposition format of a status reply (so `joader
// status --json` and GET /metrics come from one snapshot and agree), and the HTTP endpoint that
// serves it for `joader serve --metrics HOST:PORT` (cpp-httplib).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "joader.pb.h"

namespace httplib {
class Server;
}

namespace joader {

class Engine;

// Families, all prefixed joader_: counters loads_total, deliveries_total, cache_hits_total,
// evictions_total, space_waits_total, split_items_total, skipped_items_total{dataset},
// job_delivered_items_total{dataset,job}, job_wait_seconds_total{dataset,job}; gauges cache_bytes,
// cache_capacity_bytes, cached_items, cached_blocks, arena_huge_page_bytes, pinned_bytes, jobs,
// datasets, loader_threads, uptime_seconds, job_epoch{dataset,job},
// job_items_per_second{dataset,job}, job_queued_items{dataset,job}; the histogram load_seconds
// (time to read and prepare an item). The dataset and job labels are the daemon's numbers for them
// (DatasetInfo.id, JobStatus.id, as `joader status --json` shows them) unless `names`: anyone who
// can reach the port reads the labels, and a name can say what is private.
std::string prometheus_text(const v1::StatusReply& status, bool names = false);

// "PORT" (loopback), "HOST:PORT" or "[V6]:PORT" → host and port; throws std::invalid_argument.
std::pair<std::string, int> parse_listen_address(const std::string& text);

class MetricsServer {
 public:
  // Binds host:port (port 0: any free port) and serves GET /metrics from engine.status() on a
  // thread of its own. Throws std::runtime_error if the address cannot be bound.
  MetricsServer(Engine& engine, const std::string& host, int port, bool names = false);
  ~MetricsServer();  // stops serving and joins the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace joader
