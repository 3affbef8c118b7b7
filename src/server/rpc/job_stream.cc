#include "server/rpc/job_stream.h"

#include <cstdio>

#include "server/rpc/grpc_status.h"

namespace joader {

// One job's stream. States, in order: reading the Register (registered_ false); streaming batches
// (a write in flight at most, a read in flight until the client half-closes); End written
// (end_sent_); finished (Finish called, once). It owns itself (self_) until gRPC's OnDone.
class JobStream final : public grpc::ServerBidiReactor<v1::JobRequest, v1::JobReply> {
 public:
  JobStream(JobStreams& streams, uint64_t key, Caller caller)
      : streams_(streams), engine_(streams.engine()), key_(key), caller_(caller) {}

  void start(std::shared_ptr<JobStream> self, const grpc::Status& refusal) {
    self_ = std::move(self);
    if (!refusal.ok()) {
      finish_now(refusal);
      return;
    }
    StartRead(&request_);
  }

  // The delivery thread's (or a completed write's) turn: write the next batch, or End, if there
  // is one and no write is in flight.
  void pump() {
    {
      MutexLock lk(mu_);
      if (!registered_ || writing_ || end_sent_ || finished_) return;
      try {
        // The Engine writes the batch straight into the reply (no write is in flight).
        switch (engine_.poll_batch(id_, reply_.mutable_batch())) {
          case Engine::Poll::kWait:
            return;
          case Engine::Poll::kBatch:
            break;
          case Engine::Poll::kDone:
            queue_end(grpc::Status::OK);
            break;
        }
      } catch (const EngineError& e) {
        queue_end(to_status(e));
      } catch (const std::exception& e) {
        queue_end(grpc::Status(grpc::StatusCode::INTERNAL, e.what()));
      }
      writing_ = true;
    }
    StartWrite(&reply_);
  }

  // The registration timeout passed.
  void expire(std::chrono::milliseconds timeout) {
    {
      MutexLock lk(mu_);
      if (registered_ || finished_) return;
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(timeout.count()) / 1000.0);
    finish_now(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            std::string("no Register message within ") + seconds + " s of opening the job stream"));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      client_done();
      return;
    }
    bool registered_now = false;
    grpc::Status refusal;  // of the first message: not a Register, or one the Engine refused
    {
      MutexLock lk(mu_);
      if (finished_) return;
      if (registered_) {
        if (request_.has_ack()) {
          try {
            engine_.ack(id_, request_.ack().seq(), request_.ack().wait_seconds());
          } catch (const std::exception&) {
            // an unknown sequence number (the batch was already released): nothing to undo
          }
        }
      } else if (!request_.has_register_()) {
        refusal = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            "the first message of a job stream must be Register");
      } else {
        try {
          JobStreams* streams = &streams_;
          const uint64_t key = key_;
          id_ = engine_.open_job(request_.register_(), reply_.mutable_registered(),
                                 [streams, key] { streams->poke(key); }, caller_);
          registered_ = registered_now = true;
          writing_ = true;  // the Registered reply
        } catch (const EngineError& e) {
          refusal = to_status(e);
        }
      }
    }
    if (!refusal.ok()) {
      finish_now(refusal);
      return;
    }
    if (registered_now) StartWrite(&reply_);
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    bool finish = false, poll = false;
    grpc::Status status;  // copied under the lock: Finish is called outside it
    {
      MutexLock lk(mu_);
      writing_ = false;
      if (!ok) {
        // The client is gone: end the job now; its pending read fails too, and finishes the call.
        write_failed_ = true;
        if (!end_sent_) end_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client left");
        close_job();
        finish = read_closed_;
      } else if (end_sent_) {
        finish = read_closed_;  // otherwise the client's half-close (its answer to End) finishes
      } else {
        poll = true;
      }
      if (finish) finish = mark_finished();
      status = end_status_;
    }
    if (finish) Finish(status);
    if (poll) pump();
  }

  void OnCancel() override {
    MutexLock lk(mu_);
    close_job();  // release its pins and reservation at once; the failed read finishes the call
  }

  void OnDone() override {
    streams_.forget(key_);
    std::shared_ptr<JobStream> keep = std::move(self_);  // may delete this on return
  }

 private:
  // The client half-closed (its answer to End, or a job that stops early) or vanished.
  void client_done() {
    bool finish = false, poll = false;
    grpc::Status status;
    {
      MutexLock lk(mu_);
      read_closed_ = true;
      if (finished_) return;
      if (!registered_) {
        status = grpc::Status(grpc::StatusCode::CANCELLED, "the client left before registering");
        finish = mark_finished();
      } else {
        close_job();  // ends the job at once: the client will not acknowledge any more
        if (writing_) return;  // OnWriteDone finishes (or sends End and then finishes)
        if (end_sent_ || write_failed_) {
          status = end_status_;
          finish = mark_finished();
        } else {
          poll = true;  // writes End ("job closed")
        }
      }
    }
    if (finish) Finish(status);
    if (poll) pump();
  }

  void finish_now(const grpc::Status& status) {
    {
      MutexLock lk(mu_);
      if (!mark_finished()) return;
      close_job();
    }
    Finish(status);
  }

  bool mark_finished() JOADER_REQUIRES(mu_) {  // true the first time
    if (finished_) return false;
    finished_ = true;
    return true;
  }

  void close_job() JOADER_REQUIRES(mu_) {
    if (registered_ && !job_closed_) {
      job_closed_ = true;
      engine_.close_job(id_);
    }
  }

  void queue_end(const grpc::Status& status) JOADER_REQUIRES(mu_) {
    end_status_ = status;
    close_job();  // release pins and reservation now, not when the client half-closes
    reply_.Clear();
    reply_.mutable_end()->set_code(status.error_code());
    reply_.mutable_end()->set_message(status.error_message());
    end_sent_ = true;
  }

  JobStreams& streams_;
  Engine& engine_;
  const uint64_t key_;
  const Caller caller_;  // who opened the stream: owns its job
  std::shared_ptr<JobStream> self_;

  Mutex mu_;
  // The read and the write in flight belong to gRPC while in flight, not to the lock.
  v1::JobRequest request_;
  v1::JobReply reply_;
  Engine::JobId id_ JOADER_GUARDED_BY(mu_) = 0;
  bool registered_ JOADER_GUARDED_BY(mu_) = false, writing_ JOADER_GUARDED_BY(mu_) = false,
       end_sent_ JOADER_GUARDED_BY(mu_) = false, read_closed_ JOADER_GUARDED_BY(mu_) = false,
       write_failed_ JOADER_GUARDED_BY(mu_) = false, job_closed_ JOADER_GUARDED_BY(mu_) = false,
       finished_ JOADER_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ JOADER_GUARDED_BY(mu_);
};

JobStreams::JobStreams(Engine& engine, std::chrono::milliseconds register_timeout)
    : engine_(engine), register_timeout_(register_timeout), thread_([this] { run(); }) {}

JobStreams::~JobStreams() {
  {
    MutexLock lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

grpc::ServerBidiReactor<v1::JobRequest, v1::JobReply>* JobStreams::open(const grpc::Status& refusal, Caller caller) {
  uint64_t key;
  std::shared_ptr<JobStream> stream;
  {
    MutexLock lk(mu_);
    key = next_key_++;
    stream = std::make_shared<JobStream>(*this, key, caller);
    streams_[key] = stream;
    if (refusal.ok()) register_deadlines_.emplace(Clock::now() + register_timeout_, key);
  }
  cv_.notify_all();  // a new deadline
  stream->start(stream, refusal);
  return stream.get();
}

void JobStreams::poke(uint64_t key) {
  {
    MutexLock lk(mu_);
    if (!queued_.insert(key).second) return;
    queue_.push_back(key);
  }
  cv_.notify_one();
}

void JobStreams::forget(uint64_t key) {
  MutexLock lk(mu_);
  streams_.erase(key);
}

void JobStreams::run() {
  std::vector<std::shared_ptr<JobStream>> to_poll, to_expire;
  MutexLock lk(mu_);
  for (;;) {
    if (stopping_) return;
    const auto now = Clock::now();
    for (auto it = register_deadlines_.begin(); it != register_deadlines_.end() && it->first <= now;) {
      if (auto s = streams_.find(it->second); s != streams_.end()) to_expire.push_back(s->second);
      it = register_deadlines_.erase(it);
    }
    for (uint64_t key : queue_) {
      if (auto s = streams_.find(key); s != streams_.end()) to_poll.push_back(s->second);
    }
    queue_.clear();
    queued_.clear();
    if (to_poll.empty() && to_expire.empty()) {
      if (register_deadlines_.empty()) {
        cv_.wait(lk.native());
      } else {
        cv_.wait_until(lk.native(), register_deadlines_.begin()->first);
      }
      continue;
    }
    lk.unlock();
    for (auto& s : to_poll) s->pump();
    for (auto& s : to_expire) s->expire(register_timeout_);
    to_poll.clear();  // the last references may delete finished streams: outside the lock
    to_expire.clear();
    lk.lock();
  }
}

}  // namespace joader
