// Engine: the daemon's core, independent of gRPC — the threaded shell around ServingState
// (server/serving_state.h), which holds the datasets, the jobs, the loads, the item store and the
// dispatcher and makes every transition of them. The Engine owns what the state does not: the
// mutex it is used under, the dispatcher thread that forms sampler rounds in real time, the loader
// threads that read and prepare items, the condition variables that wake them, the shared-memory
// arena the items' bytes are copied into, the clock, and the state file.
//
// Rounds are paced by the Dispatcher (src/dispatch/dispatcher.h), the same one the simulator runs:
// jobs earn credit at their measured consumption rates, a round starts when one has a whole item
// of credit and every job with positive credit joins it, so that jobs of equal speed land in the
// same rounds whatever their jitter; the dispatcher thread sleeps until the next round is due or
// an event (acknowledgement, join, leave) wakes it.
//
// Plans (policy `planned`): the dispatcher decides ids a horizon ahead; only each job's window
// (prefetch batches) is loaded and pinned, the rest of its queue are planned entries whose due
// times (NextUses) the policy evicts by. Acknowledgements move planned entries into the window.
//
// Memory: the windows' decided items are reserved in whole batches (ceil(min(queued, window) / B)
// batches per job, each bounded by the sum of the B largest items of its subset, so that one
// huge image costs only itself), and a job starts a new batch only when its reservation fits in
// the arena (the Dispatcher's admission rule). A job starving for room reclaims the windows of
// idle jobs (nothing acknowledged for a second) down to the batches their consumers hold; one
// that still starves after 10 s in which no job consumed fails with an error naming the jobs that
// hold the room. Pinned bytes never exceed reservations, so a decided item can
// always be loaded (evicting unpinned items) and every reserved batch completes: no deadlock,
// whatever the number of jobs. A job whose one batch exceeds the arena is refused at registration.
//
// Thread safety: every public method may be called from any thread. One mutex guards the state;
// it is never held while a source is read, an item prepared or copied into its blocks, a dataset
// indexed or the state file written. The transitions gather what they must wake
// (ServingState::Wakeups: the dispatcher thread, loader threads, loads waiting for room), and
// Engine::Lock applies that once, when it releases the lock or before a wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/protocol.h"
#include "disk/prepared_store.h"
#include "ipc/item_store.h"
#include "ipc/shared_arena.h"
#include "joader.pb.h"
#include "server/catalog.h"
#include "server/dataset_state.h"
#include "server/engine_error.h"
#include "server/serving_state.h"
#include "source/source.h"

namespace joader {

// The state's options (cache size, policy, sampler, seed, invariant checks: ServingOptions) and the
// shell's.
struct EngineOptions : ServingOptions {
  unsigned threads = 0;  // loader threads; 0 = hardware concurrency
  // Where the dataset registrations are kept, so that a restarted daemon has them again;
  // empty: not kept.
  std::string state_path;
  // Receives one line per notable event the daemon should log (e.g. the state file cannot be written).
  std::function<void(const std::string&)> log;
  // If set (a resolved absolute directory), every file a dataset reads must lie inside it.
  std::string data_root;
  // A group whose members may use the daemon: the arena is then readable by that group.
  std::optional<gid_t> share_group;
  // The disk tier (src/disk/prepared_store.h): a folder on local disk where decoded datasets'
  // prepared items are kept across runs, read back instead of decoded again; empty: none. Its
  // capacity in bytes; 0: PreparedStore's default (half of what it holds and its free space).
  std::string disk_cache;
  uint64_t disk_cache_bytes = 0;
  // Opens a dataset's source; tests put a source of their own here (e.g. one with slow reads).
  std::function<std::unique_ptr<Source>(const std::string& spec, const std::function<void(size_t)>& progress,
                                        const std::string& data_root)>
      open_source = [](const std::string& spec, const std::function<void(size_t)>& progress,
                       const std::string& data_root) { return joader::open_source(spec, progress, data_root); };
};

class Engine {
 public:
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const SharedArena& arena() const { return arena_; }
  PreparedStore* disk_cache() { return disk_.get(); }  // nullptr without options.disk_cache

  // Indexes the source (progress(n) as it goes) and registers the dataset. A dataset of that name
  // with another spec is refused naming the fields that differ (kAlreadyExists); one with the same
  // spec is compared by the fingerprint of the freshly indexed item list: the same list answers
  // its info with existed set and adds nothing, another list is refused (kFailedPrecondition),
  // since the ids jobs hold would name other files.
  // `caller` owns what it adds, and may remove or end only what it owns (server/ownership.h).
  v1::DatasetInfo add_dataset(const v1::AddDatasetRequest& request, const std::function<void(size_t)>& progress,
                              Caller caller = {});
  // Re-adds the datasets saved in options.state_path; calls on_error(name, message) for each one
  // that cannot be restored (its source moved, say) and goes on. A dataset whose item list is not
  // the one saved is served as now indexed, with DatasetInfo.reindexed saying what changed.
  void restore_datasets(const std::function<void(const std::string&, const std::string&)>& on_error);
  std::vector<v1::DatasetInfo> list_datasets();
  void remove_dataset(const std::string& name, Caller caller = {});
  v1::StatusReply status();
  bool stopping() JOADER_EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return state_.stopping();
  }

  using JobId = ServingState::JobId;
  // Registers a job; throws EngineError on bad input. on_change, if given, is called whenever
  // what poll_batch() would return may have changed (a batch became ready, the job failed or
  // ended), from any of the Engine's threads with its lock held: it must return quickly and must
  // not call the Engine (hand the job to a thread that polls it).
  JobId open_job(const v1::Register& request, v1::Registered* reply, std::function<void()> on_change = {},
                 Caller caller = {});
  // The job's next batch, without blocking: kBatch (out filled: the reply its stream sends), kWait when it is not ready yet
  // (on_change tells when to poll again), kDone once the job has delivered its last epoch and
  // every batch is acknowledged. Throws EngineError if the job failed (bad item, shutdown), or
  // kUnavailable "job closed" once it is closed.
  using Poll = ServingState::Poll;
  Poll poll_batch(JobId job, v1::Batch* out);
  // wait_seconds: how long the client waited for that batch (summed per job for status).
  void ack(JobId job, uint64_t seq, double wait_seconds = 0);
  // Ends the job now: its pins, queue and sampler bit are released at once. Idempotent.
  void close_job(JobId job);
  // Ends the job named `name` for another client (`joader job rm`), also while its own process
  // does not answer: released as by close_job, and its own poll_batch/ack fail with
  // kFailedPrecondition saying it was ended so (not "job closed", which a client reconnects on).
  // kNotFound when no job has that name, kPermissionDenied when `caller` may not end it.
  void end_job(const std::string& name, Caller caller = {});
  // Fails every job with "server shutting down" and stops the threads.
  void shutdown();

 private:
  using Wakeups = ServingState::Wakeups;
  // mu_, held from construction to destruction except between unlock() and lock(). Each time it
  // lets go of the lock (and at flush(), before a wait) it checks the state's invariants (when
  // options.check_invariants) and applies the wakeups the transitions gathered, outside the lock.
  class JOADER_SCOPED_CAPABILITY Lock {
   public:
    explicit Lock(Engine& e) JOADER_ACQUIRE(e.mu_) JOADER_NO_THREAD_SAFETY_ANALYSIS : engine_(e), lock_(e.mu_) {}
    ~Lock() JOADER_RELEASE() JOADER_NO_THREAD_SAFETY_ANALYSIS {
      if (lock_.native().owns_lock()) unlock();
    }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    void unlock() JOADER_RELEASE() JOADER_NO_THREAD_SAFETY_ANALYSIS {
      const Wakeups w = engine_.settle();
      lock_.unlock();
      engine_.notify(w);
    }
    void lock() JOADER_ACQUIRE() JOADER_NO_THREAD_SAFETY_ANALYSIS { lock_.lock(); }
    void flush() JOADER_NO_THREAD_SAFETY_ANALYSIS { engine_.notify(engine_.settle()); }
    std::unique_lock<std::mutex>& native() { return lock_.native(); }  // for condition variables

   private:
    Engine& engine_;
    MutexLock lock_;
  };
  // The one place invariants are checked: between transitions, as the lock is let go.
  Wakeups settle() JOADER_REQUIRES(mu_) {
    state_.check_invariants();
    return state_.take_wakeups();
  }
  void notify(const Wakeups& w);

  // Forms the rounds that are due; sleeps until the next one is, or an event.
  void dispatch_loop();
  // Takes load tasks; reads, prepares and stores each item without the lock.
  void loader_loop();
  // Arena blocks for an item of `size` bytes, which then is resident and pinned, or, while the
  // state has no room for it, waiting for pins to be released (counted in space_waits) for at most
  // 30 s. nullptr once shutting down (nothing placed: stopping is checked under the lock that
  // places) or after 30 s. lk holds mu_ (released while waiting).
  const Placement* claim(CacheKey key, uint64_t size, ImageSize shape, Lock& lk) JOADER_REQUIRES(mu_);
  // Copies an item's bytes into its blocks, in order. Without mu_ (the item is pinned).
  void copy_in(const std::vector<Extent>& extents, const std::vector<uint8_t>& bytes);
  // Writes the dataset list to options.state_path, outside mu_: a list older than the last one
  // written (another thread's save overtook this one) is not written.
  void save(std::pair<std::vector<SavedDataset>, uint64_t> saved) JOADER_EXCLUDES(mu_);
  double now() const;  // seconds since the engine started: the dispatcher's clock

  const EngineOptions options_;
  SharedArena arena_;
  const std::unique_ptr<PreparedStore> disk_;  // the disk tier, if any (thread-safe itself)
  Mutex mu_;
  ServingState state_ JOADER_GUARDED_BY(mu_);
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::condition_variable loader_cv_;  // a task was queued, or stopping
  std::condition_variable space_cv_;   // pins were released
  std::condition_variable dispatch_cv_;
  Mutex save_mu_;  // orders the state file's writes
  uint64_t saved_version_ JOADER_GUARDED_BY(save_mu_) = 0;

  std::thread dispatch_thread_;
  std::vector<std::thread> loaders_;
};

}  // namespace joader
