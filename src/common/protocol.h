// The version of the control protocol (proto/joader.proto) that this build's daemon and clients
// speak. Both sides use this one constant; a client of another version is refused at its first
// request with both numbers in the message. Raise it with any incompatible change to the protocol.
#pragma once

#include <cstdint>

namespace joader {

inline constexpr uint32_t kProtocolVersion = 2;

// The daemon sends a job at most this many batches that its client has not acknowledged: a
// consumer that stops (a training loop in its val pass) then holds no more than these, and the
// rest of its window can give its room to other jobs (docs/DAEMON.md, "Memory"). A client that
// asks for another batch while holding this many would wait forever: the C++ client refuses.
inline constexpr uint32_t kMaxUnacknowledged = 2;

}  // namespace joader
