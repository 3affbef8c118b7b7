// EngineError → the gRPC status its caller receives.
#pragma once

#include <grpcpp/grpcpp.h>

#include "server/engine_error.h"

namespace joader {

inline grpc::StatusCode to_grpc(EngineError::Code code) {
  switch (code) {
    case EngineError::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case EngineError::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case EngineError::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case EngineError::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case EngineError::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case EngineError::kDataLoss: return grpc::StatusCode::DATA_LOSS;
    case EngineError::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case EngineError::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
  }
  return grpc::StatusCode::UNKNOWN;
}

inline grpc::Status to_status(const EngineError& e) { return grpc::Status(to_grpc(e.code()), e.what()); }

}  // namespace joader
