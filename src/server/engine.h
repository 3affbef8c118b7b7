// Engine: the daemon's core, independent of gRPC. It owns the datasets (source, prep spec,
// sampler), the jobs, the shared-memory arena with its cache, the dispatcher thread that forms
// sampler rounds in real time, and the loader threads that read and prepare items.
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
// the transitions made under it gather what they must wake (Wakeups: the dispatcher thread,
// loader threads, loads waiting for room), and Engine::Lock applies that once, when it releases
// the lock or before a wait, rather than each transition notifying condition variables itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/cache.h"
#include "cache/next_uses.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "dispatch/dispatcher.h"
#include "dispatch/job_queue.h"
#include "joader.pb.h"
#include "prep/image_prep.h"
#include "sampler/sampler.h"
#include "ipc/item_store.h"
#include "ipc/shared_arena.h"
#include "server/catalog.h"
#include "server/engine_error.h"
#include "server/item_loader.h"
#include "source/source.h"

namespace joader {

struct EngineOptions {
  uint64_t cache_bytes = 512ull << 20;
  unsigned threads = 0;             // loader threads; 0 = hardware concurrency
  std::string policy = "refcnt";    // refcnt | lru | fifo | rate | planned
  std::string sampler = "dsa";      // dsa | independent (benchmark baseline) | biased-dsa (tests' control)
  // Seeds every dataset's sampler (mixed with the dataset's index) for reproducible tests; unset:
  // a fresh random seed per dataset.
  std::optional<uint64_t> seed;
  // Where the dataset registrations are kept, so that a restarted daemon has them again;
  // empty: not kept.
  std::string state_path;
  // If set (a resolved absolute directory), every file a dataset reads must lie inside it.
  std::string data_root;
  // A group whose members may use the daemon: the arena is then readable by that group.
  std::optional<gid_t> share_group;
  // Check the memory invariants (see Engine::check_invariants) after every cache and arena
  // operation, and abort on the first violation. O(jobs) per check: on in debug and sanitizer
  // builds and in the engine's tests.
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;
#endif
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

  // Indexes the source (progress(n) as it goes) and registers the dataset. A dataset of that name
  // with another spec is refused naming the fields that differ (kAlreadyExists); one with the same
  // spec is compared by the fingerprint of the freshly indexed item list: the same list answers
  // its info with existed set and adds nothing, another list is refused (kFailedPrecondition),
  // since the ids jobs hold would name other files.
  v1::DatasetInfo add_dataset(const v1::AddDatasetRequest& request, const std::function<void(size_t)>& progress);
  // Re-adds the datasets saved in options.state_path; calls on_error(name, message) for each one
  // that cannot be restored (its source moved, say) and goes on. A dataset whose item list is not
  // the one saved is served as now indexed, with DatasetInfo.reindexed saying what changed.
  void restore_datasets(const std::function<void(const std::string&, const std::string&)>& on_error);
  std::vector<v1::DatasetInfo> list_datasets();
  void remove_dataset(const std::string& name);
  v1::StatusReply status();
  bool stopping() JOADER_EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return stopping_;
  }

  using JobId = uint64_t;
  // Registers a job; throws EngineError on bad input. on_change, if given, is called whenever
  // what poll_batch() would return may have changed (a batch became ready, the job failed or
  // ended), from any of the Engine's threads with its lock held: it must return quickly and must
  // not call the Engine (hand the job to a thread that polls it).
  JobId open_job(const v1::Register& request, v1::Registered* reply, std::function<void()> on_change = {});
  // The job's next batch, without blocking: kBatch (out filled: the reply its stream sends), kWait when it is not ready yet
  // (on_change tells when to poll again), kDone once the job has delivered its last epoch and
  // every batch is acknowledged. Throws EngineError if the job failed (bad item, shutdown), or
  // kUnavailable "job closed" once it is closed.
  enum class Poll { kBatch, kWait, kDone };
  Poll poll_batch(JobId job, v1::Batch* out);
  // wait_seconds: how long the client waited for that batch (summed per job for status).
  void ack(JobId job, uint64_t seq, double wait_seconds = 0);
  // Ends the job now: its pins, queue and sampler bit are released at once. Idempotent.
  void close_job(JobId job);
  // Ends the job named `name` for another client (`joader job rm`), also while its own process
  // does not answer: released as by close_job, and its own poll_batch/ack fail with
  // kFailedPrecondition saying it was ended so (not "job closed", which a client reconnects on).
  // kNotFound when no job has that name.
  void end_job(const std::string& name);
  // Fails every job with "server shutting down" and stops the threads.
  void shutdown();

 private:
  struct Dataset;
  struct Job;
  // An entry of a job's queue (dispatch/job_queue.h): kPlanned beyond its job's window (an id
  // only; loaded when acknowledgements bring it into the window), then kLoading, kReady (pinned,
  // placed) or kFailed.
  struct Entry : QueueEntry {
    int64_t label = 0;
    bool last_of_epoch = false;
    const Placement* placed = nullptr;  // read only while kReady (the entry pins the item)
  };
  // What the transitions made under the lock must wake: gathered in wakeups_ (wake_*), applied
  // by notify() once, when a Lock lets go of the lock (or flushes before a wait). A job's own
  // on_change is not deferred so: it is called under the lock (wake), where its stream cannot be
  // going away.
  struct Wakeups {
    bool dispatcher = false;  // a round may be due: a job joined, left, acknowledged or dropped items
    size_t loads = 0;         // load tasks queued, for as many loader threads
    bool space = false;       // pins or blocks were released: a waiting claim may fit now
  };
  // mu_, held from construction to destruction except between unlock() and lock(); applies the
  // wakeups gathered under it each time it releases the lock, and at flush() (before a wait).
  class JOADER_SCOPED_CAPABILITY Lock {
   public:
    explicit Lock(Engine& e) JOADER_ACQUIRE(e.mu_) JOADER_NO_THREAD_SAFETY_ANALYSIS : engine_(e), lock_(e.mu_) {}
    ~Lock() JOADER_RELEASE() JOADER_NO_THREAD_SAFETY_ANALYSIS {
      if (lock_.native().owns_lock()) unlock();
    }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    void unlock() JOADER_RELEASE() JOADER_NO_THREAD_SAFETY_ANALYSIS {
      const Wakeups w = engine_.take_wakeups();
      lock_.unlock();
      engine_.notify(w);
    }
    void lock() JOADER_ACQUIRE() JOADER_NO_THREAD_SAFETY_ANALYSIS { lock_.lock(); }
    void flush() { engine_.notify(engine_.take_wakeups()); }
    std::unique_lock<std::mutex>& native() { return lock_.native(); }  // for condition variables

   private:
    Engine& engine_;
    MutexLock lock_;
  };
  void wake_dispatcher() JOADER_REQUIRES(mu_) { wakeups_.dispatcher = true; }
  void wake_loader() JOADER_REQUIRES(mu_) { ++wakeups_.loads; }
  void wake_space() JOADER_REQUIRES(mu_) { wakeups_.space = true; }
  Wakeups take_wakeups() JOADER_NO_THREAD_SAFETY_ANALYSIS { return std::exchange(wakeups_, {}); }
  void notify(const Wakeups& w);

  struct Load {
    Dataset* dataset;
    ItemId item;
    std::vector<std::pair<Job*, Entry*>> waiters;
  };

  // Forms the rounds the dispatcher says are due; sleeps until the next one is, or an event.
  void dispatch_loop();
  // Decides one round of `ready` jobs; false if the sampler decided nothing.
  bool decide_round(Dataset& ds, const std::vector<JobSlot>& ready) JOADER_REQUIRES(mu_);
  // The entry enters its job's window: a hit (pinned now), a load already under way, or a new load.
  void start(Job& j, Entry& e) JOADER_REQUIRES(mu_);
  // Moves planned entries into the job's window while it has room.
  void fill_window(Job& j) JOADER_REQUIRES(mu_);
  // Tells the dispatcher whether j's next batch waits on loads (Dispatcher::set_waiting): after
  // its entries changed state (decided, started, loaded, demoted, delivered).
  void update_waiting(Job& j) JOADER_REQUIRES(mu_);
  // The dispatcher shrank or grew the job's window: entries beyond it become planned (unpinned,
  // still decided), entries that entered it are started.
  void fit_window(Job& j) JOADER_REQUIRES(mu_);
  // The error of a job that starved for room: which jobs hold it, and what to do.
  std::string no_room_for_job(const Job& j) const JOADER_REQUIRES(mu_);
  double now() const;  // seconds since the engine started: the dispatcher's clock
  void loader_loop();
  // Arena blocks for an item of `size` bytes, which then is resident and pinned: store_->place(),
  // or, while it cannot, waiting for pins to be released (counted in space_waits) for at most 30 s.
  // nullptr once shutting down or after 30 s. lk holds mu_ (released while waiting).
  const Placement* claim(CacheKey key, uint64_t size, ImageSize shape, Lock& lk) JOADER_REQUIRES(mu_);
  // Drops a claimed item whose load failed or was abandoned, and wakes loaders waiting for room.
  void discard(CacheKey key) JOADER_REQUIRES(mu_);
  // Copies an item's bytes into its blocks, in order. Without mu_ (the item is pinned).
  void copy_in(const std::vector<Extent>& extents, const std::vector<uint8_t>& bytes);
  // The error of a claim that gave up.
  std::string no_room(const Dataset& ds, ItemId item, uint64_t rsize) const JOADER_REQUIRES(mu_);
  // The load of `key` ended: its waiting entries become ready (loaded: the item is resident) or
  // fail with `error` (skipped under on_error skip).
  void finish_load(CacheKey key, bool loaded, const std::string& error) JOADER_REQUIRES(mu_);
  bool batch_ready(Job& j, size_t* take) JOADER_REQUIRES(mu_);
  Poll take_batch(Job& j, v1::Batch* out) JOADER_REQUIRES(mu_);
  void wake(Job& j) JOADER_REQUIRES(mu_);  // j's state changed
  void release(Job& j) JOADER_REQUIRES(mu_);
  void fail_job(Job& j, EngineError::Code code, const std::string& message) JOADER_REQUIRES(mu_);
  std::shared_ptr<Job> find_job(JobId id) JOADER_REQUIRES(mu_);
  // Throws the error of a job end_job() ended, if `id` is one (its stream not closed yet).
  void throw_if_ended(JobId id) const JOADER_REQUIRES(mu_);
  v1::DatasetInfo info(const Dataset& ds) const JOADER_REQUIRES(mu_);
  // When options_.check_invariants: the item store's (cached items hold exactly their
  // arena blocks), each job's decided items are what the dispatcher counts, the planned entries
  // are NextUses' planned uses, the reservations fit in the arena. Aborts naming `after` (the operation just done) when one does not hold.
  void check_invariants(const char* after) const JOADER_REQUIRES(mu_);
  void save_datasets() const JOADER_REQUIRES(mu_);
  void reap_retired() JOADER_REQUIRES(mu_);  // frees removed datasets that no load refers to any more

  const EngineOptions options_;
  SharedArena arena_;
  Mutex mu_;  // guards everything below that says so, and the Jobs and Datasets they hold
  Dispatcher dispatcher_ JOADER_GUARDED_BY(mu_);             // pacing, rounds, reservations
  std::unique_ptr<ItemStore> store_ JOADER_PT_GUARDED_BY(mu_);  // cached items, their arena blocks and pins
  NextUses next_uses_ JOADER_GUARDED_BY(mu_);                // the due times of planned entries (policy planned)
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  Wakeups wakeups_ JOADER_GUARDED_BY(mu_);  // gathered by the transitions, applied by Lock
  std::condition_variable loader_cv_;   // tasks_ non-empty or stopping_
  std::condition_variable space_cv_;    // pins were released
  std::condition_variable dispatch_cv_;
  bool stopping_ JOADER_GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<Dataset>> datasets_ JOADER_GUARDED_BY(mu_);
  std::vector<Dataset*> dataset_by_index_ JOADER_GUARDED_BY(mu_);         // nullptr once removed
  std::vector<std::unique_ptr<Dataset>> retired_ JOADER_GUARDED_BY(mu_);  // removed, still referenced by loads
  std::map<JobId, std::shared_ptr<Job>> jobs_ JOADER_GUARDED_BY(mu_);
  // Jobs ended by end_job() whose own stream has not closed yet: the error it gets.
  std::map<JobId, EngineError> ended_ JOADER_GUARDED_BY(mu_);
  JobId next_job_id_ JOADER_GUARDED_BY(mu_) = 1;
  std::unordered_map<CacheKey, Load> loads_ JOADER_GUARDED_BY(mu_);
  std::deque<CacheKey> tasks_ JOADER_GUARDED_BY(mu_);
  uint64_t n_loads_ JOADER_GUARDED_BY(mu_) = 0, n_deliveries_ JOADER_GUARDED_BY(mu_) = 0, n_hits_ JOADER_GUARDED_BY(mu_) = 0,
           n_skipped_ JOADER_GUARDED_BY(mu_) = 0, n_space_waits_ JOADER_GUARDED_BY(mu_) = 0;
  LoadHistogram load_times_ JOADER_GUARDED_BY(mu_);  // seconds to read and prepare each load

  std::thread dispatch_thread_;
  std::vector<std::thread> loaders_;
};

}  // namespace joader
