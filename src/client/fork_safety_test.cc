#include "client/fork_safety.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace joader {
namespace {

bool connected(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
}

// A socket pair's peer is the process that made it: made here, its ends stand for this process's
// connections to a "daemon" whose pid is ours, as seen from a child.
TEST(ForkSafety, AChildReplacesItsParentsDaemonConnectionsUnderTheSameNumbersAndKeepsItsOwnSockets) {
  int parents[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, parents), 0);
  const pid_t parent = getpid();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int own[2];  // the child's own pair: its peer is the child
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, own) != 0) _exit(10);
    note_daemon(parent);
    const int replaced = disconnect_inherited_daemon_sockets();
    if (replaced < 2) _exit(11);
    if (connected(parents[0]) || connected(parents[1])) _exit(12);  // replaced, not closed:
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(parents[0], SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) _exit(13);
    if (!connected(own[0]) || !connected(own[1])) _exit(14);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 no pair, 11 not replaced, 12 still connected, 13 number not a "
                                       "socket, 14 the child's own socket touched";
  // The parent's connection is the parent's still.
  ASSERT_EQ(write(parents[0], "x", 1), 1);
  char c = 0;
  EXPECT_EQ(read(parents[1], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  close(parents[0]);
  close(parents[1]);
}

TEST(ForkSafety, CountsTheJobStreamsOpenInTheProcess) {
  const int before = open_job_streams();
  note_stream_opened();
  note_stream_opened();
  EXPECT_EQ(open_job_streams(), before + 2);
  note_stream_closed();
  note_stream_closed();
  EXPECT_EQ(open_job_streams(), before);
}

}  // namespace
}  // namespace joader
