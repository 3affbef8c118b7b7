#include "server/daemon.h"

#include <algorithm>
#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "cache/eviction_policy.h"
#include "ipc/paths.h"
#include "ipc/shared_arena.h"
#include "ipc/arena_allocator.h"
#include "server/rpc/listener.h"
#include "server/rpc/metrics.h"
#include "server/rpc/service.h"

namespace joader {
namespace {

// True if a process accepts connections on the Unix socket at `path`.
bool socket_is_live(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

}  // namespace

void Daemon::check_options() {
  const EngineOptions& o = options_.engine;
  if (o.cache_bytes < ArenaAllocator::kAlign) {
    throw DaemonError(DaemonError::kBadOption, "cache_bytes", "the cache must hold at least " + std::to_string(ArenaAllocator::kAlign) +
                                         " bytes, not " + std::to_string(o.cache_bytes));
  }
  if (o.policy == "belady") {
    throw DaemonError(DaemonError::kBadOption, "policy", "policy belady needs the future: it exists only in `joader simulate`");
  }
  if (std::ranges::count(daemon_policy_names(), o.policy) == 0) {
    throw DaemonError(DaemonError::kBadOption, "policy", fmt::format("unknown cache policy '{}' (expected one of {})",
                                                                     o.policy, fmt::join(daemon_policy_names(), ", ")));
  }
  if (o.sampler == "lockstep" || std::ranges::count(sampler_names(), o.sampler) == 0) {
    throw DaemonError(DaemonError::kBadOption, "sampler",
                      fmt::format("the sampler must be dsa, independent or biased-dsa (the statistical tests' "
                                  "deliberately non-uniform control), not '{}'{}",
                                  o.sampler, o.sampler == "lockstep" ? " (lockstep exists only in `joader simulate`)" : ""));
  }
  if (o.share_group && o.data_root.empty() && !options_.group_reads_any_file) {
    throw DaemonError(DaemonError::kBadOption, "data_root",
                      "a daemon that serves a group needs a data root: without one, every member can make it read any "
                      "file its owner can read (give the folder the group's datasets are in; or, to allow exactly "
                      "that, group_reads_any_file)");
  }
  if (!o.state_path.empty()) {
    // The dataset list's folder must be one where no other user can swap the file between the
    // daemon's checks and its rename (DatasetStateFile): the daemon's or root's, and writable by
    // others only if sticky (/tmp).
    const std::string folder = std::filesystem::path(o.state_path).parent_path().empty()
                                   ? "."
                                   : std::filesystem::path(o.state_path).parent_path().string();
    // One that does not exist yet is the socket's folder, which the daemon makes private (else
    // the list cannot be saved, and the log says so).
    struct stat st{};
    const bool exists = stat(folder.c_str(), &st) == 0;
    const bool others_may_swap = (st.st_uid != getuid() && st.st_uid != 0) ||
                                 ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0);
    if (exists && others_may_swap) {
      throw DaemonError(DaemonError::kBadOption, "state_path",
                        fmt::format("the folder {} of the dataset list belongs to uid {} with mode {:04o}: others could "
                                    "replace the list there; keep it in a folder of yours that only you may write",
                                    folder, st.st_uid, st.st_mode & 07777));
    }
  }
  if (!(options_.register_timeout > 0)) throw DaemonError(DaemonError::kBadOption, "register_timeout", "the registration timeout must be positive");
  if (!o.data_root.empty()) {
    struct stat st{};
    if (o.data_root.front() != '/' || stat(o.data_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw DaemonError(DaemonError::kBadOption, "data_root", "the data root '" + o.data_root + "' is not an absolute path to a directory");
    }
  }
  const std::string& socket = options_.socket;
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path)) {
    throw DaemonError(DaemonError::kBadOption, "socket",
                      fmt::format("the socket path is too long for a Unix socket ({} bytes): {}", socket.size(), socket));
  }
}

void Daemon::claim_socket(const std::function<void(const std::string&)>& log) {
  const std::string& path = options_.socket;
  try {
    prepare_socket_dir(path);
  } catch (const std::exception& e) {
    throw DaemonError(DaemonError::kCannotStart, "socket", e.what());
  }
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (socket_is_live(path)) throw DaemonError(DaemonError::kCannotStart, "socket", "another Joader daemon is serving at " + path);
    log("removing the stale socket " + path + " left by a daemon that died");
    unlink(path.c_str());
  }
}

std::unique_ptr<Daemon> Daemon::start(const DaemonOptions& options, const std::function<void(const std::string&)>& log_fn) {
  const auto log = [&log_fn](const std::string& line) {
    if (log_fn) log_fn(line);
  };
  std::unique_ptr<Daemon> d(new Daemon(options));
  d->check_options();
  if (!d->options_.socket.empty()) d->claim_socket(log);
  if (int n = SharedArena::remove_stale(); n > 0) {
    log("removed " + std::to_string(n) + " stale shared-memory arena(s) of dead daemons");
  }

  try {
    EngineOptions engine = options.engine;
    if (!engine.log) engine.log = log_fn;
    d->engine_ = std::make_unique<Engine>(std::move(engine));
  } catch (const PreparedStoreError& e) {
    throw DaemonError(DaemonError::kCannotStart, "disk_cache", e.what());
  } catch (const std::exception& e) {
    throw DaemonError(DaemonError::kCannotStart, "", e.what());
  }
  d->engine_->restore_datasets([&log](const std::string& name, const std::string& why) {
    log("warning: dataset '" + name + "' not restored: " + why);
  });
  for (const v1::DatasetInfo& ds : d->engine_->list_datasets()) {
    log("restored dataset '" + ds.name() + "' (" + std::to_string(ds.items()) + " items, " + ds.source() + ")");
    if (!ds.reindexed().empty()) log("warning: dataset '" + ds.name() + "': " + ds.reindexed());
  }
  // The socket is ours, not gRPC's: each connection's uid is checked (SO_PEERCRED) before use.
  if (!options.socket.empty()) {
    try {
      d->listener_ = std::make_unique<UnixListener>(options.socket, AccessPolicy(getuid(), options.engine.share_group));
      d->owns_socket_ = true;
    } catch (const std::exception& e) {
      throw DaemonError(DaemonError::kCannotStart, "socket", e.what());
    }
  }
  d->service_ = std::make_unique<JoaderService>(
      *d->engine_, d->listener_.get(),
      std::chrono::milliseconds(static_cast<int64_t>(options.register_timeout * 1000)));
  grpc::ServerBuilder builder;
  builder.RegisterService(d->service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  d->server_ = builder.BuildAndStart();
  if (!d->server_) throw DaemonError(DaemonError::kCannotStart, "", "cannot start the gRPC server");
  if (options.metrics) {
    try {
      d->metrics_ = std::make_unique<MetricsServer>(*d->engine_, options.metrics->first, options.metrics->second,
                                                    options.metrics_names);
    } catch (const std::exception& e) {
      throw DaemonError(DaemonError::kCannotStart, "metrics", e.what());
    }
  }
  if (d->listener_) d->listener_->start(d->server_.get());
  return d;
}

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {}

Daemon::~Daemon() { stop(); }

void Daemon::stop() {
  if (stopped_) return;
  stopped_ = true;
  metrics_.reset();
  if (listener_) listener_->stop();
  if (engine_) engine_->shutdown();  // every job gets "server shutting down"
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
  }
  service_.reset();
  listener_.reset();
  engine_.reset();  // joins its threads, unlinks the arena
  if (owns_socket_) unlink(options_.socket.c_str());
}

std::shared_ptr<grpc::Channel> Daemon::in_process_channel() {
  return server_->InProcessChannel(grpc::ChannelArguments());
}

int Daemon::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

}  // namespace joader
