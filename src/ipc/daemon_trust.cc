#include "ipc/daemon_trust.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace joader {
namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool contains(const std::vector<uid_t>& uids, uid_t uid) { return std::find(uids.begin(), uids.end(), uid) != uids.end(); }

// A directory that someone other than its owner may change: one could put a socket of theirs in it.
bool writable_by_others(const struct stat& st) { return (st.st_mode & 022) != 0; }
bool sticky(const struct stat& st) { return (st.st_mode & S_ISVTX) != 0; }

[[noreturn]] void untrusted(const std::string& socket, const std::string& why, const std::string& fix) {
  throw DaemonTrustError(DaemonTrustError::kUntrusted,
                         "refusing the daemon socket " + socket + ": " + why + ". " + fix);
}

}  // namespace

std::string describe_user(uid_t uid) {
  std::vector<char> buffer(16384);
  struct passwd pw{}, *found = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  }
  return "uid " + std::to_string(uid);
}

std::vector<uid_t> trusted_uids() {
  std::vector<uid_t> uids = {getuid(), 0};
  const char* env = std::getenv("JOADER_TRUST_USERS");
  if (env == nullptr) return uids;
  std::stringstream list(env);
  std::string name;
  while (std::getline(list, name, ',')) {
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name.empty()) continue;
    if (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const unsigned long uid = std::strtoul(name.c_str(), nullptr, 10);
      if (name.size() > 10 || uid > UINT_MAX - 1) {
        throw DaemonTrustError(DaemonTrustError::kUntrusted, "JOADER_TRUST_USERS: " + name + " is not a uid");
      }
      uids.push_back(static_cast<uid_t>(uid));
      continue;
    }
    std::vector<char> buffer(16384);
    struct passwd pw{}, *found = nullptr;
    if (getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
      throw DaemonTrustError(DaemonTrustError::kUntrusted,
                             "JOADER_TRUST_USERS: no user is called '" + name + "' on this machine");
    }
    uids.push_back(found->pw_uid);
  }
  return uids;
}

DaemonPeer check_daemon_trusted(const std::string& socket_path, bool chosen) {
  namespace fs = std::filesystem;
  const std::vector<uid_t> trusted = trusted_uids();
  const std::string you = describe_user(getuid());
  const std::string you_or_root = getuid() == 0 ? you : you + " or root";

  // Where the socket really is: a link may lead elsewhere, and the checks are of that place.
  char resolved_buffer[PATH_MAX];
  if (realpath(socket_path.c_str(), resolved_buffer) == nullptr) {
    const int err = errno;
    if (err == EACCES) {
      throw DaemonTrustError(DaemonTrustError::kNoPermission,
                             "permission denied: " + you + " may not reach " + socket_path +
                                 " (a directory on its way is closed to this user)");
    }
    throw DaemonTrustError(DaemonTrustError::kNoDaemon, "no socket at " + socket_path + ": " + std::strerror(err));
  }
  const fs::path socket(resolved_buffer);
  const fs::path dir = socket.parent_path();
  struct stat dir_st{}, sock_st{};
  if (stat(dir.c_str(), &dir_st) != 0 || lstat(socket.c_str(), &sock_st) != 0) {
    throw DaemonTrustError(DaemonTrustError::kNoDaemon, "cannot inspect " + socket.string() + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(sock_st.st_mode)) {
    throw DaemonTrustError(DaemonTrustError::kNoDaemon, socket.string() + " is not a socket");
  }

  // Who could have put the socket there.
  const std::string fix_default =
      "Remove that directory (or ask its owner to) and start your daemon again, or set JOADER_SOCKET to a socket "
      "in a directory of your own";
  if (!contains(trusted, dir_st.st_uid) && !chosen) {
    untrusted(socket_path,
              "its directory " + dir.string() + " belongs to " + describe_user(dir_st.st_uid) + ", not to " + you_or_root + ", so that user's daemon (or anything) may be listening in place of yours",
              fix_default + "; to use that user's daemon on purpose, set JOADER_TRUST_USERS=" +
                  std::to_string(dir_st.st_uid));
  }
  if (writable_by_others(dir_st)) {
    if (!sticky(dir_st)) {
      untrusted(socket_path,
                "its directory " + dir.string() + " (mode " + mode_text(dir_st.st_mode) + ", owner " +
                    describe_user(dir_st.st_uid) + ") may be written by other users, who could put their own socket there",
                "Make the directory private (chmod go-w " + dir.string() + ") or use a socket in a directory of your own");
    }
    // In a sticky directory nobody may replace another user's file, but anyone may create the name first.
    if (!contains(trusted, sock_st.st_uid)) {
      untrusted(socket_path,
                "it belongs to " + describe_user(sock_st.st_uid) + " in the shared directory " + dir.string() +
                    ", where any user may create it",
                "Use a socket in a directory of your own (JOADER_SOCKET), or set JOADER_TRUST_USERS=" +
                    std::to_string(sock_st.st_uid) + " to use that user's daemon on purpose");
    }
  }
  // A directory above it that others may write (and that is not sticky) lets them rename it away.
  for (fs::path above = dir.parent_path(); !above.empty(); above = above.parent_path()) {
    struct stat st{};
    if (stat(above.c_str(), &st) == 0 && writable_by_others(st) && !sticky(st)) {
      untrusted(socket_path,
                "the directory " + above.string() + " above it (mode " + mode_text(st.st_mode) +
                    ") may be written by other users, who could replace the socket's directory",
                "Use a socket in a directory of your own (JOADER_SOCKET)");
    }
    if (above == above.root_path()) break;
  }

  // Who listens there: the listener's credentials, read before anything is sent.
  struct sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket.string().size() >= sizeof addr.sun_path) {
    throw DaemonTrustError(DaemonTrustError::kNoDaemon, "the socket path " + socket.string() + " is too long (at most " +
                                                            std::to_string(sizeof addr.sun_path - 1) + " bytes)");
  }
  std::memcpy(addr.sun_path, socket.c_str(), socket.string().size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw DaemonTrustError(DaemonTrustError::kNoDaemon, std::string("socket(): ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    if (err == EACCES || err == EPERM) {
      throw DaemonTrustError(DaemonTrustError::kNoPermission,
                             "permission denied: " + you + " may not connect to " + socket_path +
                                 " (its owner, " + describe_user(sock_st.st_uid) +
                                 ", can let a group in with `joader serve --allow-group GROUP`)");
    }
    throw DaemonTrustError(DaemonTrustError::kNoDaemon, "nothing listens at " + socket_path + ": " + std::strerror(err));
  }
  struct ucred peer{};
  socklen_t len = sizeof peer;
  const int got = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len);
  const int err = errno;
  close(fd);
  if (got != 0) {
    throw DaemonTrustError(DaemonTrustError::kUntrusted,
                           "cannot read who listens at " + socket_path + ": " + std::strerror(err));
  }
  const bool owner_chosen = chosen && peer.uid == dir_st.st_uid && !writable_by_others(dir_st);
  if (!contains(trusted, peer.uid) && !owner_chosen) {
    untrusted(socket_path,
              "the process listening there (pid " + std::to_string(peer.pid) + ") runs as " + describe_user(peer.uid) +
                  ", not as " + you_or_root,
              fix_default + "; to use that user's daemon on purpose, set JOADER_TRUST_USERS=" + std::to_string(peer.uid));
  }
  return {peer.uid, peer.pid};
}

}  // namespace joader
