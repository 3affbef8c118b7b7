// Daemon: the whole of `joader serve` but for its command line and its signals — options checked
// against their allow-lists, the socket made safe to bind, the Engine (with its saved datasets),
// the gRPC service on Joader's own Unix-socket listener, the optional metrics endpoint — and their
// shutdown in the one order that tells every job why it ends and leaves nothing behind. The
// service fuzzer assembles the same object without a socket (in-process channel only).
//
// Thread safety: start() and stop() from one thread; engine() and in_process_channel() from any.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "server/engine.h"

namespace joader {

class JoaderService;
class UnixListener;
class MetricsServer;

struct DaemonOptions {
  // The Unix socket to serve on; empty: none (the daemon is reached by in_process_channel()).
  std::string socket;
  // The core's options (cache size, loader threads, policy, sampler, seed, state file, data root,
  // share group): engine.h. Checked by Daemon::start, each error naming its field.
  EngineOptions engine;
  std::optional<std::pair<std::string, int>> metrics;  // host and port of GET /metrics
  // Metrics label jobs and datasets by name (else by their numbers: names can say what is private).
  bool metrics_names = false;
  // A daemon that serves a group (engine.share_group) reads any file its owner can for any member
  // unless engine.data_root confines it: refused unless this says the owner wants exactly that.
  bool group_reads_any_file = false;
  double register_timeout = 10;   // seconds a job stream may stay unregistered
};

// Why the daemon cannot start: an option outside what it accepts (kBadOption), or the machine
// refusing (kCannotStart: a live daemon on the socket, a port taken, ...). option() names the
// DaemonOptions field to blame (e.g. "cache_bytes"; empty when none is), so that a command line
// can name its own flag.
class DaemonError : public std::runtime_error {
 public:
  enum Kind { kBadOption, kCannotStart };
  DaemonError(Kind kind, std::string option, const std::string& message)
      : std::runtime_error(message), kind_(kind), option_(std::move(option)) {}
  Kind kind() const { return kind_; }
  const std::string& option() const { return option_; }

 private:
  Kind kind_;
  std::string option_;
};

class Daemon {
 public:
  // Checks the options, removes a stale socket or arenas that dead daemons left (refusing to
  // start when another daemon serves the socket), creates the Engine, restores the saved
  // datasets, and starts serving. `log` receives one line per notable event (stale files
  // removed, datasets restored or not). Throws DaemonError; nothing is left running then.
  static std::unique_ptr<Daemon> start(const DaemonOptions& options,
                                       const std::function<void(const std::string&)>& log = {});
  ~Daemon();  // stop()
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Stops, in order: the metrics endpoint, the listener (no new connections), the Engine (every
  // job gets "server shutting down"), gRPC (2 s for the streams to end), the Engine's threads
  // and arena, the socket file. Idempotent.
  void stop();

  Engine& engine() { return *engine_; }
  std::shared_ptr<grpc::Channel> in_process_channel();
  int metrics_port() const;  // 0 without metrics
  const std::string& socket() const { return options_.socket; }
  const DaemonOptions& options() const { return options_; }

 private:
  explicit Daemon(DaemonOptions options);
  void check_options();
  void claim_socket(const std::function<void(const std::string&)>& log);

  DaemonOptions options_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<UnixListener> listener_;
  std::unique_ptr<JoaderService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  bool owns_socket_ = false;  // bound by this daemon: unlinked at stop()
  bool stopped_ = false;
};

}  // namespace joader
