#include "client/fork_safety.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <vector>

namespace joader {
namespace {

std::atomic<int> open_streams{0};

// The daemons' pids, most recent first wins a slot; a process rarely talks to more than one or two.
constexpr size_t kDaemonSlots = 16;
std::array<std::atomic<pid_t>, kDaemonSlots> daemon_pids{};
std::atomic<size_t> next_slot{0};

bool is_daemon(pid_t pid) {
  if (pid <= 0) return false;
  for (const auto& slot : daemon_pids) {
    if (slot.load() == pid) return true;
  }
  return false;
}

}  // namespace

void note_stream_opened() { open_streams.fetch_add(1); }
void note_stream_closed() { open_streams.fetch_sub(1); }
int open_job_streams() { return open_streams.load(); }

void note_daemon(pid_t pid) {
  if (is_daemon(pid)) return;
  daemon_pids[next_slot.fetch_add(1) % kDaemonSlots].store(pid);
}

int disconnect_inherited_daemon_sockets() {
  std::vector<int> connected;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int own = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    struct stat st{};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int domain = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) continue;
    struct ucred peer{};
    len = sizeof peer;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) continue;
    if (is_daemon(peer.pid)) connected.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  int replaced = 0;
  for (const int fd : connected) {
    const int fresh = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fresh < 0) continue;
    if (dup3(fresh, fd, O_CLOEXEC) == fd) ++replaced;
    close(fresh);
  }
  return replaced;
}

}  // namespace joader
