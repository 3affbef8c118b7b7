// ServingState: the daemon's state and every transition of it — datasets, jobs and their queues,
// loads, the item store, the dispatcher, the counters — without threads, locks or clocks.
//
// It is the Engine's core (src/server/engine.h is the threaded shell around it: one mutex, the
// dispatcher and loader threads, their condition variables, the arena's bytes, the state file).
// Each transition takes the time, when it needs one, as an argument (seconds on the dispatcher's
// clock), and records what the threads must be told in Wakeups, which the caller takes and
// applies once it lets go of its lock. A job's own on_change callback is called from inside the
// transition that changed the job (the caller's lock still held: see Engine::open_job).
//
// The slow work happens between transitions, outside any lock, in the caller: indexing a dataset
// (open_dataset/size_items, then add_dataset), reading and preparing an item (take_task, then
// loaded_in_place, or prepared → place → stored), copying its bytes into the arena blocks the store
// placed it in, writing the saved dataset list (saved_datasets).
//
// Rounds, plans, windows and memory reservations are as docs/DAEMON.md describes them: the
// Dispatcher paces rounds; each job's decided items are its JobQueue (the window, loaded and pinned,
// then the plan); the ItemStore holds the prepared items in arena blocks and evicts by the policy.
//
// Thread safety: none; the Engine calls it under its mutex. check_invariants() states what holds
// between any two transitions.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/next_uses.h"
#include "common/types.h"
#include "dispatch/dispatcher.h"
#include "dispatch/job_queue.h"
#include "ipc/item_store.h"
#include "joader.pb.h"
#include "server/catalog.h"
#include "server/dataset_state.h"
#include "server/engine_error.h"
#include "server/ownership.h"
#include "server/item_loader.h"

namespace joader {

struct ServingOptions {
  uint64_t cache_bytes = 512ull << 20;
  std::string policy = "refcnt";  // refcnt | lru | fifo | rate | planned
  std::string sampler = "dsa";    // dsa | independent (benchmark baseline) | biased-dsa (tests' control)
  // Seeds every dataset's sampler (mixed with the dataset's index) for reproducible tests; unset:
  // a fresh random seed per dataset.
  std::optional<uint64_t> seed;
  // The items one uid other than the daemon's owner and root may index in all its datasets.
  uint64_t max_items_per_user = kMaxItemsPerUser;
  // Evictions a placement may add to put an item in one block (ItemStore). None: in an arena that
  // many jobs share, the items they evict are hits lost, more than the splits they spare cost
  // (docs/BENCHMARKS.md, "Whole blocks"); the placement stays for a rule that loses no hits.
  size_t extra_evictions = 0;
  // check_invariants() checks (else returns at once), aborting on the first violation. O(jobs)
  // per check, and the Engine checks between any two transitions: on in debug and sanitizer
  // builds and in the tests.
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;
#endif
};

class ServingState {
 public:
  // Whether the disk tier holds an item of the dataset whose tier namespace is `ns`
  // (Dataset::disk_namespace): called under the owner's lock, it must not take that lock.
  using OnDisk = std::function<bool(uint64_t ns, ItemId item)>;

  // kInvalidArgument for an unknown policy or sampler. `on_disk` (optional): the cache evicts
  // items that the disk tier holds first among equals (PolicyContext::reloads_cheaply).
  explicit ServingState(ServingOptions options, OnDisk on_disk = {});
  ServingState(const ServingState&) = delete;
  ServingState& operator=(const ServingState&) = delete;
  ~ServingState();

  // What the transitions since the last take_wakeups() require of the threads.
  struct Wakeups {
    bool dispatcher = false;  // a round may be due: a job joined, left, acknowledged or dropped items
    size_t loads = 0;         // load tasks queued, one per loader thread to wake
    bool space = false;       // pins or blocks were released: a waiting place() may succeed now
  };
  Wakeups take_wakeups() { return std::exchange(wakeups_, {}); }

  // Set once the daemon stops: every job failed with "server shutting down", no task is handed out.
  void shut_down();
  bool stopping() const { return stopping_; }

  // ------------------------------------------------------------------------------------------
  // Datasets. add_dataset in three steps around the slow indexing: check_new (before), existing
  // (between open_dataset and size_items: the item list is known), add_dataset (after).

  // Throws kAlreadyExists if a dataset of that name has another spec, kResourceExhausted if there
  // is no room for one more; nothing if the same spec is registered (existing() answers then).
  void check_new(const v1::AddDatasetRequest& request, Caller caller = {}) const;
  // The items `caller`'s datasets hold, and the most they may: options.max_items_per_user for a
  // member (ownership.h's is_member), unbounded (UINT64_MAX) for the daemon's owner and root.
  ItemAllowance item_allowance(Caller caller) const;
  // The registered dataset of that name and spec as an identical re-add answers it (existed set),
  // if there is one: kFailedPrecondition when `indexed`'s item list is not the registered one's.
  std::optional<v1::DatasetInfo> existing(const v1::AddDatasetRequest& request, const Dataset& indexed) const;
  // Registers the indexed dataset (or answers as existing() when one was registered meanwhile).
  // kResourceExhausted when one of its items is larger than the cache, or at the caller's limits.
  // `caller` owns it (server/ownership.h).
  v1::DatasetInfo add_dataset(const v1::AddDatasetRequest& request, std::unique_ptr<Dataset> indexed,
                              Caller caller = {});
  // The restart's re-index found its item list changed: `why` is shown in its info.
  void set_reindexed(const std::string& name, const std::string& why);
  std::vector<v1::DatasetInfo> list_datasets() const;
  // kNotFound if unknown, kPermissionDenied unless `caller` may (server/ownership.h),
  // kFailedPrecondition while jobs use it. Returns its disk tier namespace (Dataset::disk_namespace).
  std::optional<uint64_t> remove_dataset(const std::string& name, Caller caller = {});
  // The registrations to save, and their version: it grows with every add or remove, so that a
  // writer outside the lock can tell which of two lists is the newer.
  std::pair<std::vector<SavedDataset>, uint64_t> saved_datasets() const;

  // ------------------------------------------------------------------------------------------
  // Jobs (the Engine's public methods of the same names say what each does)

  using JobId = uint64_t;
  // Fills the reply's job, items and image fields (not the arena's).
  JobId open_job(const v1::Register& request, v1::Registered* reply, std::function<void()> on_change, double now,
                 Caller caller = {});
  enum class Poll { kBatch, kWait, kDone };
  Poll poll_batch(JobId job, v1::Batch* out);
  void ack(JobId job, uint64_t seq, double wait_seconds, double now);
  void close_job(JobId job);
  void end_job(const std::string& name, Caller caller = {});

  // ------------------------------------------------------------------------------------------
  // Rounds: forms every round due at `now` (the Dispatcher's pacing), fits the windows the
  // dispatcher changed, fails jobs that starved for room. Returns when the next round is due
  // (Dispatcher::kNever: only an event can make one due).
  double dispatch(double now);

  // ------------------------------------------------------------------------------------------
  // Loads. A loader takes a task, then, without the lock, reads and prepares the item:
  // - claimed (claim_size > 0: decoded crops, whose size is known, while jobs wait for them): the
  //   loader first place()s the item (waiting while there is no room), prepares it into its
  //   blocks, then calls loaded_in_place();
  // - otherwise it prepares the item into a buffer, then prepared() says whether to place it
  //   (kPlace: place(), copy the bytes into its blocks, stored()) or that the load is over.
  // A loader that gives up on place() calls no_room(); one that sees stopping() discards what it
  // placed.
  struct LoadTask {
    CacheKey key;
    const Dataset* dataset;  // valid until the load ends (a removed dataset is kept until then)
    ItemId item;
    uint64_t claim_size = 0;  // > 0: place() these bytes before preparing
    ImageSize claim_shape;
  };
  std::optional<LoadTask> take_task();
  // Arena blocks for the item, which is then resident and pinned; nullptr while there is no room.
  const Placement* place(CacheKey key, uint64_t size, ImageSize shape);
  void count_space_wait() { ++n_space_waits_; }  // a loader waits for room (status: space_waits)
  // The claimed item's load ended (error: "" when prepared).
  void loaded_in_place(CacheKey key, const LoadedItem& loaded);
  // The item was prepared into a buffer of `size` bytes.
  enum class Next { kDone, kPlace };
  Next prepared(CacheKey key, const LoadedItem& loaded, uint64_t size, const Placement** placed);
  // The placed item's bytes are in its blocks: its waiting entries become ready.
  void stored(CacheKey key);
  // A loader gave up placing the item for lack of room: its jobs fail (or skip it).
  void no_room(CacheKey key, uint64_t size);
  // Drops a placed item whose load was abandoned (shutting down).
  void discard(CacheKey key);

  // ------------------------------------------------------------------------------------------
  // The reply of `status`, but for the fields the Engine knows (loader threads, uptime).
  v1::StatusReply status(double now) const;

  // When options.check_invariants: the item store's (cached items hold exactly their arena
  // blocks), each job's decided items are what the dispatcher counts, the planned entries are
  // NextUses' planned uses, the reservations fit in the arena. Aborts naming the last transition
  // when one does not hold.
  void check_invariants() const;

 private:
  struct ServedDataset;
  struct Job;
  // An entry of a job's queue (dispatch/job_queue.h): kPlanned beyond its job's window (an id
  // only; loaded when acknowledgements bring it into the window), then kLoading, kReady (pinned,
  // placed) or kFailed.
  struct Entry : QueueEntry {
    int64_t label = 0;
    bool last_of_epoch = false;
    const Placement* placed = nullptr;  // read only while kReady (the entry pins the item)
  };
  struct Load {
    ServedDataset* dataset;
    ItemId item;
    std::vector<std::pair<Job*, Entry*>> waiters;
  };

  void wake_dispatcher() { wakeups_.dispatcher = true; }
  void wake_loader() { ++wakeups_.loads; }
  void wake_space() { wakeups_.space = true; }
  void wake(Job& j);  // j's state changed: its on_change

  v1::DatasetInfo info(const ServedDataset& ds) const;
  const ServedDataset* registered(const v1::AddDatasetRequest& request) const;
  void check_room(Caller caller) const;  // kResourceExhausted at the daemon's or the caller's limit
  void reap_retired();  // frees removed datasets that no load refers to any more

  // Decides one round of `ready` jobs; false if the sampler decided nothing.
  bool decide_round(ServedDataset& ds, const std::vector<JobSlot>& ready, double now);
  // The entry enters its job's window: a hit (pinned now), a load already under way, or a new load.
  void start(Job& j, Entry& e);
  // Moves planned entries into the job's window while it has room.
  void fill_window(Job& j);
  // Tells the dispatcher whether j's next batch waits on loads (Dispatcher::set_waiting).
  void update_waiting(Job& j);
  // The dispatcher shrank or grew the job's window: entries beyond it become planned (unpinned,
  // still decided), entries that entered it are started.
  void fit_window(Job& j, double now);
  std::string no_room_for_job(const Job& j) const;
  // The bytes of the job's `items` oldest decided items that were not dropped (sent, then
  // pending), each item once: the dispatcher's exact reservations (Dispatcher::ItemBytes).
  uint64_t oldest_bytes(const Job& j, uint64_t items) const;
  // The load of `key` ended: its waiting entries become ready (loaded: the item is resident) or
  // fail with `error` (skipped under on_error skip).
  void finish_load(CacheKey key, bool loaded, const std::string& error);
  bool batch_ready(Job& j, size_t* take);
  // Whether sending the next `take` entries keeps what its consumer holds within the dispatcher's
  // window: after the window shrank, entries beyond it wait until fit_window demotes them, so that
  // nothing is sent that the job's reservation does not cover.
  bool within_window(const Job& j, size_t take) const;
  Poll take_batch(Job& j, v1::Batch* out);
  void release(Job& j);
  void fail_job(Job& j, EngineError::Code code, const std::string& message);
  Job& find_job(JobId id);
  void throw_if_ended(JobId id) const;

  const ServingOptions options_;
  Dispatcher dispatcher_;             // pacing, rounds, reservations
  NextUses next_uses_;                // the due times of planned entries (policy planned)
  std::unique_ptr<ItemStore> store_;  // cached items, their arena blocks and pins
  Wakeups wakeups_;
  const char* last_ = "construction";  // the last transition, for check_invariants' message
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<ServedDataset>> datasets_;
  std::vector<ServedDataset*> dataset_by_index_;           // nullptr once removed
  std::vector<std::unique_ptr<ServedDataset>> retired_;    // removed, still referenced by loads
  uint64_t datasets_version_ = 0;                          // add and remove count
  std::map<JobId, std::shared_ptr<Job>> jobs_;
  std::map<JobId, EngineError> ended_;  // jobs end_job() ended whose own stream has not closed yet
  JobId next_job_id_ = 1;
  std::unordered_map<CacheKey, Load> loads_;
  std::deque<CacheKey> tasks_;
  uint64_t n_disk_reads_ = 0;  // loads served from the disk tier (LoadedItem::from_disk)
  uint64_t n_loads_ = 0, n_deliveries_ = 0, n_hits_ = 0, n_skipped_ = 0, n_space_waits_ = 0;
  LoadHistogram load_times_;  // seconds to read and prepare each load
};

}  // namespace joader
