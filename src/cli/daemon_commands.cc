#include "cache/eviction_policy.h"
#include "cli/daemon_commands.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include <fmt/core.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/client.h"
#include "client/report.h"
#include "ipc/daemon_trust.h"
#include "ipc/paths.h"
#include "server/daemon.h"
#include "server/default_cache.h"
#include "server/idle_exit.h"
#include "server/rpc/listener.h"
#include "server/rpc/metrics.h"

namespace joader::cli {
namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

// `joader serve`'s flags: straight into DaemonOptions where the types agree, and as given where
// they are parsed first.
struct ServeOptions {
  DaemonOptions daemon;
  std::string cache_size = "auto", state, allow_group, data_root, metrics;
  std::string disk_cache_size = "auto";
  double idle_exit = 0;  // seconds without a job after which the daemon exits; 0: never
};

// The flag of `joader serve` that sets a DaemonOptions field.
std::string flag_of(const std::string& option) {
  static const std::map<std::string, std::string> flags = {
      {"cache_bytes", "--cache-size"}, {"policy", "--policy"},   {"sampler", "--sampler"},
      {"data_root", "--data-root"},    {"metrics", "--metrics"}, {"register_timeout", "--register-timeout"},
      {"state_path", "--state"},       {"disk_cache", "--disk-cache"}};
  auto it = flags.find(option);
  return it == flags.end() ? "" : it->second + ": ";
}

int run_serve(const ServeOptions& o) {
  DaemonOptions d = o.daemon;
  std::string cache_why;  // how the default was chosen; empty when given
  try {
    d.engine.cache_bytes = o.cache_size == "auto" ? default_cache_bytes(&cache_why) : parse_size(o.cache_size);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "error: --cache-size: {}\n", e.what());
    return 2;
  }
  if (o.daemon.engine.disk_cache.empty() && o.disk_cache_size != "auto") {
    fmt::print(stderr, "error: --disk-cache-size needs --disk-cache DIR\n");
    return 2;
  }
  if (!o.daemon.engine.disk_cache.empty() && o.disk_cache_size != "auto") {
    try {
      d.engine.disk_cache_bytes = parse_size(o.disk_cache_size);
      if (d.engine.disk_cache_bytes == 0) throw std::invalid_argument("the disk cache must hold at least one item");
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "error: --disk-cache-size: {}\n", e.what());
      return 2;
    }
  }
  if (!o.allow_group.empty()) {
    try {
      d.engine.share_group = parse_group(o.allow_group);
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "error: --allow-group: {}\n", e.what());
      return 2;
    }
  }
  if (!o.allow_group.empty() && o.data_root.empty() && !o.daemon.group_reads_any_file) {
    fmt::print(stderr, "error: --allow-group needs --data-root DIR: without it every member of the group can make the "
               "daemon read any file you can read. Give the folder the group's datasets are in, or add "
               "--group-reads-any-file to allow exactly that.\n");
    return 2;
  }
  if (!o.data_root.empty()) {
    char* real = realpath(o.data_root.c_str(), nullptr);
    struct stat root_st{};
    if (real == nullptr || stat(real, &root_st) != 0 || !S_ISDIR(root_st.st_mode)) {
      fmt::print(stderr, "error: --data-root {}: {}\n", o.data_root, real ? "not a directory" : std::strerror(errno));
      std::free(real);
      return 2;
    }
    d.engine.data_root = real;
    std::free(real);
  }
  if (!o.metrics.empty()) {
    try {
      d.metrics = parse_listen_address(o.metrics);
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "error: --metrics: {}\n", e.what());
      return 2;
    }
  }
  if (d.socket.empty()) d.socket = default_socket_path();
  d.engine.state_path = o.state.empty() ? d.socket + ".datasets.json" : o.state == "none" ? "" : o.state;

  // Signals are taken synchronously by the main thread; every thread the daemon starts inherits
  // the mask, so it is set before any.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Every connection is a descriptor: as many as the hard limit allows (the listener gives each
  // member a share of them).
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  std::unique_ptr<Daemon> daemon;
  try {
    daemon = Daemon::start(d, [](const std::string& line) { fmt::print(stderr, "joader: {}\n", line); });
  } catch (const DaemonError& e) {
    fmt::print(stderr, "error: {}{}\n", flag_of(e.option()), e.what());
    return e.kind() == DaemonError::kBadOption ? 2 : 1;
  }
  const v1::StatusReply s = daemon->engine().status();
  fmt::print(stderr, "joader: serving on {} (cache {}, {} loader threads, policy {}, sampler {}{}{})\n", d.socket,
             human_bytes(double(s.cache_capacity())), s.loader_threads(), d.engine.policy, d.engine.sampler,
             d.engine.share_group ? fmt::format(", shared with group {}", *d.engine.share_group) : "",
             d.engine.data_root.empty() ? "" : ", data root " + d.engine.data_root);
  if (const std::string& pages = s.arena_pages(); pages == "huge=never" || pages == "shmem_enabled=deny") {
    fmt::print(stderr, "joader: the cache is in 4 KiB pages ({} on /dev/shm); as root, `mount -o remount,"
               "huge=within_size /dev/shm` before starting the daemon made first epochs ~1.4x faster (docs/DAEMON.md, "
               "\"Huge pages\")\n", pages);
  }
  if (d.metrics) {
    const bool v6 = d.metrics->first.find(':') != std::string::npos;
    fmt::print(stderr, "joader: metrics on http://{}{}{}:{}/metrics\n", v6 ? "[" : "", d.metrics->first, v6 ? "]" : "",
               daemon->metrics_port());
  }

  if (!cache_why.empty()) {
    fmt::print(stderr, "joader: the cache is {} by default: {} (--cache-size to choose)\n",
               human_bytes(double(s.cache_capacity())), cache_why);
  }
  if (s.has_disk_cache()) {
    fmt::print(stderr, "joader: disk cache {}: {} items ({}), at most {}{}\n", s.disk_cache().dir(),
               s.disk_cache().items(), human_bytes(double(s.disk_cache().bytes())),
               human_bytes(double(s.disk_cache().capacity())),
               o.disk_cache_size == "auto" ? " (half of it and the free space; --disk-cache-size to choose)" : "");
  }
  if (o.idle_exit > 0) {
    fmt::print(stderr, "joader: exits after {:g} s without a job (--idle-exit)\n", o.idle_exit);
  }
  IdleExit idle(o.idle_exit, IdleExit::Clock::now());
  const timespec look_every{1, 0};
  for (;;) {
    const int sig = o.idle_exit > 0 ? sigtimedwait(&stop_signals, nullptr, &look_every) : [&] {
      int s = 0;
      sigwait(&stop_signals, &s);
      return s;
    }();
    if (sig == SIGINT || sig == SIGTERM) {
      fmt::print(stderr, "joader: {} received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    const v1::StatusReply now = daemon->engine().status();
    if (idle.due(static_cast<uint64_t>(now.jobs_size()), now.jobs_opened(), IdleExit::Clock::now())) {
      fmt::print(stderr, "joader: no job for {:g} s (--idle-exit), shutting down\n", o.idle_exit);
      break;
    }
  }
  daemon->stop();
  return 0;
}

struct DatasetAddOptions {
  std::string socket, name, source, on_error = "fail";
  uint32_t resize = 0, crop = 0;
  bool raw = false;
};

void print_error(const std::exception& e) { fmt::print(stderr, "error: {}\n", e.what()); }

int run_dataset_add(const DatasetAddOptions& o) {
  // Said here in the command's words; the daemon's own message speaks to every client alike.
  if (o.raw && (o.crop != 0 || o.resize != 0)) {
    fmt::print(stderr, "error: --raw passes the stored bytes through: it cannot be combined with --resize or --crop\n");
    return 1;
  }
  try {
    Client client(o.socket);
    v1::AddDatasetRequest req;
    req.set_name(o.name);
    req.set_source(o.source);
    req.set_raw(o.raw);
    req.set_resize(o.resize);
    req.set_crop(o.crop);
    req.set_on_error(o.on_error);
    const bool tty = isatty(STDERR_FILENO);
    // A log (not a terminal) gets a line a second at most, not one per thousand items.
    auto last_line = std::chrono::steady_clock::now();
    const v1::DatasetInfo info = client.add_dataset(req, [tty, &last_line](uint64_t n) {
      if (tty) {
        fmt::print(stderr, "\rindexing: {} items", n);
      } else if (const auto now = std::chrono::steady_clock::now(); now - last_line >= std::chrono::seconds(1)) {
        fmt::print(stderr, "indexing: {} items\n", n);
        last_line = now;
      }
    });
    if (tty) fmt::print(stderr, "\n");
    if (info.existed()) {
      fmt::print("dataset '{}' already registered (same spec, same item list): ", info.name());
    } else {
      fmt::print("added dataset '{}': ", info.name());
    }
    fmt::print("{} items, {} classes, {} ({}), fingerprint {}\n", info.items(), info.classes_size(), info.prep(),
               info.source(), info.fingerprint());
    if (!info.reindexed().empty()) fmt::print("warning: {}\n", info.reindexed());
    if (!info.formats().empty()) fmt::print("formats: {}\n", info.formats());
    if (info.unreadable() != 0) {
      fmt::print("{} files cannot be read as images and will be skipped (listed in the daemon's log)\n", info.unreadable());
    }
    return 0;
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
}

// A warning for each dataset that a daemon restart found changed (DatasetInfo.reindexed).
template <class Datasets>
void print_reindexed(const Datasets& datasets) {
  for (const v1::DatasetInfo& d : datasets) {
    if (!d.reindexed().empty()) fmt::print("warning: dataset '{}': {}\n", d.name(), d.reindexed());
  }
}

int run_dataset_list(const std::string& socket, bool json) {
  try {
    Client client(socket);
    const auto datasets = client.list_datasets();
    if (json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& d : datasets) out.push_back(to_json(d));
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    if (datasets.empty()) {
      fmt::print("no datasets (add one with `joader dataset add NAME --source KIND:ARG ...`)\n");
      return 0;
    }
    fmt::print("{:<20} {:>10} {:>8} {:>5}  {:<16}  {}\n", "name", "items", "classes", "jobs", "fingerprint",
               "prep / source");
    for (const auto& d : datasets) {
      fmt::print("{:<20} {:>10} {:>8} {:>5}  {:<16}  {} / {}\n", d.name(), d.items(), d.classes_size(),
                 d.active_jobs(), d.fingerprint(), d.prep(), d.source());
    }
    print_reindexed(datasets);
    return 0;
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
}

int run_job_rm(const std::string& socket, const std::string& name) {
  try {
    Client(socket).end_job(name);
    fmt::print("ended job '{}': its cache reservation is released; its loader, if it is still running, gets "
               "an error saying so\n", name);
    return 0;
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
}

int run_dataset_rm(const std::string& socket, const std::string& name) {
  try {
    Client(socket).remove_dataset(name);
    fmt::print("removed dataset '{}'\n", name);
    return 0;
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
}

void print_status(const v1::StatusReply& s, bool json, bool watching) {
  if (json) {
    // Watching prints JSON Lines (one compact object per snapshot), for tools that follow a stream.
    std::cout << (watching ? to_json(s).dump() : to_json(s).dump(2)) << std::endl;
    return;
  }
  fmt::print("loads {}  deliveries {}  L/D {:.3f}  hits {}  evictions {}  skipped {}\n", s.loads(), s.deliveries(),
             ld_ratio(s), s.hits(), s.evictions(), s.skipped());
  fmt::print("cache {} of {} ({} pinned), policy {}, {} loader threads, up {:.0f} s\n", human_bytes(double(s.cache_bytes())),
             human_bytes(double(s.cache_capacity())), human_bytes(double(s.pinned_bytes())), s.policy(),
             s.loader_threads(), s.uptime_seconds());
  if (s.arena_huge_bytes() > 0) {
    fmt::print("arena: {} of {} in 2 MiB pages ({})\n", human_bytes(double(s.arena_huge_bytes())),
               human_bytes(double(s.cache_capacity())), s.arena_pages());
  } else {
    fmt::print("arena: in 4 KiB pages ({}; huge pages make a first epoch ~1.4x faster: docs/DAEMON.md, \"Huge pages\")\n",
               s.arena_pages());
  }
  if (!s.arena_ready()) {
    fmt::print("arena: still mapping its pages (from start-up; items written meanwhile load slower)\n");
  }
  if (s.has_disk_cache()) {
    const v1::DiskCacheStatus& d = s.disk_cache();
    fmt::print("disk cache {}: {} of {}, {} items; {} of the {} loads read back from it, {} decoded; {} written, "
               "{} waiting{}{}\n",
               d.dir(), human_bytes(double(d.bytes())), human_bytes(double(d.capacity())), d.items(), s.disk_reads(),
               s.loads(), s.loads() - s.disk_reads(), d.written(), human_bytes(double(d.queued_bytes())),
               d.corrupt() ? fmt::format("; {} corrupt records dropped", d.corrupt()) : "",
               d.admitting() ? "" : "; not admitting: " + d.stopped());
  }
  fmt::print("\n{:<20} {:>10} {:>8} {:>7}  {}\n", "dataset", "items", "jobs", "L/D", "prep");
  for (const auto& d : s.datasets()) {
    fmt::print("{:<20} {:>10} {:>8} {:>7}  {}\n", d.name(), d.items(), d.active_jobs(),
               d.deliveries() == 0 ? std::string("-") : fmt::format("{:.3f}", ld_ratio(d)),
               d.prep());
  }
  print_reindexed(s.datasets());
  fmt::print("\n{:<20} {:<16} {:>6} {:>18} {:>10} {:>8}\n", "job", "dataset", "epoch", "epoch progress", "items/s", "queued");
  for (const auto& j : s.jobs()) {
    fmt::print("{:<20} {:<16} {:>6} {:>18} {:>10.0f} {:>8}\n", j.name(), j.dataset(), epoch_column(j),
               fmt::format("{}/{}", j.delivered_in_epoch(), j.subset_size()), j.items_per_second(), j.queued());
  }
  for (const auto& j : s.jobs()) {
    if (!j.augment().empty()) fmt::print("{} augments per item: {}\n", j.name(), j.augment());
  }
  if (watching) fmt::print("\n");
  std::fflush(stdout);
}

int run_status(const std::string& socket, bool json, double watch_seconds) {
  try {
    Client client(socket);
    const bool watching = watch_seconds > 0;
    for (;;) {
      print_status(client.status(), json, watching);
      if (!watching) return 0;
      if (std::ferror(stdout) || !std::cout) return 0;  // the reader went away (e.g. `| head`)
      std::this_thread::sleep_for(std::chrono::duration<double>(watch_seconds));
    }
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
}

// Whether process `pid` has exited (gone, or a zombie its parent has not reaped yet).
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
  if (f == nullptr) return true;
  char state = 0;
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
  std::string line(512, '\0');
  const size_t n = std::fread(line.data(), 1, line.size(), f);
  std::fclose(f);
  line.resize(n);
  const size_t paren = line.rfind(')');
  if (paren != std::string::npos && paren + 2 < line.size()) state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

int run_stop(const std::string& socket_arg, double timeout) {
  const std::string socket = socket_arg.empty() ? default_socket_path() : socket_arg;
  DaemonPeer peer{};
  try {
    peer = check_daemon_trusted(socket, socket != builtin_socket_path());
  } catch (const DaemonTrustError& e) {
    if (e.kind() == DaemonTrustError::kNoDaemon) {
      fmt::print("no Joader daemon at {}: nothing to stop\n", socket);
      return 0;
    }
    print_error(e);
    return 1;
  }
  if (peer.pid <= 0) {
    fmt::print(stderr, "error: the daemon at {} runs in another PID namespace (a container): stop it there\n", socket);
    return 1;
  }
  if (kill(peer.pid, SIGTERM) != 0) {
    if (errno == EPERM) {
      fmt::print(stderr, "error: the daemon at {} (pid {}) runs as {}: only that user or root can stop it\n", socket,
                 peer.pid, describe_user(peer.uid));
    } else {
      fmt::print(stderr, "error: cannot signal the daemon at {} (pid {}): {}\n", socket, peer.pid, std::strerror(errno));
    }
    return 1;
  }
  // The daemon ends its jobs (each is told why), removes its arena, then its socket, then exits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    bool listening = true;
    try {
      check_daemon_trusted(socket, true);
    } catch (const DaemonTrustError& e) {
      listening = e.kind() != DaemonTrustError::kNoDaemon;
    }
    if (!listening && process_gone(peer.pid)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fmt::print(stderr, "error: the daemon at {} (pid {}) did not stop within {:g} s of SIGTERM (see its log; "
                 "`kill -KILL {}` ends it, and the next daemon removes what it leaves)\n", socket, peer.pid, timeout,
                 peer.pid);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fmt::print("stopped the Joader daemon at {} (pid {})\n", socket, peer.pid);
  return 0;
}

void add_socket_option(CLI::App* cmd, std::string& socket) {
  cmd->add_option("--socket", socket, "The daemon's Unix socket (default: $JOADER_SOCKET, else $XDG_RUNTIME_DIR/joader.sock, else /tmp/joader-$UID/joader.sock)");
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  size_t pos = 0;
  double value;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (e.g. 512MiB, 2GiB)");
  }
  const std::string unit = text.substr(pos);
  static const std::pair<const char*, double> units[] = {
      {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0}, {"MiB", 1048576.0},
      {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
      {"TiB", 1099511627776.0}, {"TB", 1e12}};
  for (const auto& [name, factor] : units) {
    if (unit == name) {
      if (!(value >= 0) || !std::isfinite(value * factor)) break;
      return static_cast<uint64_t>(value * factor);
    }
  }
  throw std::invalid_argument("'" + text + "' is not a size (e.g. 512MiB, 2GiB)");
}

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the Joader daemon (stop it with Ctrl-C or SIGTERM)");
  add_socket_option(cmd, o->daemon.socket);
  cmd->add_option("--cache-size", o->cache_size,
                  "Shared-memory cache size, e.g. 512MiB, 2GiB; auto: a quarter of the RAM (or of the cgroup's memory "
                  "limit), at most 64GiB and half of the free space on /dev/shm")
      ->capture_default_str();
  cmd->add_option("--threads", o->daemon.engine.threads, "Loader threads that read and prepare items (default: one per core)")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("--policy", o->daemon.engine.policy, fmt::format("Cache policy: {}", fmt::join(daemon_policy_names(), ", ")))
      ->capture_default_str();
  cmd->add_option("--sampler", o->daemon.engine.sampler,
                  "dsa, or independent (no coupling: a baseline for benchmarks); biased-dsa is a deliberately "
                  "non-uniform control for the statistical tests, never for training")
      ->capture_default_str();
  cmd->add_option("--seed", o->daemon.engine.seed, "Seed the samplers (reproducible tests); default: a fresh random seed per dataset");
  cmd->add_option("--allow-group", o->allow_group,
                  "Also serve the members of GROUP (name or gid): socket 0660 and arena 0640 for that group");
  cmd->add_option("--data-root", o->data_root,
                  "Serve only files inside DIR (after following symlinks): sources elsewhere are refused");
  cmd->add_option("--metrics", o->metrics,
                  "Serve Prometheus metrics on GET /metrics at [HOST:]PORT (default host: 127.0.0.1; off unless given)");
  cmd->add_flag("--metrics-names", o->daemon.metrics_names,
                "Label the metrics of jobs and datasets with their names (default: their numbers, since anyone who "
                "can reach the port reads the labels)");
  cmd->add_flag("--group-reads-any-file", o->daemon.group_reads_any_file,
                "Serve --allow-group without --data-root: every member may then make the daemon read any file "
                "its owner can read");
  cmd->add_option("--register-timeout", o->daemon.register_timeout,
                  "Seconds a job connection may stay open without registering before it is closed")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--disk-cache", o->daemon.engine.disk_cache,
                  "Keep decoded datasets' prepared items in DIR on local disk, across runs: an item found there is "
                  "read back instead of read and decoded again (one daemon per DIR)");
  cmd->add_option("--disk-cache-size", o->disk_cache_size,
                  "Most bytes --disk-cache may hold, e.g. 200GiB; auto: half of what it holds and its filesystem's "
                  "free space at start")
      ->capture_default_str();
  cmd->add_option("--state", o->state,
                  "File keeping the dataset registrations across restarts (default: SOCKET.datasets.json; 'none': not kept)");
  cmd->add_option("--idle-exit", o->idle_exit,
                  "Exit after SECONDS with no job (0, the default: never; a daemon started by a loader uses "
                  "$JOADER_IDLE_EXIT, default 600)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->callback([o, &exit_code] { exit_code = run_serve(*o); });
}

void add_dataset_command(CLI::App& app, int& exit_code) {
  CLI::App* ds = app.add_subcommand("dataset", "Add, list or remove the daemon's datasets");
  ds->require_subcommand(1);

  auto add = std::make_shared<DatasetAddOptions>();
  CLI::App* a = ds->add_subcommand("add", "Index a source and register it under NAME");
  a->add_option("name", add->name, "Dataset name")->required();
  a->add_option("--source", add->source,
                 "imagefolder:PATH, lmdb:PATH, filelist:FILE, tar:GLOB or synthetic:COUNT[:WxH]; a relative PATH "
                 "is taken in the current directory")
      ->required();
  a->add_option("--resize", add->resize, "Decode, then resize the shorter side to S pixels (1..8192)")
      ->check(CLI::Range(1u, 8192u));
  a->add_option("--crop", add->crop,
                 "Decode, then center-crop C×C (uint8 HWC RGB; 1..8192). Without --crop and --raw, images are stored "
                 "decoded at their own (or --resize'd) size, for per-job augmentation")
      ->check(CLI::Range(1u, 8192u));
  a->add_flag("--raw", add->raw, "Pass the stored bytes through undecoded");
  a->add_option("--on-error", add->on_error, "A corrupt item fails the job ('fail') or is skipped ('skip')")->capture_default_str();
  add_socket_option(a, add->socket);
  a->callback([add, &exit_code] { exit_code = run_dataset_add(*add); });

  auto list_socket = std::make_shared<std::string>();
  auto list_json = std::make_shared<bool>(false);
  CLI::App* l = ds->add_subcommand("list", "List the datasets");
  l->add_flag("--json", *list_json, "Print JSON");
  add_socket_option(l, *list_socket);
  l->callback([list_socket, list_json, &exit_code] { exit_code = run_dataset_list(*list_socket, *list_json); });

  auto rm_socket = std::make_shared<std::string>();
  auto rm_name = std::make_shared<std::string>();
  CLI::App* r = ds->add_subcommand("rm", "Remove a dataset that has no active job");
  r->add_option("name", *rm_name, "Dataset name")->required();
  add_socket_option(r, *rm_socket);
  r->callback([rm_socket, rm_name, &exit_code] { exit_code = run_dataset_rm(*rm_socket, *rm_name); });
}

void add_stop_command(CLI::App& app, int& exit_code) {
  auto socket = std::make_shared<std::string>();
  auto timeout = std::make_shared<double>(30);
  CLI::App* cmd = app.add_subcommand(
      "stop", "Stop the daemon gracefully (SIGTERM to the process serving the socket) and wait until it is gone");
  add_socket_option(cmd, *socket);
  cmd->add_option("--timeout", *timeout, "Seconds to wait for it to exit")->capture_default_str()->check(
      CLI::Range(0.0, 86400.0));
  cmd->callback([socket, timeout, &exit_code] { exit_code = run_stop(*socket, *timeout); });
}

void add_job_command(CLI::App& app, int& exit_code) {
  CLI::App* job = app.add_subcommand("job", "End the daemon's jobs (see them with joader status)");
  job->require_subcommand(1);
  auto job_socket = std::make_shared<std::string>();
  auto job_name = std::make_shared<std::string>();
  CLI::App* jr = job->add_subcommand("rm", "End a job by name, e.g. a stale notebook loader that holds the cache");
  jr->add_option("name", *job_name, "Job name (as joader status shows it)")->required();
  add_socket_option(jr, *job_socket);
  jr->callback([job_socket, job_name, &exit_code] { exit_code = run_job_rm(*job_socket, *job_name); });
}

void add_status_command(CLI::App& app, int& exit_code) {
  auto socket = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("status", "Datasets, jobs, loads, deliveries, L/D and cache use of the daemon");
  auto watch = std::make_shared<double>(0.0);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->add_option("--watch", *watch,
                  "Print a snapshot every SECONDS until interrupted or the daemon stops (with --json: one JSON "
                  "object per line)")
      ->check(CLI::Range(0.01, 3600.0));
  add_socket_option(cmd, *socket);
  cmd->callback([socket, json, watch, &exit_code] { exit_code = run_status(*socket, *json, *watch); });
}

}  // namespace joader::cli
