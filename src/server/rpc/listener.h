// The daemon's Unix socket, accepted by Joader itself rather than by gRPC, so that every
// connection's peer credentials (SO_PEERCRED: uid, gid, pid) are known before gRPC sees a byte.
// Connections are then handed to gRPC (grpc::AddInsecureChannelFromFd), whose peer string for
// them is "fd:N"; the handlers look the credentials up by that string and refuse peers the
// AccessPolicy does not allow, with a PERMISSION_DENIED status that names the reason.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"

namespace grpc {
class Server;
}

namespace joader {

struct PeerCred {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

// Who may use the daemon: the user who runs it, root (who can read the arena and the files
// anyway), and, if configured, the members of one group (primary or supplementary).
class AccessPolicy {
 public:
  AccessPolicy(uid_t owner, std::optional<gid_t> group) : owner_(owner), group_(group) {}
  // Empty if `peer` may connect, else why not (one sentence for the client).
  std::string refusal(const PeerCred& peer) const;
  std::optional<gid_t> group() const { return group_; }
  uid_t owner() const { return owner_; }

 private:
  uid_t owner_;
  std::optional<gid_t> group_;
};

// Resolves a group name or a numeric gid; throws std::invalid_argument for unknown groups.
gid_t parse_group(const std::string& text);

// Connections open at once per uid, beyond which new ones are closed at accept: a uid the policy
// refuses gets a few (to be told why), an admitted one other than the owner and root a quarter of
// the process's descriptor limit (RLIMIT_NOFILE, read when the listener is made; `joader serve`
// raises it to its hard limit first) and at most 1024, so that no one member takes them all.
inline constexpr size_t kMaxRefusedConnections = 8;
size_t max_connections_per_user();

class UnixListener {
 public:
  // Binds and listens at `path` (which must not exist): the socket is 0600, or 0660 owned by
  // policy.group() when one is set. Throws std::runtime_error with the reason.
  UnixListener(const std::string& path, AccessPolicy policy);
  ~UnixListener();  // stops accepting; does not unlink the path
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  // Starts the accept thread; each connection goes to `server`.
  void start(grpc::Server* server);
  void stop();

  // Empty if the connection named by gRPC's peer string may use the daemon, else the refusal.
  // Peers that are not connections of this listener are refused (fail closed). `uid`, if given,
  // receives the peer's uid when it is admitted (what it may remove or end depends on it). A call
  // is looked up by its connection's descriptor: gRPC keeps a connection's descriptor open while
  // any call on it lives (the call holds its stream, the stream its transport, the transport the
  // descriptor), so the number cannot name another peer's connection meanwhile.
  std::string refusal(const std::string& grpc_peer, uid_t* uid = nullptr) const;

 private:
  void accept_loop(grpc::Server* server);

  AccessPolicy policy_;
  int fd_ = -1;
  std::thread thread_;
  mutable Mutex mu_;
  struct Connection {
    uid_t uid;
    dev_t device;         // with inode: the socket, which tells a live connection from a closed
    ino_t inode;          // one whose descriptor number was reused
    std::string refusal;  // empty: admitted
  };
  // How many connections of `uid` are still open (gRPC closes them: a closed one's descriptor is
  // invalid or names another file); forgets the closed ones it finds.
  size_t open_connections(uid_t uid) JOADER_REQUIRES(mu_);
  const size_t max_per_user_ = max_connections_per_user();
  std::map<int, Connection> connections_ JOADER_GUARDED_BY(mu_);  // by connection fd, set at accept
};

}  // namespace joader
