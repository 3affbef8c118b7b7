// EngineError: an error for a client of the daemon's core — a gRPC-like code and a one-line
// message in the words of the request it answers (rpc/grpc_status.h maps the code).
#pragma once

#include <stdexcept>
#include <string>

namespace joader {

class EngineError : public std::runtime_error {
 public:
  enum Code { kInvalidArgument, kNotFound, kAlreadyExists, kFailedPrecondition, kResourceExhausted, kDataLoss, kUnavailable,
              kPermissionDenied };
  EngineError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

}  // namespace joader
