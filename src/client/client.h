// The C++ client of the Joader daemon: datasets, status, and jobs whose batches are read in place
// from the daemon's shared-memory arena (mapped read-only). client/batch_builder.h makes training
// batches of them (augmented, float, NCHW); the Python package wraps both.
//
//   joader::Client client;                                  // $JOADER_SOCKET or the default path
//   auto job = client.open_job({.dataset = "imagenet", .batch_size = 256, .epochs = 90});
//   joader::Batch b;
//   while (job->next(&b)) { use(b.items); job->ack(b); }  // items valid until ack or the next next(&b)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/types.h>

#include <grpcpp/support/status_code_enum.h>

#include "common/protocol.h"
#include "joader.pb.h"

namespace joader {

// A failed call: `code` is the gRPC status code (e.g. 5 NOT_FOUND, 14 UNAVAILABLE), the message
// one line for the user.
class ClientError : public std::runtime_error {
 public:
  ClientError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ClientError(grpc::StatusCode code, const std::string& message) : ClientError(static_cast<int>(code), message) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Thrown by a blocking call that the client's interrupt check stopped (see Client::set_interrupt);
// the call was cancelled.
class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted"; }
};

// Asked about every 50 ms while a call blocks: true (or an exception) stops the call.
using InterruptCheck = std::function<bool()>;

struct JobOptions {
  std::string dataset;
  std::string name;                // default: chosen by the daemon
  std::vector<uint32_t> ids;       // the subset; empty = every item
  uint32_t batch_size = 1;
  uint32_t epochs = 1;             // 0 = unbounded
  uint32_t prefetch = 4;           // batches decided ahead
  bool drop_last = false;
  bool ordered = false;            // each epoch in the order of ids (torch's shuffle=False)
  // Resume mid-epoch: start in `resume_epoch` with `resume_consumed` already consumed.
  bool resume = false;
  uint32_t resume_epoch = 0;
  std::vector<uint32_t> resume_consumed;
  // Per-delivery augmentation the client will apply (the daemon checks it and shows it in status).
  std::vector<v1::AugmentOp> augment;
  std::vector<std::string> python_augment;  // the names of the transforms it runs in Python after those
  uint32_t protocol_version = kProtocolVersion;  // tests only: to check the daemon refuses others
};

struct ItemView {
  uint32_t id;
  int64_t label;
  // In the arena or in the Batch's copies: valid until the batch is acknowledged, or the Batch is
  // passed to next() again or destroyed, whichever comes first.
  const uint8_t* data;
  uint64_t size;
  uint32_t width = 0, height = 0;  // datasets stored at each image's own size: this image's size
};

// A batch never spans two epochs. It has no items only when it ends an epoch whose last items
// were all dropped (drop_last) or skipped (a dataset added with on_error skip): it still must be
// acknowledged like any other.
struct Batch {
  uint64_t seq = 0;
  uint32_t epoch = 0;
  bool last_of_epoch = false;
  std::vector<ItemView> items;
  std::vector<uint32_t> skipped;  // items left out (on_error skip) since the previous batch
  double wait_seconds = 0;  // how long next() blocked for this batch; reported with its ack
  // Items copied out of the arena rather than read in place, and such items' views point here:
  // those the daemon split between several blocks (rare: items of different sizes fragmenting the
  // arena), and those this process copies with pread while their pages are new to it (ArenaReads,
  // src/ipc/arena_reads.h). Kept with the Batch: one reused for the next call needs no new memory.
  std::unique_ptr<uint8_t[]> copies;
  uint64_t copies_capacity = 0;
};

class ArenaView;

// Not thread-safe: one thread calls next(), ack() and close(). The stream is driven by that thread
// only (gRPC's asynchronous API): no thread of the Job's own.
class Job {
 public:
  ~Job();  // close()
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Blocks for the next batch; false once every epoch was delivered. At most kMaxUnacknowledged (2)
  // batches may be held unacknowledged: asking for a third throws ClientError FAILED_PRECONDITION
  // at once, and the job goes on. Otherwise throws ClientError (the
  // daemon's message, e.g. a corrupt item or "server shutting down"; ABORTED when a batch never
  // arrived: reopen the job from what was consumed), after which the job has ended and next()
  // throws the same error again (it never passes for the end of the epochs); or Interrupted (the
  // job goes on: next() may be called again).
  bool next(Batch* out);
  // Releases the batch's items in the daemon; their bytes may be overwritten afterwards. Reports
  // how long next() waited for the batch.
  void ack(const Batch& batch);
  // Seconds spent waiting in next() for the batches acknowledged so far: is training waiting on data?
  double wait_seconds() const { return wait_seconds_; }
  const v1::Registered& registered() const { return registered_; }
  // The arena this job reads from, for a caller that copies parts of items itself (set_copies).
  ArenaView& arena() { return *arena_; }
  // Whether next() copies the items whose pages are new to this process, where reading them in
  // place would trap (ArenaReads, src/ipc/arena_reads.h); on by default. A caller that reads only
  // a part of each item (an augmenting job's crop boxes) turns it off and copies that part.
  void set_copies(bool on) { copies_ = on; }
  // Ends the job now (also done by the destructor), and returns once the daemon has released it
  // (its pins and its place in `status`), or after 0.5 s if the daemon does not answer (the call is
  // then cancelled; the daemon ends the job when it sees that).
  void close();

 private:
  friend class Client;
  struct Stream;
  Job(std::unique_ptr<Stream> stream, v1::Registered registered, std::shared_ptr<ArenaView> arena);
  void unpack(const v1::Batch& b, Batch* out);  // the batch's items, checked against the arena
  void end_stream();                            // cancels and ends the call
  [[noreturn]] void fail(const ClientError& error);  // ends the job with `error`, and throws it
  std::unique_ptr<Stream> stream_;
  v1::Registered registered_;
  std::shared_ptr<ArenaView> arena_;
  std::vector<bool> copied_;  // next()'s: which of the batch's items it copies
  bool copies_ = true;
  uint32_t uncopied_batches_ = 0;  // batches in a row that next() copied nothing of
  bool finished_ = false;
  std::optional<ClientError> failed_;  // why the job ended, if it failed: next() throws it again
  uint64_t next_seq_ = 0;               // the daemon's number of the batch due next
  std::set<uint64_t> unacknowledged_;   // batches next() returned that ack() has not released
  double wait_seconds_ = 0;
};

class Client {
 public:
  // Connects to the daemon at `socket` (default: default_socket_path()) once it has checked that a
  // daemon this user can trust listens there (src/ipc/daemon_trust.h; nothing is sent before). Throws
  // ClientError: UNAVAILABLE if no daemon listens there, PERMISSION_DENIED if it may not or must not
  // be used (the message says why and what to do).
  explicit Client(std::string socket = "");
  ~Client();

  const std::string& socket() const { return socket_; }
  // Every blocking call of this client and of its jobs opened afterwards asks `check` about every
  // 50 ms, and stops with Interrupted when it says so (the Python binding: a pending Ctrl-C).
  void set_interrupt(InterruptCheck check) { interrupt_ = std::move(check); }

  // A relative path in the request's source is made absolute in this process's working directory.
  v1::DatasetInfo add_dataset(v1::AddDatasetRequest request, const std::function<void(uint64_t)>& progress = {});
  std::vector<v1::DatasetInfo> list_datasets();
  void remove_dataset(const std::string& name);
  // Ends another process's job by name (its resources are released; its loader gets an error).
  void end_job(const std::string& name);
  v1::StatusReply status();
  std::unique_ptr<Job> open_job(const JobOptions& options);

 private:
  struct Impl;
  std::string socket_;
  uid_t daemon_uid_ = 0;  // who listens at socket_ (checked before anything is sent); owns the arena
  InterruptCheck interrupt_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joader
