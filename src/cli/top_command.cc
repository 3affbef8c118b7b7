#include "cli/top_command.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "client/client.h"
#include "client/report.h"

namespace joader::cli {
namespace {

std::atomic<bool> g_interrupted{false};

std::string bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

// The terminal in a mode where single key presses arrive without Enter and are not echoed; put
// back as it was on every way out (q, Ctrl-C, an error).
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    fmt::print("\x1b[?25l");  // hide the cursor
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    fmt::print("\x1b[?25h\n");
    std::fflush(stdout);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

struct Previous {
  std::chrono::steady_clock::time_point at;
  uint64_t loads = 0, deliveries = 0, disk_reads = 0, disk_written = 0;
  std::map<std::string, double> waits;  // job -> wait seconds
};

std::string screen(const std::string& socket, const v1::StatusReply& s, const Previous& prev, double interval) {
  const auto now = std::chrono::steady_clock::now();
  const double dt = prev.at.time_since_epoch().count() == 0 ? 0 : std::chrono::duration<double>(now - prev.at).count();
  auto rate = [&](uint64_t now_count, uint64_t before) { return dt > 0 ? double(now_count - before) / dt : 0.0; };
  const double looked_up = double(s.hits() + s.loads());
  std::string out = fmt::format("joader top — {}   up {:.0f} s   every {:.1f} s   q or Ctrl-C to quit\n\n", socket,
                     s.uptime_seconds(), interval);
  out += fmt::format("sharing   loads {}  deliveries {}  L/D {:.3f}  hit rate {:.1f} %   now: {:.0f} loads/s, "
                     "{:.0f} deliveries/s\n",
                     s.loads(), s.deliveries(), ld_ratio(s), looked_up > 0 ? 100.0 * double(s.hits()) / looked_up : 0.0,
                     rate(s.loads(), prev.loads), rate(s.deliveries(), prev.deliveries));
  std::string per_dataset;  // each dataset's own L/D, when several have served
  for (const v1::DatasetInfo& d : s.datasets()) {
    if (d.deliveries() == 0) continue;
    per_dataset += fmt::format("{}{} L/D {:.3f}", per_dataset.empty() ? "" : ", ", d.name(), ld_ratio(d));
  }
  if (s.datasets_size() > 1 && !per_dataset.empty()) out += "          " + per_dataset + "\n";
  out += fmt::format("cache     {} of {} ({:.0f} %), {} pinned, {} evictions, policy {}, {} loader threads\n\n",
                     bytes(double(s.cache_bytes())), bytes(double(s.cache_capacity())),
                     s.cache_capacity() ? 100.0 * double(s.cache_bytes()) / double(s.cache_capacity()) : 0.0,
                     bytes(double(s.pinned_bytes())), s.evictions(), s.policy(), s.loader_threads());
  if (s.has_disk_cache()) {
    const v1::DiskCacheStatus& d = s.disk_cache();
    out.insert(out.size() - 1,  // before the blank line
               fmt::format("disk      {} of {}, {} items; now: {:.0f} reads/s, {:.0f} decodes/s, {:.0f} writes/s, {} "
                           "waiting{}\n",
                           bytes(double(d.bytes())), bytes(double(d.capacity())), d.items(),
                           rate(s.disk_reads(), prev.disk_reads),
                           std::max(0.0, rate(s.loads(), prev.loads) - rate(s.disk_reads(), prev.disk_reads)),
                           rate(d.written(), prev.disk_written), bytes(double(d.queued_bytes())),
                           d.admitting() ? "" : ", not admitting: " + d.stopped()));
  }
  // Names whole, up to 48 characters (the columns widen to the longest).
  size_t job_width = 3, dataset_width = 7;
  for (const v1::JobStatus& j : s.jobs()) {
    job_width = std::max(job_width, std::min<size_t>(j.name().size(), 48));
    dataset_width = std::max(dataset_width, std::min<size_t>(j.dataset().size(), 48));
  }
  out += fmt::format("{:<{}.{}} {:<{}.{}} {:>5} {:>20} {:>9} {:>6} {:>7}\n", "JOB", job_width, job_width, "DATASET",
                     dataset_width, dataset_width, "EPOCH", "EPOCH PROGRESS", "ITEMS/S", "WAIT%", "QUEUED");
  for (const v1::JobStatus& j : s.jobs()) {
    const auto it = prev.waits.find(j.name());
    // Wait share: the part of the last interval the job's training loop spent waiting for data.
    const std::string wait = it == prev.waits.end() || dt <= 0
                                 ? "-"
                                 : fmt::format("{:.0f}", std::min(100.0, 100.0 * (j.wait_seconds() - it->second) / dt));
    const std::string progress =
        fmt::format("{}/{} ({:.0f} %)", j.delivered_in_epoch(), j.subset_size(),
                    j.subset_size() ? 100.0 * double(j.delivered_in_epoch()) / double(j.subset_size()) : 0.0);
    out += fmt::format("{:<{}.{}} {:<{}.{}} {:>5} {:>20} {:>9.0f} {:>6} {:>7}\n", j.name(), job_width, job_width,
                       j.dataset(), dataset_width, dataset_width, epoch_column(j), progress, j.items_per_second(),
                       wait, j.queued());
  }
  if (s.jobs().empty()) out += "(no jobs)\n";
  return out;
}

// Remembers a snapshot, for the rates of the next screen.
Previous remember(const v1::StatusReply& s) {
  Previous prev;
  prev.at = std::chrono::steady_clock::now();
  prev.loads = s.loads();
  prev.deliveries = s.deliveries();
  prev.disk_reads = s.disk_reads();
  prev.disk_written = s.disk_cache().written();
  for (const v1::JobStatus& j : s.jobs()) prev.waits[j.name()] = j.wait_seconds();
  return prev;
}

int run_top(const std::string& socket, double interval, bool once) {
  try {
    Client client(socket);
    if (once) {  // two snapshots an interval apart: the rates and WAIT% are over it
      const Previous first = remember(client.status());
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
      fmt::print("{}", screen(client.socket(), client.status(), first, interval));
      return 0;
    }
    struct sigaction sa{};
    sa.sa_handler = [](int) { g_interrupted = true; };
    sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: poll() returns at once
    sigaction(SIGTERM, &sa, nullptr);
    RawTerminal terminal;
    Previous prev;
    for (;;) {
      const v1::StatusReply s = client.status();
      fmt::print("\x1b[H\x1b[2J{}", screen(client.socket(), s, prev, interval));  // home, clear, draw
      std::fflush(stdout);
      prev = remember(s);
      const auto until = prev.at + std::chrono::duration<double>(interval);
      for (;;) {
        if (g_interrupted) return 0;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (poll(&p, 1, int(left.count())) > 0) {
          char c = 0;
          const ssize_t n = read(STDIN_FILENO, &c, 1);
          if (n == 0) break;  // stdin closed: keep refreshing until interrupted
          if (n == 1 && (c == 'q' || c == 'Q' || c == 3)) return 0;
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

void add_top_command(CLI::App& app, int& exit_code) {
  auto socket = std::make_shared<std::string>();
  auto interval = std::make_shared<double>(1.0);
  auto once = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("top", "A live view of the daemon: jobs (items/s, epoch progress, wait share), "
                                            "cache use, L/D and hit rate; q or Ctrl-C quits");
  cmd->add_option("--interval", *interval, "Seconds between refreshes")->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  cmd->add_flag("--once", *once, "Print one screen and exit (no terminal control): two snapshots --interval apart, the rates over it");
  cmd->add_option("--socket", *socket,
                  "The daemon's Unix socket (default: $JOADER_SOCKET, else $XDG_RUNTIME_DIR/joader.sock, else "
                  "/tmp/joader-$UID/joader.sock)");
  cmd->callback([socket, interval, once, &exit_code] { exit_code = run_top(*socket, *interval, *once); });
}

}  // namespace joader::cli
