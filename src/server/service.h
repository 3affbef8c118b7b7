// The gRPC face of the Engine (proto/joader.proto): translates requests and EngineErrors.
#pragma once

#include <grpcpp/grpcpp.h>

#include "joader.grpc.pb.h"
#include "server/engine.h"
#include "server/listener.h"

namespace joader {

class JoaderService final : public v1::Joader::Service {
 public:
  // With a listener, every call is first checked against its peer's credentials; without one
  // (in-process use: tests, fuzzing) every call is admitted.
  explicit JoaderService(Engine& engine, const UnixListener* listener = nullptr)
      : engine_(engine), listener_(listener) {}

  grpc::Status AddDataset(grpc::ServerContext* ctx, const v1::AddDatasetRequest* req,
                          grpc::ServerWriter<v1::AddDatasetProgress>* writer) override;
  grpc::Status ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest* req,
                            v1::ListDatasetsReply* reply) override;
  grpc::Status RemoveDataset(grpc::ServerContext* ctx, const v1::RemoveDatasetRequest* req,
                             v1::RemoveDatasetReply* reply) override;
  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest* req, v1::StatusReply* reply) override;
  grpc::Status Job(grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::JobReply, v1::JobRequest>* stream) override;

 private:
  grpc::Status admit(const grpc::ServerContext* ctx) const;

  Engine& engine_;
  const UnixListener* listener_;
};

}  // namespace joader
