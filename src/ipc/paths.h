// Where the daemon's socket lives (docs/DAEMON.md): $JOADER_SOCKET if set, else
// $XDG_RUNTIME_DIR/joader.sock, else /tmp/joader-$UID/joader.sock.
#pragma once

#include <string>

namespace joader {

std::string default_socket_path();
// The default without $JOADER_SOCKET: $XDG_RUNTIME_DIR/joader.sock, else /tmp/joader-$UID/joader.sock.
// A socket anywhere else was chosen by the user (src/ipc/daemon_trust.h).
std::string builtin_socket_path();

// Creates the socket's parent directory 0700 if missing; throws std::runtime_error if it exists
// but belongs to another user or is open to group/others (someone else could swap the socket).
void prepare_socket_dir(const std::string& socket_path);

}  // namespace joader
