// Job streams without a thread per job.
//
// A job is one bidirectional gRPC stream (proto/joader.proto, Joader.Job): Register, then Acks
// from the client; Registered, then Batches, then End from the daemon. The streams run on gRPC's
// callback API: no thread waits for a job. Their events arrive three ways:
//   - the client's messages and completed writes: gRPC calls JobStream's reactions on its own
//     (few) threads; an Ack goes straight to Engine::ack, a completed write polls for the next
//     batch;
//   - the Engine's side (a batch became ready, the job failed, the daemon is stopping): the
//     Engine calls the job's on_change with its lock held, which only queues the stream;
//     JobStreams' one delivery thread then polls the Engine (Engine::poll_batch) and starts the
//     write;
//   - time: a stream that has not registered within the registration timeout is ended
//     (DEADLINE_EXCEEDED), so idle connections cannot accumulate.
// So the daemon's thread count is its loaders, the dispatcher, this delivery thread and gRPC's
// own pools, whatever the number of jobs (tests/integration: 32 open jobs).
//
// Lock order: a JobStream's lock, then the Engine's; the Engine's, then JobStreams' queue lock.
// No gRPC call (StartWrite, StartRead, Finish) is made with a JobStream's lock held, since gRPC
// may run a reaction inline.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "joader.grpc.pb.h"
#include "common/mutex.h"
#include "server/engine.h"

namespace joader {

class JobStream;

// The delivery thread, and the registry of open streams it serves.
class JobStreams {
 public:
  using Clock = std::chrono::steady_clock;
  JobStreams(Engine& engine, std::chrono::milliseconds register_timeout);
  ~JobStreams();  // stops the thread; every stream must have ended (the gRPC server shut down)
  JobStreams(const JobStreams&) = delete;
  JobStreams& operator=(const JobStreams&) = delete;

  // A new stream for a Job call, already started (reading its Register), or finished at once
  // with `refusal` when that is not OK. gRPC owns it until its OnDone.
  grpc::ServerBidiReactor<v1::JobRequest, v1::JobReply>* open(const grpc::Status& refusal, Caller caller = {});

  Engine& engine() { return engine_; }

 private:
  friend class JobStream;
  void poke(uint64_t key);    // the stream may have a batch: poll it on the delivery thread
  void forget(uint64_t key);  // the stream is done
  void run();

  Engine& engine_;
  const std::chrono::milliseconds register_timeout_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ JOADER_GUARDED_BY(mu_) = false;
  uint64_t next_key_ JOADER_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, std::shared_ptr<JobStream>> streams_ JOADER_GUARDED_BY(mu_);
  std::vector<uint64_t> queue_ JOADER_GUARDED_BY(mu_);  // streams to poll, each once
  std::unordered_set<uint64_t> queued_ JOADER_GUARDED_BY(mu_);
  std::multimap<Clock::time_point, uint64_t> register_deadlines_ JOADER_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace joader
