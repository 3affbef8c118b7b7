#include "server/service.h"

#include <thread>

namespace joader {
namespace {

grpc::StatusCode to_grpc(EngineError::Code code) {
  switch (code) {
    case EngineError::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case EngineError::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case EngineError::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case EngineError::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case EngineError::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case EngineError::kDataLoss: return grpc::StatusCode::DATA_LOSS;
    case EngineError::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status to_status(const EngineError& e) { return grpc::Status(to_grpc(e.code()), e.what()); }

}  // namespace

grpc::Status JoaderService::admit(const grpc::ServerContext* ctx) const {
  if (listener_ == nullptr) return grpc::Status::OK;
  const std::string refusal = listener_->refusal(ctx->peer());
  return refusal.empty() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::PERMISSION_DENIED, refusal);
}

grpc::Status JoaderService::AddDataset(grpc::ServerContext* ctx, const v1::AddDatasetRequest* req,
                                       grpc::ServerWriter<v1::AddDatasetProgress>* writer) {
  if (grpc::Status s = admit(ctx); !s.ok()) return s;
  try {
    v1::AddDatasetProgress msg;
    const v1::DatasetInfo info = engine_.add_dataset(*req, [ctx, writer](size_t n) {
      // Indexing a large folder stops when the client leaves or the daemon shuts down.
      if (ctx->IsCancelled()) throw EngineError(EngineError::kUnavailable, "indexing cancelled");
      v1::AddDatasetProgress p;
      p.set_indexed(n);
      writer->Write(p);
    });
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
  if (grpc::Status s = admit(ctx); !s.ok()) return s;
  for (const v1::DatasetInfo& d : engine_.list_datasets()) *reply->add_datasets() = d;
  return grpc::Status::OK;
}

grpc::Status JoaderService::RemoveDataset(grpc::ServerContext* ctx, const v1::RemoveDatasetRequest* req,
                                          v1::RemoveDatasetReply*) {
  if (grpc::Status s = admit(ctx); !s.ok()) return s;
  try {
    engine_.remove_dataset(req->name());
    return grpc::Status::OK;
  } catch (const EngineError& e) {
    return to_status(e);
  }
}

grpc::Status JoaderService::Status(grpc::ServerContext* ctx, const v1::StatusRequest*, v1::StatusReply* reply) {
  if (grpc::Status s = admit(ctx); !s.ok()) return s;
  *reply = engine_.status();
  return grpc::Status::OK;
}

grpc::Status JoaderService::Job(grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::JobReply, v1::JobRequest>* stream) {
  if (grpc::Status s = admit(ctx); !s.ok()) return s;
  v1::JobRequest first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client left before registering");
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message of a job stream must be Register");
  }
  v1::JobReply reply;
  Engine::JobId id;
  try {
    id = engine_.open_job(first.register_(), reply.mutable_registered());
  } catch (const EngineError& e) {
    return to_status(e);
  }
  if (!stream->Write(reply)) {
    engine_.close_job(id);
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client left");
  }
  // Acknowledgements arrive on their own thread; the end of the client's half of the stream (a
  // half-close, a crash, a kill) ends the job at once.
  std::thread acks([this, stream, id] {
    v1::JobRequest msg;
    while (stream->Read(&msg)) {
      if (!msg.has_ack()) continue;
      try {
        engine_.ack(id, msg.ack().seq(), msg.ack().wait_seconds());
      } catch (const std::exception&) {
        // an unknown sequence number (the batch was already released): nothing to undo
      }
    }
    engine_.close_job(id);
  });

  grpc::Status result = grpc::Status::OK;
  try {
    BatchOut b;
    while (engine_.next_batch(id, &b)) {
      reply.Clear();
      v1::Batch* out = reply.mutable_batch();
      out->set_seq(b.seq);
      out->set_epoch(b.epoch);
      out->set_last_of_epoch(b.last_of_epoch);
      out->mutable_ids()->Add(b.ids.begin(), b.ids.end());
      out->mutable_labels()->Add(b.labels.begin(), b.labels.end());
      out->mutable_offsets()->Add(b.offsets.begin(), b.offsets.end());
      out->mutable_lengths()->Add(b.lengths.begin(), b.lengths.end());
      out->mutable_widths()->Add(b.widths.begin(), b.widths.end());
      out->mutable_heights()->Add(b.heights.begin(), b.heights.end());
      out->mutable_extent_counts()->Add(b.extent_counts.begin(), b.extent_counts.end());
      out->mutable_extent_offsets()->Add(b.extent_offsets.begin(), b.extent_offsets.end());
      out->mutable_extent_lengths()->Add(b.extent_lengths.begin(), b.extent_lengths.end());
      if (!stream->Write(reply)) break;
    }
  } catch (const EngineError& e) {
    result = to_status(e);
  } catch (const std::exception& e) {
    result = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
  engine_.close_job(id);  // release pins and reservation now, not when the client half-closes
  reply.Clear();
  reply.mutable_end()->set_code(result.error_code());
  reply.mutable_end()->set_message(result.error_message());
  stream->Write(reply);  // the client answers End by half-closing, which ends the ack thread
  acks.join();
  engine_.close_job(id);
  return result;
}

}  // namespace joader
