#include "server/rpc/listener.h"

#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>

#include "server/ownership.h"

namespace joader {
namespace {

std::string errno_text() { return std::strerror(errno); }

bool in_group(const PeerCred& peer, gid_t group) {
  if (peer.gid == group) return true;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(peer.uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

}  // namespace

std::string AccessPolicy::refusal(const PeerCred& peer) const {
  if (peer.uid == owner_ || peer.uid == 0) return "";
  if (group_ && in_group(peer, *group_)) return "";
  std::string why = "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) +
                    ") may not use this Joader daemon, which belongs to uid " + std::to_string(owner_);
  return why + (group_ ? " and serves group " + std::to_string(*group_) + " only"
                       : "; its owner can share it with `joader serve --allow-group GROUP`");
}

gid_t parse_group(const std::string& text) {
  gid_t gid = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), gid);
  if (ec == std::errc() && end == text.data() + text.size()) return gid;
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  if (getgrnam_r(text.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    throw std::invalid_argument("unknown group '" + text + "'");
  }
  return gr.gr_gid;
}

UnixListener::UnixListener(const std::string& path, AccessPolicy policy) : policy_(std::move(policy)) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("cannot create a Unix socket: " + errno_text());
  const mode_t old_umask = umask(0177);  // never, even for an instant, accessible to others
  const int bound = bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  umask(old_umask);
  auto fail = [&](const std::string& what) {
    const std::string text = what + " " + path + ": " + errno_text();
    close(fd_);
    fd_ = -1;
    throw std::runtime_error(text);
  };
  if (bound != 0) {
    errno = bind_errno;
    fail("cannot bind");
  }
  if (const auto group = policy_.group()) {
    if (chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) fail("cannot give the group access to");
    if (chmod(path.c_str(), 0660) != 0) fail("cannot chmod");
  }
  if (listen(fd_, SOMAXCONN) != 0) fail("cannot listen on");
}

UnixListener::~UnixListener() {
  stop();
  if (fd_ >= 0) close(fd_);
}

void UnixListener::start(grpc::Server* server) {
  thread_ = std::thread([this, server] { accept_loop(server); });
}

void UnixListener::stop() {
  if (!thread_.joinable()) return;
  shutdown(fd_, SHUT_RDWR);  // wakes accept() with an error
  thread_.join();
}

void UnixListener::accept_loop(grpc::Server* server) {
  for (;;) {
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // out of descriptors: retry
        continue;
      }
      return;  // stop(): the socket was shut down
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    struct stat st{};
    fstat(conn, &st);
    Connection c{static_cast<uid_t>(-1), st.st_dev, st.st_ino, ""};
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      c.refusal = "the daemon cannot read the peer's credentials: " + errno_text();
    } else {
      c.uid = cred.uid;
      c.refusal = policy_.refusal({cred.uid, cred.gid, cred.pid});
    }
    {
      MutexLock lk(mu_);
      // One user cannot take every descriptor of the daemon: past the cap, a connection is closed
      // before gRPC sees it (the client reads end of file).
      if (is_member(Caller{c.uid}, policy_.owner()) &&
          open_connections(c.uid) >= (c.refusal.empty() ? max_per_user_ : kMaxRefusedConnections)) {
        close(conn);
        continue;
      }
      // Descriptor numbers are reused only after gRPC closed the previous connection on it.
      connections_[conn] = std::move(c);
    }
    grpc::AddInsecureChannelFromFd(server, conn);  // gRPC owns and closes conn from now on
  }
}

size_t max_connections_per_user() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
  return std::clamp<size_t>(limit.rlim_cur / 4, kMaxRefusedConnections, 1024);
}

size_t UnixListener::open_connections(uid_t uid) {
  size_t n = 0;
  // Only this (the accept) thread adds records, and the connection being accepted has none yet.
  std::erase_if(connections_, [&](const auto& record) {
    const Connection& c = record.second;
    struct stat st{};
    if (fstat(record.first, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_dev != c.device || st.st_ino != c.inode)
      return true;
    n += c.uid == uid;
    return false;
  });
  return n;
}

std::string UnixListener::refusal(const std::string& grpc_peer, uid_t* uid) const {
  int fd = -1;
  constexpr std::string_view kPrefix = "fd:";
  if (grpc_peer.rfind(kPrefix, 0) == 0) {
    const char* begin = grpc_peer.data() + kPrefix.size();
    const char* end = grpc_peer.data() + grpc_peer.size();
    if (auto [p, ec] = std::from_chars(begin, end, fd); ec != std::errc() || p != end) fd = -1;
  }
  MutexLock lk(mu_);
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return "the daemon does not know this connection (" + grpc_peer + "): refused";
  if (uid != nullptr) *uid = it->second.uid;
  return it->second.refusal;
}

}  // namespace joader
