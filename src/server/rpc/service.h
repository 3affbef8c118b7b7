// The gRPC face of the Engine (proto/joader.proto): translates requests and EngineErrors.
#pragma once

#include <grpcpp/grpcpp.h>

#include "joader.grpc.pb.h"
#include "server/engine.h"
#include "server/rpc/job_stream.h"
#include "server/rpc/listener.h"

namespace joader {

// Control calls (AddDataset, ListDatasets, RemoveDataset, Status, EndJob) are synchronous handlers; the
// Job stream uses gRPC's callback API through JobStreams, so that no thread waits per job.
class JoaderService final : public v1::Joader::WithCallbackMethod_Job<v1::Joader::Service> {
 public:
  // With a listener, every call is first checked against its peer's credentials; without one
  // (in-process use: tests, fuzzing) every call is admitted. A job stream that sends no Register
  // within register_timeout (DaemonOptions::register_timeout) is ended.
  JoaderService(Engine& engine, const UnixListener* listener, std::chrono::milliseconds register_timeout)
      : engine_(engine), listener_(listener), streams_(engine, register_timeout) {}

  grpc::Status AddDataset(grpc::ServerContext* ctx, const v1::AddDatasetRequest* req,
                          grpc::ServerWriter<v1::AddDatasetProgress>* writer) override;
  grpc::Status ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest* req,
                            v1::ListDatasetsReply* reply) override;
  grpc::Status RemoveDataset(grpc::ServerContext* ctx, const v1::RemoveDatasetRequest* req,
                             v1::RemoveDatasetReply* reply) override;
  grpc::Status EndJob(grpc::ServerContext* ctx, const v1::EndJobRequest* req, v1::EndJobReply* reply) override;
  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest* req, v1::StatusReply* reply) override;
  grpc::ServerBidiReactor<v1::JobRequest, v1::JobReply>* Job(grpc::CallbackServerContext* ctx) override;

 private:
  // OK if the peer may use the daemon (its uid then in *caller), else PERMISSION_DENIED saying why.
  grpc::Status admit(const std::string& peer, Caller* caller = nullptr) const;

  Engine& engine_;
  const UnixListener* listener_;
  JobStreams streams_;  // destroyed first: after the server has shut down, before the Engine
};

}  // namespace joader
