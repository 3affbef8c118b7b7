#include "server/rpc/service.h"

#include "server/rpc/grpc_status.h"

namespace joader {
grpc::Status JoaderService::admit(const std::string& peer, Caller* caller) const {
  if (listener_ == nullptr) return grpc::Status::OK;
  const std::string refusal = listener_->refusal(peer, caller ? &caller->uid : nullptr);
  return refusal.empty() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::PERMISSION_DENIED, refusal);
}

grpc::Status JoaderService::AddDataset(grpc::ServerContext* ctx, const v1::AddDatasetRequest* req,
                                       grpc::ServerWriter<v1::AddDatasetProgress>* writer) {
  Caller caller;
  if (grpc::Status s = admit(ctx->peer(), &caller); !s.ok()) return s;
  try {
    v1::AddDatasetProgress msg;
    const v1::DatasetInfo info = engine_.add_dataset(*req, [ctx, writer](size_t n) {
      // Indexing a large folder stops when the client leaves or the daemon shuts down.
      if (ctx->IsCancelled()) throw EngineError(EngineError::kUnavailable, "indexing cancelled");
      v1::AddDatasetProgress p;
      p.set_indexed(n);
      writer->Write(p);
    }, caller);
    msg.set_indexed(info.items());
    *msg.mutable_dataset() = info;
    writer->Write(msg);
    return grpc::Status::OK;
  } catch (const EngineError& e) {
    return to_status(e);
  }
}

grpc::Status JoaderService::ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest*,
                                         v1::ListDatasetsReply* reply) {
  if (grpc::Status s = admit(ctx->peer()); !s.ok()) return s;
  for (const v1::DatasetInfo& d : engine_.list_datasets()) *reply->add_datasets() = d;
  return grpc::Status::OK;
}

grpc::Status JoaderService::RemoveDataset(grpc::ServerContext* ctx, const v1::RemoveDatasetRequest* req,
                                          v1::RemoveDatasetReply*) {
  Caller caller;
  if (grpc::Status s = admit(ctx->peer(), &caller); !s.ok()) return s;
  try {
    engine_.remove_dataset(req->name(), caller);
    return grpc::Status::OK;
  } catch (const EngineError& e) {
    return to_status(e);
  }
}

grpc::Status JoaderService::EndJob(grpc::ServerContext* ctx, const v1::EndJobRequest* req, v1::EndJobReply*) {
  Caller caller;
  if (grpc::Status s = admit(ctx->peer(), &caller); !s.ok()) return s;
  try {
    engine_.end_job(req->name(), caller);
    return grpc::Status::OK;
  } catch (const EngineError& e) {
    return to_status(e);
  }
}

grpc::Status JoaderService::Status(grpc::ServerContext* ctx, const v1::StatusRequest*, v1::StatusReply* reply) {
  if (grpc::Status s = admit(ctx->peer()); !s.ok()) return s;
  *reply = engine_.status();
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<v1::JobRequest, v1::JobReply>* JoaderService::Job(grpc::CallbackServerContext* ctx) {
  Caller caller;
  const grpc::Status admitted = admit(ctx->peer(), &caller);
  return streams_.open(admitted, caller);
}

}  // namespace joader
