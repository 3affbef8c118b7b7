// Which daemon a client talks to (docs/SECURITY.md, "Which daemon a client trusts").
//
// Before a client sends a single byte to a socket, it checks who could have put the socket there
// and who listens on it: the socket's directory must belong to a trusted user and be writable by
// nobody else (a sticky directory such as /tmp only where the socket file itself belongs to a
// trusted user), and the listening process's credentials (SO_PEERCRED) must be a trusted user's.
// Trusted: this user, root, and the users named in $JOADER_TRUST_USERS (comma-separated names or
// uids). A path the user chose (--socket, $JOADER_SOCKET, Client(socket=...)) rather than the
// default one also trusts the owner of its private directory: choosing /run/joader/joader.sock
// (a directory of the system user `joader`, 0750) is choosing joader's daemon. Another user who
// creates the default /tmp/joader-$UID first is refused by name, with the fix.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace joader {

class DaemonTrustError : public std::runtime_error {
 public:
  enum Kind { kNoDaemon, kNoPermission, kUntrusted };
  DaemonTrustError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// This user, root, and $JOADER_TRUST_USERS (an unknown name there is an error, not ignored).
std::vector<uid_t> trusted_uids();

// "alice (uid 1000)", or "uid 1000" for a uid without a name.
std::string describe_user(uid_t uid);

// Who listens at a daemon socket (SO_PEERCRED of a connection to it).
struct DaemonPeer {
  uid_t uid;  // owns the daemon's arena
  pid_t pid;  // recognises this process's connections to it after a fork (fork_safety.h)
};

// Checks the socket at `socket_path` as the header says and returns who listens there. `chosen`: the path was given by the user rather than being the default. The check
// connects once (and sends nothing) to read the listener's credentials. Throws DaemonTrustError:
// kNoDaemon when nothing listens there, kNoPermission when this user may not reach it, kUntrusted
// when it refuses (the message names the owner and the fix).
DaemonPeer check_daemon_trusted(const std::string& socket_path, bool chosen);

}  // namespace joader
