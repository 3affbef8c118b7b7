// What a fork() of a process that talks to Joader daemons must get right (docs/PYTHON.md, "Forks").
//
// A child shares its parent's sockets, the connections to the daemon among them. Where gRPC's fork
// handlers restart gRPC in the child (grpc_postfork_child), the child's copy of the parent's
// channel polls that shared socket and reads bytes the daemon sent to the parent: the parent's
// stream then misses a batch, or stalls for good waiting for bytes another process took (issue 41:
// 4 of 4 processes whose torch DataLoader forked workers each epoch stalled within 30 epochs). So:
// - a child never keeps its parent's connections to a daemon (disconnect_inherited_daemon_sockets);
//   this also lets the daemon see a killed parent's jobs end while its children live on;
// - gRPC's handlers, which stop gRPC's threads for the fork and restart them on both sides, are used
//   only while no job stream is open: a receiving stream is never paused across a fork, and the
//   child of a process with an open job does not use Joader (its copy of gRPC has no threads).
//
// All of this is lock-free: a child may be forked while another thread is anywhere in here.
#pragma once

#include <sys/types.h>

namespace joader {

// Job streams open in this process: from Client::open_job until the stream has ended.
void note_stream_opened();
void note_stream_closed();
int open_job_streams();

// Remembers the pid of a daemon this process connects to (the listener's SO_PEERCRED).
void note_daemon(pid_t pid);

// For a forked child, before its copy of gRPC runs again: every socket connected to a daemon that
// note_daemon() named is replaced by a new, unconnected socket under the same descriptor number
// (gRPC's copy of the connection then fails on its own descriptor, and nothing in the child reaches
// the parent's connection). Returns how many were replaced.
int disconnect_inherited_daemon_sockets();

}  // namespace joader
