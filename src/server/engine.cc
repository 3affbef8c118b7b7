#include "server/engine.h"

#include <algorithm>
#include <cstring>

#include <unistd.h>

#include <fmt/format.h>

#include "prep/scratch.h"

namespace joader {

using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<PreparedStore> open_disk_cache(const EngineOptions& o) {
  if (o.disk_cache.empty()) return nullptr;
  PreparedStore::Options disk;
  disk.dir = o.disk_cache;
  disk.capacity = o.disk_cache_bytes;
  disk.log = o.log;
  return std::make_unique<PreparedStore>(std::move(disk));
}

}  // namespace

Engine::Engine(EngineOptions options)
    : options_(std::move(options)),
      arena_(options_.cache_bytes, options_.share_group),
      disk_(open_disk_cache(options_)),
      state_(options_, disk_ ? ServingState::OnDisk([disk = disk_.get()](uint64_t ns, ItemId item) {
                                 return disk->holds(ns, item);
                               })
                             : ServingState::OnDisk()) {
  const unsigned threads = options_.threads != 0 ? options_.threads : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i) loaders_.emplace_back([this] { loader_loop(); });
  dispatch_thread_ = std::thread([this] { dispatch_loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    Lock lk(*this);
    if (state_.stopping()) return;
    state_.shut_down();
  }
  loader_cv_.notify_all();
  space_cv_.notify_all();
  dispatch_cv_.notify_all();
  if (dispatch_thread_.joinable()) dispatch_thread_.join();
  for (auto& t : loaders_) t.join();
}

double Engine::now() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

void Engine::notify(const Wakeups& w) {
  if (w.dispatcher) dispatch_cv_.notify_all();
  if (w.space) space_cv_.notify_all();
  if (w.loads > 1) {
    loader_cv_.notify_all();
  } else if (w.loads == 1) {
    loader_cv_.notify_one();
  }
}

// ---------------------------------------------------------------------------------------------
// Datasets

v1::DatasetInfo Engine::add_dataset(const v1::AddDatasetRequest& req, const std::function<void(size_t)>& progress,
                                    Caller caller) {
  check_add_request(req);
  ItemAllowance items;  // checked again when the dataset is registered
  {
    Lock lk(*this);
    state_.check_new(req, caller);
    items = state_.item_allowance(caller);
  }
  // Indexing and probing: outside the lock, abandoned when the daemon stops or the source lists
  // more items than the caller may index.
  const auto indexing = [&](size_t n) {
    if (stopping()) throw EngineError(EngineError::kUnavailable, "server shutting down");
    if (n > items.room()) throw too_many_items(caller.uid, items, items.room(), true);
    if (progress) progress(n);
  };
  auto ds = std::make_unique<Dataset>();
  open_dataset(*ds, req, options_.open_source, options_.data_root, indexing);
  {
    Lock lk(*this);
    if (auto existing = state_.existing(req, *ds)) return *existing;
  }
  size_items(*ds, indexing);
  if (disk_ && !ds->prep.raw) {
    // The source spec too: a synthetic source's items or an LMDB's keys can look alike in two sources.
    ds->disk_namespace = disk_->open_namespace(req.name(), req.source() + '\n' + content_fingerprint(*ds->source),
                                               prepared_bytes_identity(ds->prep));
  }
  std::pair<std::vector<SavedDataset>, uint64_t> saved;
  v1::DatasetInfo out;
  {
    Lock lk(*this);
    out = state_.add_dataset(req, std::move(ds), caller);
    if (out.existed()) return out;
    saved = state_.saved_datasets();
  }
  save(std::move(saved));
  return out;
}

void Engine::save(std::pair<std::vector<SavedDataset>, uint64_t> saved) {
  if (options_.state_path.empty()) return;
  MutexLock lk(save_mu_);
  if (saved.second <= saved_version_) return;  // a newer list was written meanwhile
  saved_version_ = saved.second;
  try {
    DatasetStateFile(options_.state_path).save(saved.first);
  } catch (const DatasetStateError& e) {
    if (options_.log) options_.log(std::string("warning: the dataset registrations are not kept: ") + e.what());
  }
}

void Engine::restore_datasets(const std::function<void(const std::string&, const std::string&)>& on_error) {
  if (options_.state_path.empty()) return;
  std::vector<SavedDataset> saved;
  const DatasetStateFile file(options_.state_path);
  try {
    saved = file.load();
  } catch (const DatasetStateError& e) {
    // Moved aside, so that the next registration does not overwrite what a person may want back.
    const std::string kept = file.set_aside();
    on_error("(all)", std::string(e.what()) +
                          (kept.empty() ? "; it could not be moved aside (" + std::string(std::strerror(errno)) +
                                              "), so registrations will not be kept until it is removed"
                                        : "; moved to " + kept + ", and a new list is kept from now on"));
    return;
  }
  for (const SavedDataset& s : saved) {
    try {
      const v1::DatasetInfo added = add_dataset(s.spec, {}, Caller{s.owner});
      if (s.fingerprint.empty() || added.fingerprint() == s.fingerprint) continue;
      Lock lk(*this);
      state_.set_reindexed(
          s.spec.name(),
          fmt::format("its files changed while the daemon was down: re-indexed at its start, it lists {} items "
                      "(fingerprint {}), it listed {} (fingerprint {}) when saved; item ids may name other files than "
                      "before, and jobs saved before cannot resume on it",
                      added.items(), added.fingerprint(), s.items, s.fingerprint));
    } catch (const EngineError& e) {
      on_error(s.spec.name(), e.what());
    }
  }
}

std::vector<v1::DatasetInfo> Engine::list_datasets() {
  Lock lk(*this);
  return state_.list_datasets();
}

void Engine::remove_dataset(const std::string& name, Caller caller) {
  check_text("the dataset name", name, kMaxNameBytes);
  std::pair<std::vector<SavedDataset>, uint64_t> saved;
  std::optional<uint64_t> disk_namespace;
  {
    Lock lk(*this);
    disk_namespace = state_.remove_dataset(name, caller);
    saved = state_.saved_datasets();
  }
  if (disk_ && disk_namespace) disk_->drop_namespace(*disk_namespace);
  save(std::move(saved));
}

// ---------------------------------------------------------------------------------------------
// Jobs

Engine::JobId Engine::open_job(const v1::Register& req, v1::Registered* reply, std::function<void()> on_change,
                              Caller caller) {
  check_protocol(req.protocol_version());
  if (req.batch_size() == 0) throw EngineError(EngineError::kInvalidArgument, "batch size must be at least 1");
  check_text("the job name", req.name(), kMaxNameBytes);
  check_text("the dataset name", req.dataset(), kMaxNameBytes);
  Lock lk(*this);
  const JobId id = state_.open_job(req, reply, std::move(on_change), now(), caller);
  reply->set_arena(arena_.name());
  reply->set_arena_size(arena_.size());
  return id;
}

Engine::Poll Engine::poll_batch(JobId id, v1::Batch* out) {
  Lock lk(*this);
  return state_.poll_batch(id, out);
}

void Engine::ack(JobId id, uint64_t seq, double wait_seconds) {
  Lock lk(*this);
  state_.ack(id, seq, wait_seconds, now());
}

void Engine::close_job(JobId id) {
  Lock lk(*this);
  state_.close_job(id);
}

void Engine::end_job(const std::string& name, Caller caller) {
  check_text("the job name", name, kMaxNameBytes);
  Lock lk(*this);
  state_.end_job(name, caller);
}

v1::StatusReply Engine::status() {
  // Before taking the lock: until the arena is populated this reads /proc (its mapping does not
  // change under the lock anyway).
  const uint64_t huge_bytes = arena_.huge_page_bytes();
  const std::string pages = arena_page_setting();
  const bool ready = arena_.ready();
  const std::optional<PreparedStore::Stats> disk = disk_ ? std::optional(disk_->stats()) : std::nullopt;
  Lock lk(*this);
  v1::StatusReply out = state_.status(now());
  out.set_arena_huge_bytes(huge_bytes);
  out.set_arena_pages(pages);
  out.set_arena_ready(ready);
  out.set_loader_threads(static_cast<uint32_t>(loaders_.size()));
  out.set_uptime_seconds(std::chrono::duration<double>(Clock::now() - started_).count());
  out.set_pid(static_cast<uint32_t>(getpid()));
  if (disk) {
    const PreparedStore::Stats& d = *disk;
    v1::DiskCacheStatus* s = out.mutable_disk_cache();
    s->set_dir(options_.disk_cache);
    s->set_capacity(d.capacity);
    s->set_bytes(d.bytes);
    s->set_items(d.items);
    s->set_hits(d.hits);
    s->set_misses(d.misses);
    s->set_corrupt(d.corrupt);
    s->set_written(d.written);
    s->set_queued_bytes(d.queued_bytes);
    s->set_admitting(d.admitting);
    s->set_stopped(d.stopped);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Threads

void Engine::dispatch_loop() {
  Lock lk(*this);
  while (!state_.stopping()) {
    const double t = now();
    const double due = state_.dispatch(t);
    // Sleep until the next round is due, or until an event (acknowledgement, drop, join, leave,
    // shutdown) notifies: no polling, so an idle daemon or one whose jobs are all stalled sleeps.
    lk.flush();
    if (due == Dispatcher::kNever) {
      dispatch_cv_.wait(lk.native());
    } else {
      // At least 100 µs, so that rounding in the credit arithmetic cannot spin.
      const double wait = std::max(due - t, 1e-4);
      dispatch_cv_.wait_for(lk.native(), std::chrono::duration<double>(wait));
    }
  }
}

void Engine::loader_loop() {
  std::vector<uint8_t> raw, prepared;
  Lock lk(*this);
  for (;;) {
    std::optional<ServingState::LoadTask> task;
    while (!(task = state_.take_task()) && !state_.stopping()) {
      release_if_large(prepared);  // idle: a very large item's bytes do not stay with the thread
      lk.flush();
      loader_cv_.wait(lk.native());
    }
    if (!task) return;  // stopping
    const CacheKey key = task->key;
    // Claimed first (decoded forms whose size is known): prepared straight into its block, one
    // copy fewer.
    const Placement* claimed = nullptr;
    if (task->claim_size > 0) {
      claimed = claim(key, task->claim_size, task->claim_shape, lk);
      if (state_.stopping()) return;  // nothing was placed
      if (!claimed) {
        state_.no_room(key, task->claim_size);
        continue;
      }
    }
    lk.unlock();
    std::span<uint8_t> block;
    if (claimed && claimed->extents.size() == 1) block = {arena_.data() + claimed->extents[0].offset, claimed->length};
    const LoadedItem loaded =
        load_item(*task->dataset, task->item, block, raw, prepared, disk_.get(), claimed ? claimed->length : 0);
    // Split between blocks: prepared, then copied (pinned, so no lock needed).
    if (claimed && block.empty() && loaded.error.empty()) copy_in(claimed->extents, prepared);
    lk.lock();
    // Shutting down: take nothing more, and give back what was claimed. (Blocks taken and then
    // abandoned on seeing stopping would be arena bytes no cache entry accounts for.)
    if (state_.stopping()) {
      if (claimed) state_.discard(key);
      return;
    }
    if (claimed) {
      state_.loaded_in_place(key, loaded);
      continue;
    }
    const Placement* placed = nullptr;
    if (state_.prepared(key, loaded, prepared.size(), &placed) == ServingState::Next::kDone) continue;
    if (!placed) {
      placed = claim(key, prepared.size(), loaded.shape, lk);
      if (state_.stopping()) return;  // nothing was placed
      if (!placed) {
        state_.no_room(key, prepared.size());
        continue;
      }
    }
    lk.unlock();
    copy_in(placed->extents, prepared);
    lk.lock();
    state_.stored(key);
  }
}

const Placement* Engine::claim(CacheKey key, uint64_t size, ImageSize shape, Lock& lk) {
  // Reservations guarantee the bytes once unpinned items are evicted, and place() needs no more
  // than the bytes, so no load waits on fragmentation. Waiting is left as a safety net: it counts
  // in space_waits, and gives up after 30 s rather than hang the item's jobs.
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  bool waited = false;
  while (!state_.stopping() && Clock::now() < give_up) {
    if (const Placement* placed = state_.place(key, size, shape)) return placed;
    if (!waited) state_.count_space_wait();
    waited = true;
    lk.flush();
    space_cv_.wait_for(lk.native(), std::chrono::milliseconds(100));
  }
  return nullptr;
}

void Engine::copy_in(const std::vector<Extent>& extents, const std::vector<uint8_t>& bytes) {
  uint64_t copied = 0;
  for (const Extent& e : extents) {
    const uint64_t n = std::min(e.length, bytes.size() - copied);
    std::memcpy(arena_.data() + e.offset, bytes.data() + copied, n);
    copied += n;
  }
}

}  // namespace joader
