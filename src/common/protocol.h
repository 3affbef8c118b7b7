// The version of the control protocol (proto/joader.proto) that this build's daemon and clients
// speak. Both sides use this one constant; a client of another version is refused at its first
// request with both numbers in the message. Raise it with any incompatible change to the protocol.
#pragma once

#include <cstdint>

namespace joader {

inline constexpr uint32_t kProtocolVersion = 1;

}  // namespace joader
