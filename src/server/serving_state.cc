#include "server/serving_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <unordered_set>

#include <fmt/format.h>

#include "common/protocol.h"
#include "ipc/arena_allocator.h"

namespace joader {

// A registered dataset and its jobs, by sampler slot.
struct ServingState::ServedDataset : Dataset {
  std::map<JobSlot, Job*> jobs;
  uid_t owner;  // who added it (server/ownership.h)
};

struct ServingState::Job {
  Job(uint32_t dataset, NextUses& next_uses) : pending(dataset, next_uses) {}

  JobId id;
  std::string name;
  uid_t owner;  // who opened it (server/ownership.h)
  ServedDataset* ds;
  JobSlot slot;
  uint32_t batch, epochs;
  bool drop_last;
  uint64_t subset_size;
  std::string augment;                            // its description, for status

  JobQueue<Entry> pending;                        // decided, not yet sent: the window, then the plan
  std::map<uint64_t, std::vector<Entry>> sent;    // seq -> delivered, not yet acknowledged
  uint64_t next_seq = 0;
  // Its credit, rate, queue length (the pending and sent items) and reservation: in dispatcher_.

  double wait_seconds = 0;                        // the consumer's waits, from its acks
  uint64_t skipped_pending = 0;                   // kFailed entries in pending (on_error skip)
  std::vector<ItemId> skips_to_report;            // skipped items not yet told to the job (v1::Batch::skipped)

  uint64_t delivered = 0, delivered_in_epoch = 0;
  uint32_t epoch = 0;
  bool closed = false;
  std::optional<EngineError> failure;
  std::function<void()> on_change;   // see Engine::open_job()
};

ServingState::ServingState(ServingOptions options, OnDisk on_disk)
    : options_(std::move(options)),
      dispatcher_(ArenaAllocator(options_.cache_bytes).free_bytes(), 0.0, [this] {
        DispatcherOptions o;
        if (options_.policy == "planned") o.plan_span = kDefaultPlanSpan;
        return o;
      }()) {
  PolicyContext ctx;
  ctx.signature = [this](CacheKey k) -> uint64_t {
    const ServedDataset* ds = dataset_by_index_[key_dataset(k)];
    return ds == nullptr ? 0 : ds->sampler->sets().signature(key_item(k));
  };
  ctx.request_rate = [this](uint32_t dataset, uint64_t sig) {
    const ServedDataset* ds = dataset_by_index_[dataset];
    return ds == nullptr ? 0.0 : dispatcher_.request_rate(dataset, sig, ds->sampler->sets());
  };
  ctx.next_use = [this](CacheKey k) { return next_uses_.next_use(k); };
  if (on_disk) {
    ctx.reloads_cheaply = [this, on_disk = std::move(on_disk)](CacheKey k) {
      const ServedDataset* ds = dataset_by_index_[key_dataset(k)];
      return ds != nullptr && ds->disk_namespace && on_disk(*ds->disk_namespace, key_item(k));
    };
  }
  dispatcher_.set_item_bytes([this](Dispatcher::JobKey id, uint64_t items) { return oldest_bytes(*jobs_.at(id), items); });
  try {
    store_ = std::make_unique<ItemStore>(options_.cache_bytes, make_policy(options_.policy, ctx), options_.extra_evictions);
  } catch (const std::invalid_argument& e) {
    throw EngineError(EngineError::kInvalidArgument, e.what());
  }
  if (options_.policy == "planned") next_uses_.set_listener([this](CacheKey k) { store_->rank_changed(k); });
}

ServingState::~ServingState() = default;

void ServingState::shut_down() {
  last_ = "shutting down";
  if (stopping_) return;
  stopping_ = true;
  for (auto& [id, job] : jobs_) fail_job(*job, EngineError::kUnavailable, "server shutting down");
}

void ServingState::check_invariants() const {
  if (!options_.check_invariants) return;
  auto broken = [this](const std::string& what) {
    std::fprintf(stderr, "joader: internal invariant broken after %s: %s\n", last_, what.c_str());
    std::abort();
  };
  if (const std::string what = store_->broken_invariant(); !what.empty()) broken(what);
  for (const auto& [id, j] : jobs_) {
    if (j->failure) continue;  // a failed job's entries stay as they were until it is closed
    uint64_t held = 0;
    for (const Entry& e : j->pending) held += e.state != Entry::kFailed;
    for (const auto& [seq, entries] : j->sent) held += entries.size();
    if (held != dispatcher_.queued(id)) {
      broken(fmt::format("job {} holds {} decided items, the dispatcher counts {}", j->name, held,
                         dispatcher_.queued(id)));
    }
  }
  uint64_t planned = 0;
  for (const auto& [id, j] : jobs_) planned += j->pending.planned();
  if (planned != next_uses_.planned()) {
    broken(fmt::format("{} planned entries, {} planned uses", planned, next_uses_.planned()));
  }
  if (dispatcher_.reserved_bytes() > store_->capacity() && !dispatcher_.any_unshrinkable()) {
    broken(fmt::format("reservations of {} bytes exceed the arena's {}", dispatcher_.reserved_bytes(),
                       store_->capacity()));
  }
}

// ---------------------------------------------------------------------------------------------
// Datasets

v1::DatasetInfo ServingState::info(const ServedDataset& ds) const {
  v1::DatasetInfo out = dataset_info(ds, ds.jobs.size());
  out.set_id(ds.index);
  out.set_owner_uid(ds.owner);
  return out;
}

const ServingState::ServedDataset* ServingState::registered(const v1::AddDatasetRequest& req) const {
  auto it = datasets_.find(req.name());
  if (it == datasets_.end()) return nullptr;
  if (const std::string diff = spec_difference(it->second->spec, req); !diff.empty()) {
    throw EngineError(EngineError::kAlreadyExists,
                      fmt::format("dataset '{}' already exists with {}; remove it first or choose another name",
                                  req.name(), diff));
  }
  return it->second.get();
}

void ServingState::check_room(Caller caller) const {
  if (datasets_.size() >= kMaxDatasets) {
    throw EngineError(EngineError::kResourceExhausted,
                      fmt::format("the daemon already has {} datasets, its limit: remove one first", kMaxDatasets));
  }
  if (!is_member(caller)) return;
  const auto n = std::ranges::count_if(datasets_, [&](const auto& d) { return d.second->owner == caller.uid; });
  if (size_t(n) >= kMaxDatasetsPerUser) {
    throw EngineError(EngineError::kResourceExhausted,
                      fmt::format("uid {} already has {} datasets, the most one user other than the daemon's owner may "
                                  "add: remove one first",
                                  caller.uid, n));
  }
}

void ServingState::check_new(const v1::AddDatasetRequest& req, Caller caller) const {
  if (!registered(req)) check_room(caller);
}

ItemAllowance ServingState::item_allowance(Caller caller) const {
  ItemAllowance out;
  if (!is_member(caller)) return out;
  out.limit = options_.max_items_per_user;
  for (const auto& [name, ds] : datasets_) {
    if (ds->owner == caller.uid) out.held += ds->source->size();
  }
  return out;
}

std::optional<v1::DatasetInfo> ServingState::existing(const v1::AddDatasetRequest& req,
                                                      const Dataset& indexed) const {
  const ServedDataset* existing = registered(req);
  if (existing == nullptr) return std::nullopt;
  // The same item list is the same dataset (a no-op); another one would silently give the ids jobs
  // hold (a resume, a train/val split) other files.
  if (existing->fingerprint != indexed.fingerprint) {
    throw EngineError(
        EngineError::kFailedPrecondition,
        fmt::format("dataset '{}' already exists with {} items (fingerprint {}), but its source now lists {} "
                    "(fingerprint {}): its files changed since it was added, and the item ids jobs use would name "
                    "other files. Remove the dataset and add it again once no job uses it, or add the new list "
                    "under another name",
                    req.name(), existing->source->size(), existing->fingerprint, indexed.source->size(),
                    indexed.fingerprint));
  }
  v1::DatasetInfo out = info(*existing);
  out.set_existed(true);
  return out;
}

v1::DatasetInfo ServingState::add_dataset(const v1::AddDatasetRequest& req, std::unique_ptr<Dataset> indexed,
                                          Caller caller) {
  last_ = "add_dataset";
  if (auto out = existing(req, *indexed)) return *out;  // added meanwhile
  check_room(caller);
  if (const ItemAllowance items = item_allowance(caller); indexed->source->size() > items.room()) {
    throw too_many_items(caller.uid, items, indexed->source->size(), false);
  }
  if (indexed->item_bytes > store_->capacity()) {
    throw EngineError(EngineError::kResourceExhausted,
                      fmt::format("an item of dataset '{}' needs {} bytes, more than the whole cache ({} bytes): start "
                                  "the daemon with a larger --cache-size",
                                  req.name(), indexed->item_bytes, store_->capacity()));
  }
  auto ds = std::make_unique<ServedDataset>();
  static_cast<Dataset&>(*ds) = std::move(*indexed);
  ds->index = static_cast<uint32_t>(dataset_by_index_.size());
  ds->owner = caller.uid;
  const uint64_t seed = options_.seed ? *options_.seed * 0x9e3779b97f4a7c15ULL + ds->index + 1
                                      : (uint64_t{std::random_device{}()} << 32 | std::random_device{}());
  ds->sampler = make_sampler(options_.sampler, static_cast<uint32_t>(ds->source->size()), seed);
  ds->sampler->set_observer(store_->observer_for(ds->index));
  dataset_by_index_.push_back(ds.get());
  auto& slot = datasets_[req.name()] = std::move(ds);
  ++datasets_version_;
  return info(*slot);
}

void ServingState::set_reindexed(const std::string& name, const std::string& why) {
  if (const auto it = datasets_.find(name); it != datasets_.end()) it->second->reindexed = why;
}

std::vector<v1::DatasetInfo> ServingState::list_datasets() const {
  std::vector<v1::DatasetInfo> out;
  for (const auto& [name, ds] : datasets_) out.push_back(info(*ds));
  return out;
}

std::optional<uint64_t> ServingState::remove_dataset(const std::string& name, Caller caller) {
  last_ = "remove_dataset";
  auto it = datasets_.find(name);
  if (it == datasets_.end()) throw EngineError(EngineError::kNotFound, fmt::format("unknown dataset '{}'", name));
  ServedDataset& ds = *it->second;
  if (!may_manage(ds.owner, caller)) {
    throw EngineError(EngineError::kPermissionDenied,
                      "cannot remove: " + management_refusal(fmt::format("dataset '{}'", name), ds.owner, caller));
  }
  if (!ds.jobs.empty()) {
    throw EngineError(EngineError::kFailedPrecondition,
                      fmt::format("dataset '{}' has {} active job(s)", name, ds.jobs.size()));
  }
  store_->discard_unpinned(ds.index);  // free its cached items now
  const std::optional<uint64_t> disk_namespace = ds.disk_namespace;
  // Loads still in flight may point at the dataset: keep the object until they are done.
  dataset_by_index_[ds.index] = nullptr;
  retired_.push_back(std::move(it->second));
  datasets_.erase(it);
  ++datasets_version_;
  reap_retired();
  return disk_namespace;
}

std::pair<std::vector<SavedDataset>, uint64_t> ServingState::saved_datasets() const {
  std::vector<SavedDataset> saved;
  for (const auto& [name, ds] : datasets_) saved.push_back({ds->spec, ds->fingerprint, ds->source->size(), ds->owner});
  return {std::move(saved), datasets_version_};
}

void ServingState::reap_retired() {
  std::erase_if(retired_, [this](const std::unique_ptr<ServedDataset>& ds) {
    return std::none_of(loads_.begin(), loads_.end(), [&](const auto& load) { return load.second.dataset == ds.get(); });
  });
}

// ---------------------------------------------------------------------------------------------
// Jobs

void ServingState::wake(Job& j) {
  if (j.on_change) j.on_change();
}

ServingState::JobId ServingState::open_job(const v1::Register& req, v1::Registered* reply,
                                           std::function<void()> on_change, double now, Caller caller) {
  last_ = "open_job";
  if (stopping_) throw EngineError(EngineError::kUnavailable, "server shutting down");
  auto dit = datasets_.find(req.dataset());
  if (dit == datasets_.end()) {
    std::string known;
    for (const auto& [name, ds] : datasets_) known += (known.empty() ? "" : ", ") + name;
    throw EngineError(EngineError::kNotFound,
                      fmt::format("unknown dataset '{}' (known: {})", req.dataset(),
                                  known.empty() ? "none; add one with `joader dataset add`" : known));
  }
  ServedDataset& ds = *dit->second;
  if (is_member(caller)) {
    const auto mine = [&](const auto& j) { return j.second->owner == caller.uid; };
    if (const auto n = std::ranges::count_if(ds.jobs, mine); size_t(n) >= kMaxJobsPerUserAndDataset) {
      throw EngineError(EngineError::kResourceExhausted,
                        fmt::format("uid {} already has {} jobs on dataset '{}', the most one user other than the "
                                    "daemon's owner may hold (half of its {}); close some first",
                                    caller.uid, n, req.dataset(), kMaxJobs));
    }
    if (const auto n = std::ranges::count_if(jobs_, mine); size_t(n) >= kMaxJobsPerUser) {
      throw EngineError(EngineError::kResourceExhausted,
                        fmt::format("uid {} already has {} jobs, the most one user other than the daemon's owner may "
                                    "hold; close some first",
                                    caller.uid, n));
    }
  }
  const std::string augment = check_augment(req, ds);
  std::vector<ItemId> subset(req.ids().begin(), req.ids().end());
  if (subset.empty()) {
    subset.resize(ds.source->size());
    std::iota(subset.begin(), subset.end(), ItemId{0});
  }
  const uint64_t subset_size = subset.size();
  std::vector<ItemId> consumed(req.resume_consumed().begin(), req.resume_consumed().end());
  JobSlot slot;
  try {
    slot = ds.sampler->add_job(std::move(subset), req.epochs(), req.resume() ? req.resume_epoch() : 0, consumed,
                               req.ordered());
  } catch (const SamplerError& e) {
    throw EngineError(e.code() == SamplerError::kFull ? EngineError::kResourceExhausted : EngineError::kInvalidArgument,
                      e.what());
  }
  const std::span<const ItemId> ids{req.ids().data(), static_cast<size_t>(req.ids().size())};
  const uint64_t batch_bound = ds.batch_bound(ids, req.batch_size());
  // A window larger than the cache could never fill: more prefetch than fits is what fits (so that
  // no request, e.g. prefetch 10^9, makes the daemon hold decisions it cannot serve).
  const uint32_t prefetch = static_cast<uint32_t>(std::min<uint64_t>(
      req.prefetch() == 0 ? 4 : req.prefetch(), std::max<uint64_t>(1, store_->capacity() / std::max<uint64_t>(batch_bound, 1))));
  const uint64_t mean_bytes = ds.mean_bytes(ids);
  if (batch_bound > store_->capacity()) {
    ds.sampler->remove_job(slot);
    throw EngineError(EngineError::kResourceExhausted,
                      fmt::format("one batch of {} items needs up to {} bytes (its largest items), more than the "
                                  "cache ({} bytes): use a smaller batch or a larger --cache-size",
                                  req.batch_size(), batch_bound, store_->capacity()));
  }
  auto job = std::make_shared<Job>(ds.index, next_uses_);
  job->id = next_job_id_++;
  job->name = req.name().empty() ? fmt::format("job-{}", job->id) : req.name();
  job->owner = caller.uid;
  job->ds = &ds;
  job->slot = slot;
  job->batch = req.batch_size();
  job->epochs = req.epochs();
  job->drop_last = req.drop_last();
  job->subset_size = subset_size;
  job->augment = augment;
  job->epoch = ds.sampler->epoch(slot);
  job->on_change = std::move(on_change);
  if (req.resume() && job->epoch == req.resume_epoch()) job->delivered_in_epoch = consumed.size();
  ds.jobs[slot] = job.get();
  jobs_[job->id] = job;
  // The mean item size (for the plans' horizon) and a batch's bound by the largest items.
  dispatcher_.add_job(job->id, {ds.index, slot, job->batch, prefetch, mean_bytes, subset_size, batch_bound}, now);
  if (ds.sampler->finished(slot)) dispatcher_.stop_job(job->id);  // resumed after its last epoch

  reply->set_job(job->name);
  reply->set_items_per_epoch(subset_size);
  if (!ds.prep.raw) {
    reply->set_height(ds.prep.crop);
    reply->set_width(ds.prep.crop);
    reply->set_channels(3);
  }
  wake_dispatcher();
  return job->id;
}

ServingState::Job& ServingState::find_job(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    throw_if_ended(id);
    throw EngineError(EngineError::kNotFound, "no such job");
  }
  return *it->second;
}

void ServingState::throw_if_ended(JobId id) const {
  if (const auto ended = ended_.find(id); ended != ended_.end()) throw ended->second;
}

// ---------------------------------------------------------------------------------------------
// Rounds

double ServingState::dispatch(double now) {
  last_ = "a round";
  while (auto round = dispatcher_.next_round(now)) {
    ServedDataset* ds = dataset_by_index_[round->group];
    if (!decide_round(*ds, round->slots, now)) break;  // nothing decided: wait for an event
  }
  for (Dispatcher::JobKey id : dispatcher_.take_window_changes()) {
    if (auto it = jobs_.find(id); it != jobs_.end()) fit_window(*it->second, now);
  }
  for (Dispatcher::JobKey id : dispatcher_.starving()) {
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      fail_job(*it->second, EngineError::kResourceExhausted, no_room_for_job(*it->second));
    }
  }
  return dispatcher_.next_due(now);
}

bool ServingState::decide_round(ServedDataset& ds, const std::vector<JobSlot>& ready, double now) {
  std::vector<Decision> decisions;
  ds.sampler->round(ready, decisions);
  for (const Decision& d : decisions) {
    Job& j = *ds.jobs.at(d.job);
    Entry decided;
    decided.item = d.item;
    decided.label = ds.source->item(d.item).label;
    decided.epoch = d.epoch;
    decided.last_of_epoch = ds.sampler->epoch(d.job) > d.epoch;
    Entry* accessed = j.pending.decide(std::move(decided), dispatcher_.queued(j.id) < dispatcher_.window(j.id),
                                       due_micros(dispatcher_.due(j.id, now)));
    dispatcher_.decided(j.id, 1);
    if (accessed != nullptr) start(j, *accessed);
  }
  for (JobSlot slot : ready) {
    Job& j = *ds.jobs.at(slot);
    if (ds.sampler->finished(slot)) dispatcher_.stop_job(j.id);
    update_waiting(j);
  }
  return !decisions.empty();
}

void ServingState::start(Job& j, Entry& e) {
  const CacheKey key = j.pending.key(e);
  if (auto l = loads_.find(key); l != loads_.end()) {
    l->second.waiters.push_back({&j, &e});
  } else if (store_->contains(key)) {
    store_->touch(key);
    store_->pin(key);
    e.pinned = true;
    e.state = Entry::kReady;
    e.placed = &store_->at(key);
    ++n_hits_;
    wake(j);
  } else {
    loads_[key] = Load{j.ds, e.item, {{&j, &e}}};
    tasks_.push_back(key);
    ++n_loads_;
    ++j.ds->loads;
    wake_loader();
  }
}

void ServingState::fit_window(Job& j, double now) {
  // Entries beyond the window (after the items its consumer holds) become planned again: unpinned,
  // still decided. A job with skipped entries pending is never shrunk (set_shrinkable), so the
  // entries beyond the window are one run and the planned ones stay the queue's last entries.
  const uint64_t window = dispatcher_.window(j.id);
  uint64_t position = 0;
  for (const auto& [seq, entries] : j.sent) position += entries.size();
  size_t first = 0;  // the first entry to demote: none of the window fits when its consumer holds it all
  for (size_t i = 0; i < j.pending.window_size(); ++i) {
    const Entry& e = j.pending[i];
    if (e.state == Entry::kFailed) {
      first = i + 1;
      continue;
    }
    if (position++ < window) first = i + 1;
  }
  const auto left = j.pending.demote(first, due_micros(dispatcher_.due(j.id, now)));
  for (CacheKey key : left.unpin) store_->unpin(key);
  for (Entry* e : left.loading) {
    if (auto l = loads_.find(j.pending.key(*e)); l != loads_.end()) {
      std::erase_if(l->second.waiters, [&](const auto& w) { return w.second == e; });
    }
  }
  wake_space();
  fill_window(j);  // a window that grew loads what entered it
}

std::string ServingState::no_room_for_job(const Job& j) const {
  struct Holder {
    double idle;
    const Job* job;
  };
  std::vector<Holder> holders;  // the longest idle first: the likeliest to be forgotten
  for (const auto& [id, other] : jobs_) {
    if (other.get() != &j && dispatcher_.queued(id) > 0) holders.push_back({dispatcher_.idle_seconds(id), other.get()});
  }
  std::sort(holders.begin(), holders.end(), [](const Holder& a, const Holder& b) { return a.idle > b.idle; });
  std::string who;
  for (size_t i = 0; i < holders.size() && i < 8; ++i) {
    who += fmt::format("{}{} ({} items, idle {:.0f} s)", who.empty() ? "" : ", ", holders[i].job->name,
                       dispatcher_.queued(holders[i].job->id), holders[i].idle);
  }
  if (holders.size() > 8) who += fmt::format(" and {} more", holders.size() - 8);
  return fmt::format("no room in the cache for a batch of job {}: {} of {} bytes are reserved by the items other jobs "
                     "hold{}; close loaders that are not in use or end them with `joader job rm NAME` (idle ones "
                     "keep only the batches they were sent), use a smaller batch or prefetch, or start the daemon "
                     "with a larger --cache-size",
                     j.name, dispatcher_.reserved_bytes(), store_->capacity(), who.empty() ? "" : " — " + who);
}

void ServingState::fill_window(Job& j) {
  while (j.pending.planned() > 0 && !j.failure &&
         dispatcher_.queued(j.id) - j.pending.planned() < dispatcher_.window(j.id)) {
    start(j, j.pending.promote());
  }
  update_waiting(j);
}

void ServingState::update_waiting(Job& j) {
  // The entries up to its next batch (as batch_ready counts them): one still loading makes it wait.
  bool waiting = false;
  uint32_t counted = 0;
  for (const Entry& e : j.pending) {
    if (e.state == Entry::kPlanned) break;  // a shrunk window: waiting for its consumer, not for loads
    if (e.state == Entry::kLoading) {
      waiting = true;
      break;
    }
    if (e.state == Entry::kReady) ++counted;
    if (counted == j.batch || e.last_of_epoch) break;
  }
  if (!j.closed) dispatcher_.set_waiting(j.id, waiting);
}

uint64_t ServingState::oldest_bytes(const Job& j, uint64_t items) const {
  // An item decided twice (in two epochs) is one item in the arena: counted once.
  std::unordered_set<ItemId> seen;
  uint64_t bytes = 0;
  auto count = [&](const Entry& e) {
    if (seen.insert(e.item).second) bytes += j.ds->bytes_of(e.item);
    --items;
  };
  for (const auto& [seq, entries] : j.sent) {
    for (const Entry& e : entries) {
      if (items == 0) return bytes;
      count(e);
    }
  }
  for (const Entry& e : j.pending) {
    if (items == 0) break;
    if (e.state != Entry::kFailed) count(e);  // failed ones were dropped from the dispatcher's count
  }
  return bytes;
}

bool ServingState::within_window(const Job& j, size_t take) const {
  uint64_t items = 0;
  for (const auto& [seq, entries] : j.sent) items += entries.size();
  for (size_t i = 0; i < take; ++i) items += j.pending[i].state != Entry::kFailed;
  return items <= dispatcher_.window(j.id);
}

// ---------------------------------------------------------------------------------------------
// Loads

std::optional<ServingState::LoadTask> ServingState::take_task() {
  last_ = "taking a load";
  if (!retired_.empty()) reap_retired();  // the last load of a removed dataset may just have ended
  if (stopping_ || tasks_.empty()) return std::nullopt;
  const CacheKey key = tasks_.front();
  tasks_.pop_front();
  const Load& load = loads_.at(key);
  LoadTask task{key, load.dataset, load.item, 0, {}};
  // Decoded crops all have one size, and an image stored at its own size has the one its header
  // gave at `dataset add`: while jobs wait for the item, its arena blocks are claimed first and it
  // is prepared straight into them, one copy of each item fewer (docs/BENCHMARKS.md). Raw items,
  // own-size images whose header could not be read, and items no job waits for any more (kept
  // only if they fit without evicting) are placed after preparing.
  const Dataset& ds = *load.dataset;
  if (!ds.prep.raw && !load.waiters.empty()) {
    const ImageSize shape = own_size(ds.prep)
                                ? (load.item < ds.item_shapes.size() ? ds.item_shapes[load.item] : ImageSize{})
                                : ImageSize{ds.prep.crop, ds.prep.crop};
    if (shape.width != 0 && shape.height != 0) {
      task.claim_size = uint64_t{shape.width} * shape.height * 3;
      task.claim_shape = shape;
    }
  }
  return task;
}

const Placement* ServingState::place(CacheKey key, uint64_t size, ImageSize shape) {
  last_ = "placing a loaded item";
  return store_->place(key, size, shape.width, shape.height);
}

void ServingState::discard(CacheKey key) {
  last_ = "discarding an item";
  store_->discard(key);
  wake_space();
}

void ServingState::loaded_in_place(CacheKey key, const LoadedItem& loaded) {
  last_ = "finishing a load";
  load_times_.add(loaded.seconds);
  n_disk_reads_ += loaded.from_disk;
  if (loaded.error.empty()) {
    store_->unpin(key);
    wake_space();  // it may be evicted now
  } else {
    discard(key);
  }
  finish_load(key, loaded.error.empty(), loaded.error);
}

ServingState::Next ServingState::prepared(CacheKey key, const LoadedItem& loaded, uint64_t size,
                                          const Placement** placed) {
  last_ = "preparing a load";
  *placed = nullptr;
  load_times_.add(loaded.seconds);
  n_disk_reads_ += loaded.from_disk;
  const Load& load = loads_.at(key);
  std::string error = loaded.error;
  const uint64_t rsize = ArenaAllocator::rounded(std::max<uint64_t>(size, 1));
  if (error.empty() && rsize > load.dataset->bytes_of(load.item)) {  // the reservations would not cover it
    error = load.dataset->item_error(
        load.item, fmt::format("prepared size {} bytes is more than the {} bytes its header gave when the dataset "
                               "was added (did the file change?)",
                               size, load.dataset->bytes_of(load.item)));
  }
  if (!error.empty()) {
    finish_load(key, false, error);
    return Next::kDone;
  }
  if (!load.waiters.empty()) return Next::kPlace;
  // Every job that wanted the item has left: its bytes are not covered by any reservation, so keep
  // them only if they fit without evicting anything.
  *placed = store_->place_if_free(key, size, loaded.shape.width, loaded.shape.height);
  if (*placed) return Next::kPlace;
  finish_load(key, false, "");
  return Next::kDone;
}

void ServingState::stored(CacheKey key) {
  last_ = "finishing a load";
  store_->unpin(key);
  wake_space();  // it may be evicted now
  finish_load(key, true, "");
}

void ServingState::no_room(CacheKey key, uint64_t size) {
  last_ = "giving up a load";
  const Load& load = loads_.at(key);
  finish_load(key, false,
              load.dataset->item_error(
                  load.item, fmt::format("no room for its {} bytes in the cache for 30 s: {} of {} bytes are held by "
                                         "items that jobs have not acknowledged (start the daemon with a larger "
                                         "--cache-size)",
                                         ArenaAllocator::rounded(std::max<uint64_t>(size, 1)), store_->pinned_bytes(),
                                         store_->capacity())));
}

void ServingState::finish_load(CacheKey key, bool loaded, const std::string& error) {
  auto it = loads_.find(key);
  Load load = std::move(it->second);
  loads_.erase(it);
  if (!loaded) {
    if (!error.empty() && load.dataset->skip_bad_items() && load.dataset->skipped.insert(load.item).second) {
      // Every job that was to receive the item misses it; each file is counted and logged once.
      ++n_skipped_;
      std::fprintf(stderr, "joader: dataset %s: skipping %s\n", load.dataset->spec.name().c_str(), error.c_str());
    }
    for (auto [job, entry] : load.waiters) {
      entry->state = Entry::kFailed;
      if (load.dataset->skip_bad_items()) {
        if (job->skipped_pending++ == 0) dispatcher_.set_shrinkable(job->id, false);
        // A skipped entry will never be delivered: it stops counting as queued now, so that the
        // job earns catch-up credit for the items that replace it.
        dispatcher_.dropped(job->id, 1);
        fill_window(*job);
        wake_dispatcher();
        wake(*job);
      } else {
        fail_job(*job, EngineError::kDataLoss, error);
      }
    }
    return;
  }
  const Placement& placed = store_->at(key);
  for (auto [job, entry] : load.waiters) {
    store_->pin(key);
    entry->pinned = true;
    entry->state = Entry::kReady;
    entry->placed = &placed;
    update_waiting(*job);
    wake(*job);
  }
}

// ---------------------------------------------------------------------------------------------
// Delivery

ServingState::Poll ServingState::poll_batch(JobId id, v1::Batch* out) {
  last_ = "a delivery";
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    throw_if_ended(id);
    throw EngineError(EngineError::kUnavailable, "job closed");
  }
  return take_batch(*it->second, out);
}

// A batch is ready when the next `batch` deliverable entries are prepared, or the entries up to
// the end of the epoch are. Entries that failed under --on-error skip are passed over.
bool ServingState::batch_ready(Job& j, size_t* take) {
  uint32_t ready = 0;
  for (size_t n = 0; n < j.pending.size(); ++n) {
    const Entry& e = j.pending[n];
    if (e.state == Entry::kLoading || e.state == Entry::kPlanned) return false;
    if (e.state == Entry::kReady) ++ready;
    if (ready == j.batch || e.last_of_epoch) {
      *take = n + 1;
      return true;
    }
  }
  return false;
}

ServingState::Poll ServingState::take_batch(Job& j, v1::Batch* out) {
  for (;;) {
    if (j.failure) throw *j.failure;
    if (j.closed) throw EngineError(EngineError::kUnavailable, "job closed");
    size_t take = 0;
    if (j.sent.size() >= kMaxUnacknowledged) return Poll::kWait;  // until its consumer acknowledges one
    if (batch_ready(j, &take) && within_window(j, take)) {
      std::vector<Entry> delivered;
      const bool last = j.pending[take - 1].last_of_epoch;
      const uint32_t epoch = j.pending[take - 1].epoch;
      for (Entry& e : j.pending.take(take)) {
        if (e.state == Entry::kFailed) {  // skipped entries are left out
          j.skips_to_report.push_back(e.item);
          if (--j.skipped_pending == 0) dispatcher_.set_shrinkable(j.id, true);
        } else {
          delivered.push_back(std::move(e));
        }
      }
      if (delivered.empty() || (j.drop_last && last && delivered.size() < j.batch)) {
        for (const Entry& e : delivered) store_->unpin(j.pending.key(e));
        dispatcher_.dropped(j.id, delivered.size());
        fill_window(j);
        delivered.clear();
        wake_space();
        wake_dispatcher();
        // The end of an epoch must reach the client even when nothing of its last batch is left
        // (dropped by drop_last, or every item skipped): it gets an empty batch marked last, so
        // that its epoch count and resume state move on.
        if (!last) continue;
      }
      out->Clear();
      out->set_seq(j.next_seq++);
      out->set_epoch(epoch);
      out->set_last_of_epoch(last);
      // Skipped items: also those of batches left out entirely.
      out->mutable_skipped()->Add(j.skips_to_report.begin(), j.skips_to_report.end());
      j.skips_to_report.clear();
      const bool split = std::any_of(delivered.begin(), delivered.end(),
                                     [](const Entry& e) { return e.placed->extents.size() != 1; });
      for (const Entry& e : delivered) {
        out->add_ids(e.item);
        out->add_labels(e.label);
        const Placement& at = *e.placed;
        out->add_offsets(at.extents.front().offset);
        out->add_lengths(at.length);
        if (split) {  // else (the usual case) offsets and lengths say it all
          out->add_extent_counts(static_cast<uint32_t>(at.extents.size()));
          for (const Extent& x : at.extents) {
            out->add_extent_offsets(x.offset);
            out->add_extent_lengths(x.length);
          }
        }
        if (own_size(j.ds->prep)) {
          out->add_widths(at.width);
          out->add_heights(at.height);
        }
      }
      n_deliveries_ += delivered.size();
      j.ds->deliveries += delivered.size();
      dispatcher_.delivered(j.id, delivered.size());
      j.delivered += delivered.size();
      j.epoch = epoch;
      j.delivered_in_epoch += delivered.size();
      if (last) {
        ++j.epoch;
        j.delivered_in_epoch = 0;
      }
      j.sent[out->seq()] = std::move(delivered);
      update_waiting(j);
      return Poll::kBatch;
    }
    if (j.ds->sampler->finished(j.slot) && j.pending.empty() && j.sent.empty()) return Poll::kDone;
    return Poll::kWait;
  }
}

void ServingState::ack(JobId id, uint64_t seq, double wait_seconds, double now) {
  last_ = "an acknowledgement";
  Job& job = find_job(id);
  if (std::isfinite(wait_seconds) && wait_seconds > 0) job.wait_seconds += wait_seconds;
  auto it = job.sent.find(seq);
  if (it == job.sent.end()) {
    throw EngineError(EngineError::kInvalidArgument, fmt::format("acknowledgement of unknown batch {}", seq));
  }
  for (const Entry& e : it->second) store_->unpin(job.pending.key(e));
  const uint64_t items = it->second.size();
  job.sent.erase(it);  // first: the dispatcher's reservation reads the job's oldest items
  dispatcher_.acknowledged(id, items, now);
  fill_window(job);
  wake(job);
  wake_space();
  wake_dispatcher();
}

void ServingState::fail_job(Job& j, EngineError::Code code, const std::string& message) {
  if (!j.failure) j.failure = EngineError(code, message);
  dispatcher_.fail_job(j.id);
  wake(j);
  wake_dispatcher();  // the jobs it held back (while it starved) may start batches again
}

void ServingState::release(Job& j) {
  j.closed = true;
  for (auto& [key, load] : loads_) {
    std::erase_if(load.waiters, [&j](const auto& w) { return w.first == &j; });
  }
  for (CacheKey key : j.pending.clear()) store_->unpin(key);
  for (const auto& [seq, entries] : j.sent) {
    for (const Entry& e : entries) store_->unpin(j.pending.key(e));
  }
  j.sent.clear();
  dispatcher_.remove_job(j.id);
  j.ds->sampler->remove_job(j.slot);
  j.ds->jobs.erase(j.slot);
  wake(j);
  wake_space();
  wake_dispatcher();
  const JobId id = j.id;
  jobs_.erase(id);  // last: it holds the job's last reference
}

void ServingState::close_job(JobId id) {
  last_ = "releasing a job";
  ended_.erase(id);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  release(*it->second);
}

void ServingState::end_job(const std::string& name, Caller caller) {
  last_ = "ending a job";
  // Names need not be unique across uids: the caller's own job of that name goes first.
  const auto named = [&name](const auto& j) { return j.second->name == name; };
  auto it = std::find_if(jobs_.begin(), jobs_.end(),
                         [&](const auto& j) { return named(j) && may_manage(j.second->owner, caller); });
  if (it == jobs_.end()) {
    it = std::find_if(jobs_.begin(), jobs_.end(), named);
    if (it == jobs_.end()) throw EngineError(EngineError::kNotFound, fmt::format("no job named '{}'", name));
    throw EngineError(EngineError::kPermissionDenied,
                      "cannot end: " + management_refusal(fmt::format("job '{}'", name), it->second->owner, caller));
  }
  Job& job = *it->second;
  const EngineError why(EngineError::kFailedPrecondition,
                        fmt::format("job {} was ended by another client (joader job rm {})", name, name));
  ended_.emplace(job.id, why);
  fail_job(job, why.code(), why.what());
  release(job);
}

// ---------------------------------------------------------------------------------------------
// Status

v1::StatusReply ServingState::status(double now) const {
  v1::StatusReply out;
  out.set_loads(n_loads_);
  out.set_disk_reads(n_disk_reads_);
  out.set_deliveries(n_deliveries_);
  out.set_hits(n_hits_);
  out.set_evictions(store_->evictions());
  out.set_cache_bytes(store_->used());
  out.set_cache_capacity(store_->capacity());
  out.set_pinned_bytes(store_->pinned_bytes());
  out.set_skipped(n_skipped_);
  out.set_jobs_opened(next_job_id_ - 1);
  out.set_space_waits(n_space_waits_);
  out.set_split_items(store_->split_items());
  out.set_cached_items(store_->items());
  out.set_cached_blocks(store_->blocks());
  load_times_.write(out.mutable_load_seconds());
  out.set_policy(options_.policy);
  for (const auto& [name, ds] : datasets_) *out.add_datasets() = info(*ds);
  for (const auto& [id, j] : jobs_) {
    v1::JobStatus* s = out.add_jobs();
    s->set_name(j->name);
    s->set_id(id);
    s->set_owner_uid(j->owner);
    s->set_dataset(j->ds->spec.name());
    s->set_subset_size(j->subset_size);
    s->set_epoch(j->epoch);
    s->set_delivered(j->delivered);
    s->set_delivered_in_epoch(j->delivered_in_epoch);
    s->set_items_per_second(dispatcher_.shown_rate(id, now));
    s->set_queued(dispatcher_.queued(id));
    s->set_planned(j->pending.planned());
    s->set_batch_size(j->batch);
    s->set_epochs(j->epochs);
    s->set_augment(j->augment);
    s->set_ordered(j->ds->sampler->ordered(j->slot));
    s->set_wait_seconds(j->wait_seconds);
  }
  return out;
}

}  // namespace joader
