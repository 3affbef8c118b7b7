#include "client/client.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "client/fork_safety.h"
#include "ipc/daemon_trust.h"
#include "ipc/paths.h"
#include "common/source_spec.h"
#include "joader.grpc.pb.h"
#include "ipc/shared_arena.h"

namespace joader {
namespace {

ClientError to_error(const grpc::Status& s, const std::string& socket) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && s.error_message().find("shutting down") == std::string::npos) {
    return ClientError(s.error_code(), "lost the Joader daemon at " + socket + ": " + s.error_message());
  }
  return ClientError(s.error_code(), s.error_message());
}

constexpr auto kInterruptSlice = std::chrono::milliseconds(50);
// How long close() waits for the daemon to confirm that a job ended before cancelling its call.
constexpr auto kClosePatience = std::chrono::milliseconds(500);

// call() (blocking on ctx) on a thread of its own, asking interrupt() every kInterruptSlice while it
// runs; when it says stop (or throws), the call is cancelled, and Interrupted (or its exception)
// thrown once the call has returned.
template <class Call>
auto interruptible(grpc::ClientContext& ctx, const InterruptCheck& interrupt, Call call) -> decltype(call()) {
  if (!interrupt) return call();
  std::packaged_task<decltype(call())()> task(std::move(call));
  auto done = task.get_future();
  std::thread worker(std::move(task));
  while (done.wait_for(kInterruptSlice) != std::future_status::ready) {
    std::exception_ptr stop;
    try {
      if (interrupt()) stop = std::make_exception_ptr(Interrupted());
    } catch (...) {
      stop = std::current_exception();
    }
    if (stop) {
      ctx.TryCancel();
      worker.join();
      std::rethrow_exception(stop);
    }
  }
  worker.join();
  return done.get();
}

}  // namespace

struct Client::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Joader::Stub> stub;
  std::map<std::string, std::weak_ptr<ArenaView>> arenas;
};

// One job's stream on gRPC's asynchronous API, driven by the thread that calls the Job: no thread
// of its own (none is inside gRPC while the job's owner is not, which a fork needs), and every
// wait is in slices of kInterruptSlice that ask the interrupt check. One read and one write at
// most in flight; acknowledgements queue behind the write in flight.
struct Job::Stream {
  enum Tag : intptr_t { kStarted = 1, kRead, kWrite, kWritesDone, kFinished };
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::JobRequest, v1::JobReply>> rw;
  std::string socket;
  InterruptCheck interrupt;
  bool started = false, start_ok = false;
  bool reading = false, read_done = false, read_ok = false;
  bool writing = false, write_failed = false, writes_done = false, finished = false;
  bool counted = false;  // in open_job_streams() (fork_safety.h) until finish()
  v1::JobReply incoming;
  v1::JobRequest outgoing;
  std::deque<v1::JobRequest> to_write;
  grpc::Status status;

  void handle(void* tag, bool ok) {
    switch (reinterpret_cast<intptr_t>(tag)) {
      case kStarted: started = true, start_ok = ok; break;
      case kRead: reading = false, read_done = true, read_ok = ok; break;
      case kWrite:
        writing = false;
        write_failed = write_failed || !ok;
        pump_writes();
        break;
      case kWritesDone: writes_done = true; break;
      case kFinished: finished = true; break;
    }
  }
  // Handles completions until done() holds; with `interruptible`, asks the interrupt check at
  // every empty slice and throws Interrupted when it says so (what is in flight stays in flight).
  template <class Done>
  void wait(Done done, bool interruptible = true) {
    while (!done()) {
      void* tag = nullptr;
      bool ok = false;
      switch (cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + kInterruptSlice)) {
        case grpc::CompletionQueue::GOT_EVENT: handle(tag, ok); break;
        case grpc::CompletionQueue::TIMEOUT:
          if (interruptible && interrupt && interrupt()) throw Interrupted();
          break;
        case grpc::CompletionQueue::SHUTDOWN: return;
      }
    }
  }
  // Handles completions until done() holds (true) or the deadline passes (false); not interruptible.
  template <class Done>
  bool wait_until(std::chrono::system_clock::time_point deadline, Done done) {
    while (!done()) {
      void* tag = nullptr;
      bool ok = false;
      switch (cq.AsyncNext(&tag, &ok, deadline)) {
        case grpc::CompletionQueue::GOT_EVENT: handle(tag, ok); break;
        case grpc::CompletionQueue::TIMEOUT: return done();
        case grpc::CompletionQueue::SHUTDOWN: return done();
      }
    }
    return true;
  }
  // Ends the call as a client that stops early: half-closes, so that the daemon ends the job and
  // answers End, reads what is still on its way, then finishes. When this returns true the daemon
  // has released the job (its status no longer lists it). False when the daemon did not answer
  // within `patience` (stopped, or gone): the call is then cancelled and ended.
  bool close_gracefully(std::chrono::milliseconds patience) {
    const auto deadline = std::chrono::system_clock::now() + patience;
    bool done = start_ok && wait_until(deadline, [&] { return !writing; });
    if (done) {
      rw->WritesDone(reinterpret_cast<void*>(kWritesDone));
      done = wait_until(deadline, [&] { return writes_done; });
    }
    while (done) {  // drain: what the daemon sent before it saw the half-close, then End
      if (!reading && !read_done) {
        reading = true;
        rw->Read(&incoming, reinterpret_cast<void*>(kRead));
      }
      done = wait_until(deadline, [&] { return read_done; });
      if (!done) break;
      read_done = false;
      if (!read_ok) break;
    }
    if (!done) context.TryCancel();
    finish(false);
    return done;
  }
  void pump_writes() {
    if (writing || write_failed || to_write.empty()) return;
    outgoing = std::move(to_write.front());
    to_write.pop_front();
    writing = true;
    rw->Write(outgoing, reinterpret_cast<void*>(kWrite));
  }
  void write(v1::JobRequest request) {
    to_write.push_back(std::move(request));
    pump_writes();
  }
  // The next reply; false when the stream has none.
  bool read(v1::JobReply* out) {
    if (!reading && !read_done) {
      reading = true;
      rw->Read(&incoming, reinterpret_cast<void*>(kRead));
    }
    wait([&] { return read_done; });
    read_done = false;
    if (!read_ok) return false;
    *out = std::move(incoming);
    return true;
  }
  // Ends the call (half-closing first when `half_close`) and returns its status; the queue is
  // drained, so that nothing is left in flight.
  grpc::Status finish(bool half_close) {
    if (!half_close) {  // nothing more is sent once the call ends; the write in flight completes
      to_write.clear();
      write_failed = true;
    }
    if (half_close && start_ok) {
      wait([&] { return !writing; }, false);
      rw->WritesDone(reinterpret_cast<void*>(kWritesDone));
      wait([&] { return writes_done; }, false);
    }
    if (start_ok) {
      rw->Finish(&status, reinterpret_cast<void*>(kFinished));
      wait([&] { return finished && !reading && !writing; }, false);
    }
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
    uncount();
    return status;
  }
  void uncount() {
    if (counted) note_stream_closed();
    counted = false;
  }
  ~Stream() { uncount(); }
};

Client::Client(std::string socket) : socket_(socket.empty() ? default_socket_path() : socket) {
  // Not one byte goes to a daemon this user cannot trust (src/ipc/daemon_trust.h).
  const bool chosen = socket_ != builtin_socket_path();
  try {
    const DaemonPeer peer = check_daemon_trusted(socket_, chosen);
    daemon_uid_ = peer.uid;
    note_daemon(peer.pid);
  } catch (const DaemonTrustError& e) {
    switch (e.kind()) {
      case DaemonTrustError::kNoPermission:
      case DaemonTrustError::kUntrusted: throw ClientError(grpc::StatusCode::PERMISSION_DENIED, e.what());
      case DaemonTrustError::kNoDaemon: {
        // JOADER_SOCKET is worth a hint only where neither the caller nor the variable chose the path.
        const bool chosen_by_default = socket.empty() && std::getenv("JOADER_SOCKET") == nullptr;
        throw ClientError(grpc::StatusCode::UNAVAILABLE,
                          "no Joader daemon at " + socket_ + " (start one with `joader serve" +
                              (chosen_by_default ? "`, or set JOADER_SOCKET to the socket of a running one)"
                                                 : " --socket " + socket_ + "`)"));
      }
    }
  }
  impl_ = std::make_unique<Impl>();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Its own connection: gRPC's global pool would hand a new Client the broken connection of an
  // earlier one to a daemon that has since restarted on the same socket (its first call would fail).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  impl_->channel = grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args);
  impl_->stub = v1::Joader::NewStub(impl_->channel);
}

Client::~Client() = default;

v1::DatasetInfo Client::add_dataset(v1::AddDatasetRequest request, const std::function<void(uint64_t)>& progress) {
  request.set_protocol_version(kProtocolVersion);
  request.set_source(absolute_source(request.source()));  // the caller's directory, not the daemon's
  grpc::ClientContext ctx;
  v1::DatasetInfo info;
  const grpc::Status s = interruptible(ctx, interrupt_, [&] {
    auto reader = impl_->stub->AddDataset(&ctx, request);
    v1::AddDatasetProgress msg;
    while (reader->Read(&msg)) {
      if (msg.has_dataset()) {
        info = msg.dataset();
      } else if (progress) {
        progress(msg.indexed());
      }
    }
    return reader->Finish();
  });
  if (!s.ok()) throw to_error(s, socket_);
  return info;
}

std::vector<v1::DatasetInfo> Client::list_datasets() {
  grpc::ClientContext ctx;
  v1::ListDatasetsReply reply;
  const grpc::Status s = interruptible(ctx, interrupt_, [&] { return impl_->stub->ListDatasets(&ctx, {}, &reply); });
  if (!s.ok()) throw to_error(s, socket_);
  return {reply.datasets().begin(), reply.datasets().end()};
}

void Client::remove_dataset(const std::string& name) {
  grpc::ClientContext ctx;
  v1::RemoveDatasetRequest req;
  req.set_name(name);
  v1::RemoveDatasetReply reply;
  const grpc::Status s = interruptible(ctx, interrupt_, [&] { return impl_->stub->RemoveDataset(&ctx, req, &reply); });
  if (!s.ok()) throw to_error(s, socket_);
}

void Client::end_job(const std::string& name) {
  grpc::ClientContext ctx;
  v1::EndJobRequest req;
  req.set_name(name);
  v1::EndJobReply reply;
  const grpc::Status s = interruptible(ctx, interrupt_, [&] { return impl_->stub->EndJob(&ctx, req, &reply); });
  if (!s.ok()) throw to_error(s, socket_);
}

v1::StatusReply Client::status() {
  grpc::ClientContext ctx;
  v1::StatusReply reply;
  const grpc::Status s = interruptible(ctx, interrupt_, [&] { return impl_->stub->Status(&ctx, {}, &reply); });
  if (!s.ok()) throw to_error(s, socket_);
  return reply;
}

std::unique_ptr<Job> Client::open_job(const JobOptions& o) {
  auto stream = std::make_unique<Job::Stream>();
  stream->socket = socket_;
  stream->interrupt = interrupt_;
  v1::JobRequest req;
  v1::Register* r = req.mutable_register_();
  r->set_protocol_version(o.protocol_version);
  r->set_dataset(o.dataset);
  r->set_name(o.name);
  r->mutable_ids()->Add(o.ids.begin(), o.ids.end());
  r->set_batch_size(o.batch_size);
  r->set_epochs(o.epochs);
  r->set_prefetch(o.prefetch);
  r->set_drop_last(o.drop_last);
  r->set_ordered(o.ordered);
  r->set_resume(o.resume);
  r->set_resume_epoch(o.resume_epoch);
  r->mutable_resume_consumed()->Add(o.resume_consumed.begin(), o.resume_consumed.end());
  for (const v1::AugmentOp& op : o.augment) *r->add_augment() = op;
  for (const std::string& name : o.python_augment) r->add_python_augment(name);
  v1::JobReply reply;
  bool registered = false;
  try {
    stream->rw = impl_->stub->PrepareAsyncJob(&stream->context, &stream->cq);
    note_stream_opened();
    stream->counted = true;
    stream->rw->StartCall(reinterpret_cast<void*>(Job::Stream::kStarted));
    stream->wait([&] { return stream->started; });
    if (stream->start_ok) {
      stream->write(std::move(req));
      registered = stream->read(&reply) && reply.has_registered();
    }
  } catch (...) {  // interrupted: the call is cancelled, and ended
    stream->context.TryCancel();
    stream->finish(false);
    throw;
  }
  if (!registered) {
    const grpc::Status s = stream->finish(true);
    throw to_error(s.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, "the daemon did not register the job") : s,
                   socket_);
  }
  const v1::Registered& reg = reply.registered();
  std::shared_ptr<ArenaView> arena = impl_->arenas[reg.arena()].lock();
  if (!arena) {
    try {
      arena = std::make_shared<ArenaView>(reg.arena(), reg.arena_size(), daemon_uid_);
    } catch (const std::runtime_error& e) {
      throw ClientError(grpc::StatusCode::FAILED_PRECONDITION, e.what());
    }
    impl_->arenas[reg.arena()] = arena;
  }
  return std::unique_ptr<Job>(new Job(std::move(stream), reg, std::move(arena)));
}

Job::Job(std::unique_ptr<Stream> stream, v1::Registered registered, std::shared_ptr<ArenaView> arena)
    : stream_(std::move(stream)), registered_(std::move(registered)), arena_(std::move(arena)) {}

Job::~Job() { close(); }

void Job::close() {
  if (!stream_ || finished_) return;
  finished_ = true;
  stream_->close_gracefully(kClosePatience);
}

bool Job::next(Batch* out) {
  if (failed_) throw *failed_;
  if (finished_) return false;
  if (unacknowledged_.size() >= kMaxUnacknowledged) {  // the daemon would send nothing more: never wait forever
    throw ClientError(grpc::StatusCode::FAILED_PRECONDITION,
                      "job " + registered_.job() + ": " + std::to_string(unacknowledged_.size()) +
                          " batches are not acknowledged; acknowledge one before asking for the next (the daemon "
                          "sends at most " + std::to_string(kMaxUnacknowledged) + " unacknowledged batches)");
  }
  v1::JobReply reply;
  const auto asked = std::chrono::steady_clock::now();
  const bool got = stream_->read(&reply);
  out->wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  if (!got) {
    const grpc::Status s = stream_->finish(false);
    fail(to_error(s.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended unexpectedly") : s,
                  stream_->socket));
  }
  if (reply.has_end()) {
    finished_ = true;
    stream_->finish(true);
    if (reply.end().code() != 0) fail(ClientError(reply.end().code(), reply.end().message()));
    return false;
  }
  const v1::Batch& b = reply.batch();
  // The daemon numbers a job's batches 0, 1, 2, ... on its stream: a gap is a batch the
  // connection lost, which must not pass as a short epoch.
  if (b.seq() != next_seq_) {
    end_stream();
    fail(ClientError(grpc::StatusCode::ABORTED,
                     "job " + registered_.job() + ": batch " + std::to_string(b.seq()) + " arrived where batch " +
                         std::to_string(next_seq_) + " was due: its connection lost " +
                         std::to_string(b.seq() - next_seq_) + " batch(es)"));
  }
  try {
    unpack(b, out);
  } catch (const ClientError& e) {
    end_stream();
    fail(e);
  }
  ++next_seq_;
  unacknowledged_.insert(b.seq());
  return true;
}

void Job::end_stream() {
  stream_->context.TryCancel();
  stream_->finish(false);
}

void Job::fail(const ClientError& error) {
  finished_ = true;
  failed_ = error;
  throw error;
}

void Job::unpack(const v1::Batch& b, Batch* out) {
  out->seq = b.seq();
  out->epoch = b.epoch();
  out->last_of_epoch = b.last_of_epoch();
  out->skipped.assign(b.skipped().begin(), b.skipped().end());
  out->items.clear();
  out->items.reserve(b.ids_size());
  const auto bad = [](const char* what) { return ClientError(grpc::StatusCode::INTERNAL, what); };
  const bool split = b.extent_counts_size() > 0;
  if (split && b.extent_counts_size() != b.ids_size()) throw bad("extent counts do not match the items");
  // First which items are copied rather than read in place, and how many bytes that takes.
  copied_.assign(static_cast<size_t>(b.ids_size()), false);
  uint64_t copy_bytes = 0;
  const uint64_t size = arena_->size();
  for (int i = 0; i < b.ids_size(); ++i) {
    const uint32_t parts = split ? b.extent_counts(i) : 1;
    if (b.lengths(i) > size || (parts <= 1 && b.offsets(i) > size - b.lengths(i))) {
      throw bad("item descriptor outside the arena");
    }
    copied_[i] = parts > 1 || (copies_ && arena_->reads().copy(b.offsets(i), b.lengths(i)));
    if (copied_[i]) copy_bytes += b.lengths(i);
  }
  if (copy_bytes > out->copies_capacity) {
    out->copies = std::make_unique_for_overwrite<uint8_t[]>(copy_bytes);
    out->copies_capacity = copy_bytes;
  }
  // Once copying has stopped (ArenaReads: every page read often enough), the buffer is given back;
  // not at the first batch without copies, which may come between two with.
  uncopied_batches_ = copy_bytes == 0 ? uncopied_batches_ + 1 : 0;
  if (uncopied_batches_ >= 16 && out->copies_capacity > 0) {
    out->copies.reset();
    out->copies_capacity = 0;
  }
  uint8_t* copy_to = out->copies.get();
  int extent = 0;
  for (int i = 0; i < b.ids_size(); ++i) {
    const uint32_t parts = split ? b.extent_counts(i) : 1;
    ItemView item{b.ids(i), b.labels(i), arena_->data() + b.offsets(i), b.lengths(i)};
    if (parts > 1) {  // copy the item's blocks together
      uint64_t done = 0;
      for (uint32_t k = 0; k < parts; ++k, ++extent) {
        if (extent >= b.extent_offsets_size() || extent >= b.extent_lengths_size()) throw bad("missing extents");
        const uint64_t at = b.extent_offsets(extent), n = std::min(b.extent_lengths(extent), item.size - done);
        if (at > size || n > size - at) throw bad("item extent outside the arena");
        std::memcpy(copy_to + done, arena_->data() + at, n);
        done += n;
      }
      if (done != item.size) throw bad("item extents shorter than the item");
    } else {
      extent += split ? 1 : 0;
      if (copied_[i]) {
        try {
          arena_->copy(b.offsets(i), item.size, copy_to);
        } catch (const std::runtime_error& e) {
          throw ClientError(grpc::StatusCode::INTERNAL, e.what());
        }
      }
    }
    if (copied_[i]) {
      item.data = copy_to;
      copy_to += item.size;
    }
    if (i < b.widths_size() && i < b.heights_size()) {
      item.width = b.widths(i);
      item.height = b.heights(i);
      if (uint64_t{item.width} * item.height * 3 != item.size) throw bad("item size does not match its image size");
    }
    out->items.push_back(item);
  }
}

void Job::ack(const Batch& batch) {
  if (finished_) return;
  if (unacknowledged_.erase(batch.seq) == 0) return;  // acknowledged already, or not this job's
  v1::JobRequest req;
  req.mutable_ack()->set_seq(batch.seq);
  req.mutable_ack()->set_wait_seconds(batch.wait_seconds);
  wait_seconds_ += batch.wait_seconds;
  stream_->write(std::move(req));
  // Until it is on its way, as the blocking API's Write was: an ack left queued would wait for the
  // next call (or gRPC's backup poller) and keep the batch pinned in the daemon meanwhile.
  stream_->wait([&] { return !stream_->writing; }, false);
}

}  // namespace joader
