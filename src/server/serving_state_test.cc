// ServingState driven alone, on one thread, with the time as an argument: what each transition
// does to the jobs, the loads and the cache, and what it asks the threads to do (Wakeups). The
// loads are "run" by placing each item and storing it without reading anything: these tests are
// about the state's bookkeeping, not the bytes (engine_test.cc runs the real loads, on threads).
#include "server/serving_state.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/protocol.h"
#include "dispatch/dispatcher.h"
#include "testing/requests.h"
#include "ipc/arena_allocator.h"
#include "server/ownership.h"

namespace joader {
namespace {

ServingOptions options(const std::string& policy = "refcnt") {
  ServingOptions o;
  o.cache_bytes = 1 << 20;
  o.policy = policy;
  o.seed = 7;
  o.check_invariants = true;
  return o;
}

using test_support::job_request;
using test_support::synthetic;

// When a job opened at time 0 has its first round: once its start's gathering ends (the
// dispatcher's "Starting together").
const double kStart = DispatcherOptions{}.join_gather;

// What Engine::add_dataset does around its lock, on this thread; `disk_namespace`: the dataset's in
// the disk tier (Dataset::disk_namespace).
v1::DatasetInfo add(ServingState& state, const v1::AddDatasetRequest& request, Caller caller = {},
                    std::optional<uint64_t> disk_namespace = {}) {
  state.check_new(request);
  auto ds = std::make_unique<Dataset>();
  open_dataset(*ds, request, [](const std::string& spec, const std::function<void(size_t)>& progress,
                                const std::string& root) { return open_source(spec, progress, root); },
               "", {});
  size_items(*ds, {});
  ds->disk_namespace = disk_namespace;
  return state.add_dataset(request, std::move(ds), caller);
}

// Runs every queued load as a loader thread would, the item's bytes aside; `error`, when given,
// is the error every one of them ends with. Returns how many were run.
size_t run_loads(ServingState& state, const std::string& error = "") {
  size_t n = 0;
  while (auto task = state.take_task()) {
    ++n;
    LoadedItem loaded{task->claim_shape, error, 0.001};
    if (task->claim_size > 0) {
      EXPECT_NE(state.place(task->key, task->claim_size, task->claim_shape), nullptr);
      state.loaded_in_place(task->key, loaded);
      continue;
    }
    const Placement* placed = nullptr;
    if (state.prepared(task->key, loaded, 8 * 8 * 3, &placed) == ServingState::Next::kDone) continue;
    if (!placed) placed = state.place(task->key, 8 * 8 * 3, {8, 8});
    EXPECT_NE(placed, nullptr);
    state.stored(task->key);
  }
  return n;
}

// A consumer that takes its job's first three batches as they come (so that the job's rate is
// known), then stops acknowledging until `until`, while rounds and loads go on: its queue fills to
// its window. Returns the time reached.
double take_three_then_pause(ServingState& state, ServingState::JobId id, double until) {
  double t = kStart;
  v1::Batch b;
  for (int taken = 0; taken < 3; t += 0.05) {
    state.dispatch(t);
    run_loads(state);
    if (state.poll_batch(id, &b) == ServingState::Poll::kBatch) {
      state.ack(id, b.seq(), 0, t);
      ++taken;
    }
  }
  for (; t < until; t += 0.01) {
    state.dispatch(t);
    run_loads(state);
  }
  return t;
}

// Dataset "d" of 64 items and one job of batch 4 on it, opened at time 0, its first round formed.
ServingState::JobId open_one_job(ServingState& state, std::function<void()> on_change = {}) {
  add(state, synthetic("d", 64));
  v1::Registered reply;
  const auto id = state.open_job(job_request("d", 4, 1, 2), &reply, std::move(on_change), 0.0);
  state.dispatch(kStart);
  return id;
}

TEST(ServingState, TheCacheAsksTheDiskTierAboutItsOwnDatasetsItemsByTheDatasetsNamespace) {
  // The eviction order's "reloads cheaply" (PolicyContext) goes through the dataset's index in
  // the cache key to its disk tier namespace: asked only of the dataset that has one, with its
  // namespace and its item ids.
  std::set<std::pair<uint64_t, ItemId>> asked;
  ServingState state(options(), [&asked](uint64_t ns, ItemId item) {
    asked.insert({ns, item});
    return item % 2 == 0;
  });
  add(state, synthetic("plain", 64));  // no namespace: a raw dataset, or a daemon without the tier
  add(state, synthetic("kept", 48), {}, 77);
  v1::Registered reply;
  const auto plain = state.open_job(job_request("plain", 4, 1, 2), &reply, {}, 0.0);
  const auto kept = state.open_job(job_request("kept", 4, 1, 2), &reply, {}, 0.0);
  v1::Batch b;
  for (double t = kStart; t < 2.0; t += 0.01) {
    state.dispatch(t);
    run_loads(state);
    for (const auto id : {plain, kept}) {
      if (state.poll_batch(id, &b) == ServingState::Poll::kBatch) state.ack(id, b.seq(), 0, t);
    }
  }
  ASSERT_FALSE(asked.empty()) << "acknowledged items became evictable";
  for (const auto& [ns, item] : asked) {
    EXPECT_EQ(ns, 77u) << "only the dataset with a namespace, by its namespace";
    EXPECT_LT(item, 48u);
  }
}

TEST(ServingState, ARoundQueuesTheWindowsLoadsForTheLoadersAndTheBatchIsReadyOnceTheyAreStored) {
  ServingState state(options());
  add(state, synthetic("d", 64));
  state.take_wakeups();
  v1::Registered reply;
  int changes = 0;
  const auto id = state.open_job(job_request("d", 4, 1, 2), &reply, [&] { ++changes; }, 0.0);
  EXPECT_EQ(reply.items_per_epoch(), 64u);
  EXPECT_EQ(reply.width(), 8u);
  EXPECT_TRUE(state.take_wakeups().dispatcher) << "a job joined: a round may be due";

  state.dispatch(kStart);
  const auto w = state.take_wakeups();
  EXPECT_GT(w.loads, 0u) << "the window's items are new loads";
  v1::Batch batch;
  EXPECT_EQ(state.poll_batch(id, &batch), ServingState::Poll::kWait);

  const size_t loads = run_loads(state);
  EXPECT_EQ(loads, w.loads) << "one loader woken per task";
  EXPECT_GE(loads, 4u) << "at least the first batch";
  EXPECT_LE(loads, 8u) << "at most the window: prefetch 2 batches of 4";
  EXPECT_GT(changes, 0) << "its on_change tells the job a batch became ready";
  ASSERT_EQ(state.poll_batch(id, &batch), ServingState::Poll::kBatch);
  EXPECT_EQ(batch.ids_size(), 4);
  EXPECT_EQ(batch.seq(), 0u);
  EXPECT_EQ(state.status(0.1).pinned_bytes(), loads * ArenaAllocator::rounded(8 * 8 * 3))
      << "the window's items stay pinned, the sent batch's until it is acknowledged";

  state.take_wakeups();
  state.ack(id, batch.seq(), 0, 0.1);
  const auto after_ack = state.take_wakeups();
  EXPECT_TRUE(after_ack.dispatcher) << "an acknowledgement earns credit: the next round may be due";
  EXPECT_TRUE(after_ack.space) << "its items were unpinned";
  EXPECT_THROW(state.ack(id, batch.seq(), 0, 0.1), EngineError) << "a batch is acknowledged once";
}

// A consumer that stops (a training loop in its val pass) must hold no more than two batches: the
// rest of its window stays in the daemon, where it can give its room to other jobs.
TEST(ServingState, AJobIsSentAtMostTwoBatchesItHasNotAcknowledged) {
  ServingState state(options());
  add(state, synthetic("d", 64));
  v1::Registered reply;
  const auto id = state.open_job(job_request("d", 4, 2, 4), &reply, {}, 0.0);
  const double t = take_three_then_pause(state, id, 2.0);
  v1::Batch first, second, third;
  ASSERT_EQ(state.status(t).jobs(0).queued(), 16u) << "a window of 4 batches, loaded";
  ASSERT_EQ(state.poll_batch(id, &first), ServingState::Poll::kBatch);
  ASSERT_EQ(state.poll_batch(id, &second), ServingState::Poll::kBatch);
  static_assert(kMaxUnacknowledged == 2);
  EXPECT_EQ(state.poll_batch(id, &third), ServingState::Poll::kWait) << "a third batch is ready, but not sent";
  state.ack(id, first.seq(), 0, t);
  ASSERT_EQ(state.poll_batch(id, &third), ServingState::Poll::kBatch) << "sent once one is acknowledged";
  EXPECT_EQ(third.seq(), second.seq() + 1);
}

// A training loader in its val pass: its consumer holds the two batches it was sent and stops. A
// job that finds no room for its batch gets the rest of the paused job's window: those entries stay
// decided but are unpinned, and are loaded again once the paused job consumes again.
TEST(ServingState, APausedJobGivesTheRoomOfItsWindowBeyondItsTwoSentBatchesToAStarvingJob) {
  ServingOptions o = options();
  const uint64_t item = ArenaAllocator::rounded(8 * 8 * 3);
  o.cache_bytes = 20 * item;  // the paused job's window (16 items) and the new job's batch (8) do not fit
  ServingState state(o);
  add(state, synthetic("d", 64));
  v1::Registered reply;
  const auto paused = state.open_job(job_request("d", 4, 1, 4), &reply, {}, 0.0);
  double t = take_three_then_pause(state, paused, 1.0);
  v1::Batch b, held[2];
  ASSERT_EQ(state.poll_batch(paused, &held[0]), ServingState::Poll::kBatch);
  ASSERT_EQ(state.poll_batch(paused, &held[1]), ServingState::Poll::kBatch);
  ASSERT_EQ(state.status(t).jobs(0).queued(), 16u) << "its window: 2 batches sent, 2 loaded";
  ASSERT_EQ(state.status(t).pinned_bytes(), 16 * item);

  const auto other = state.open_job(job_request("d", 8, 1, 1), &reply, {}, t);
  bool served = false;
  for (const double start = t; t < start + 3.0 && !served; t += 0.05) {
    state.dispatch(t);
    run_loads(state);
    served = state.poll_batch(other, &b) == ServingState::Poll::kBatch;
  }
  ASSERT_TRUE(served) << "the new job starved beside the paused one";
  const v1::StatusReply s = state.status(t);
  EXPECT_EQ(s.jobs(0).queued(), 16u) << "the paused job's items stay decided";
  EXPECT_EQ(s.jobs(0).planned(), 8u) << "the two batches it was not sent are unpinned";
  EXPECT_LE(s.pinned_bytes(), 16 * item);

  // It consumes again: its planned items are loaded again, and its epoch is exact.
  state.ack(other, b.seq(), 0, t);
  state.close_job(other);
  std::multiset<uint32_t> ids;
  for (const v1::Batch& h : held) {
    ids.insert(h.ids().begin(), h.ids().end());
    state.ack(paused, h.seq(), 0, t);
  }
  for (int batches = 0; batches < 16 - 5 && t < 30; t += 0.01) {
    state.dispatch(t);
    run_loads(state);
    if (state.poll_batch(paused, &b) == ServingState::Poll::kBatch) {
      ids.insert(b.ids().begin(), b.ids().end());
      state.ack(paused, b.seq(), 0, t);
      ++batches;
    }
  }
  EXPECT_EQ(ids.size(), 64u - 3 * 4) << "every item of the epoch but the first three batches, once";
  EXPECT_EQ(std::set<uint32_t>(ids.begin(), ids.end()).size(), ids.size());
}

// A batch larger than the job's subset holds some items twice (a batch never spans two epochs,
// but a window of batches does): they are one item in the arena, reserved once, so that a cache
// that holds the subset serves the job.
TEST(ServingState, AnItemDecidedTwiceInAWindowIsReservedOnce) {
  ServingOptions o = options();
  const uint64_t item = ArenaAllocator::rounded(8 * 8 * 3);
  o.cache_bytes = 14 * item;
  ServingState state(o);
  add(state, synthetic("d", 64));
  v1::Register request = job_request("d", 8, 20, 3);
  for (uint32_t id = 0; id < 5; ++id) request.add_ids(id);
  v1::Registered reply;
  const auto id = state.open_job(request, &reply, {}, 0.0);
  std::multiset<uint32_t> got;
  v1::Batch b;
  int taken = 0;
  for (double t = kStart; t < 20 && got.size() < 100; t += 0.01) {
    state.dispatch(t);
    state.check_invariants();  // aborts if the reservations exceed the cache
    run_loads(state);
    // Three batches taken as they come (the job's rate is known), then a pause that lets its
    // window of 3 batches fill, several epochs deep.
    if ((taken < 3 || t > 1.5) && state.poll_batch(id, &b) == ServingState::Poll::kBatch) {
      got.insert(b.ids().begin(), b.ids().end());
      state.ack(id, b.seq(), 0, t);
      state.check_invariants();
      ++taken;
    }
    if (t > 1.4 && t < 1.5) {
      ASSERT_GE(state.status(t).jobs(0).queued(), 16u) << "its window filled";
    }
  }
  EXPECT_EQ(got.size(), 100u) << "20 epochs of 5 items";
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(got.count(i), 20u);
}

// The whole life of two jobs on one dataset, with the clock advanced by hand: every item is loaded
// once for both, each job gets every item once per epoch, and nothing stays pinned once they end.
TEST(ServingState, TwoIdenticalJobsDrivenWithoutThreadsShareEveryLoadAndGetExactEpochs) {
  ServingState state(options());
  add(state, synthetic("d", 48));
  v1::Registered reply;
  const std::vector<ServingState::JobId> ids = {state.open_job(job_request("d", 4, 2, 2), &reply, {}, 0.0),
                                                 state.open_job(job_request("d", 4, 2, 2), &reply, {}, 0.0)};
  std::map<ServingState::JobId, std::map<uint32_t, std::multiset<uint32_t>>> got;
  std::set<ServingState::JobId> done;
  double t = 0;
  for (int step = 0; step < 10000 && done.size() < ids.size(); ++step, t += 0.005) {
    state.dispatch(t);
    run_loads(state);
    for (auto id : ids) {
      if (done.count(id)) continue;
      v1::Batch batch;
      const auto poll = state.poll_batch(id, &batch);
      if (poll == ServingState::Poll::kDone) done.insert(id);
      if (poll != ServingState::Poll::kBatch) continue;
      for (uint32_t item : batch.ids()) got[id][batch.epoch()].insert(item);
      state.ack(id, batch.seq(), 0, t);
    }
  }
  ASSERT_EQ(done.size(), 2u) << "both jobs end within 10000 steps";
  std::multiset<uint32_t> every;
  for (uint32_t i = 0; i < 48; ++i) every.insert(i);
  for (auto id : ids) {
    EXPECT_EQ(got[id][0], every);
    EXPECT_EQ(got[id][1], every);
  }
  const v1::StatusReply s = state.status(t);
  EXPECT_EQ(s.deliveries(), 2u * 2 * 48);
  EXPECT_EQ(s.loads(), 48u) << "one load per item, shared by both jobs; the cache holds them all for the second epoch";
  EXPECT_EQ(s.hits(), 2u * 48) << "the second epoch is all hits, for each job";
  for (auto id : ids) state.close_job(id);
  EXPECT_EQ(state.status(t).pinned_bytes(), 0u);
  EXPECT_TRUE(state.status(t).jobs().empty());
}

TEST(ServingState, AFailedLoadFailsEveryJobWaitingForItWithTheLoadsError) {
  ServingState state(options());
  add(state, synthetic("d", 16));
  v1::Registered reply;
  const auto a = state.open_job(job_request("d", 4, 1, 2), &reply, {}, 0.0);
  const auto b = state.open_job(job_request("d", 4, 1, 2), &reply, {}, 0.0);
  state.dispatch(kStart);
  run_loads(state, "item 3 (x.jpg): not a JPEG");
  for (auto id : {a, b}) {
    v1::Batch batch;
    try {
      state.poll_batch(id, &batch);
      ADD_FAILURE() << "job " << id << " got a batch";
    } catch (const EngineError& e) {
      EXPECT_EQ(e.code(), EngineError::kDataLoss);
      EXPECT_STREQ(e.what(), "item 3 (x.jpg): not a JPEG");
    }
  }
}

TEST(ServingState, UnderOnErrorSkipAFailedLoadIsLeftOutAndReportedInTheBatch) {
  ServingState state(options());
  v1::AddDatasetRequest skipping = synthetic("d", 8);
  skipping.set_on_error("skip");
  add(state, skipping);
  v1::Registered reply;
  const auto id = state.open_job(job_request("d", 8, 1, 1), &reply, {}, 0.0);
  state.dispatch(kStart);
  // The first load fails, the others succeed.
  auto first = state.take_task();
  ASSERT_TRUE(first);
  ASSERT_NE(state.place(first->key, first->claim_size, first->claim_shape), nullptr);
  state.loaded_in_place(first->key, LoadedItem{first->claim_shape, "item: broken", 0.001});
  std::set<uint32_t> delivered;
  std::vector<uint32_t> skipped;
  for (double t = 0; t < 5; t += 0.01) {
    state.dispatch(t);
    run_loads(state);
    v1::Batch batch;
    const auto poll = state.poll_batch(id, &batch);
    if (poll == ServingState::Poll::kDone) break;
    if (poll != ServingState::Poll::kBatch) continue;
    delivered.insert(batch.ids().begin(), batch.ids().end());
    skipped.insert(skipped.end(), batch.skipped().begin(), batch.skipped().end());
    state.ack(id, batch.seq(), 0, t);
  }
  EXPECT_EQ(skipped.size(), 1u);
  EXPECT_EQ(delivered.size(), 7u);
  EXPECT_EQ(delivered.count(skipped.at(0)), 0u);
  EXPECT_EQ(state.status(5).skipped(), 1u);
}

TEST(ServingState, ClosingAJobReleasesItsPinsAndTellsWaitingClaimsThatRoomWasFreed) {
  ServingState state(options());
  const auto id = open_one_job(state);
  run_loads(state);
  v1::Batch batch;
  ASSERT_EQ(state.poll_batch(id, &batch), ServingState::Poll::kBatch);
  EXPECT_GT(state.status(0).pinned_bytes(), 0u);
  state.take_wakeups();
  state.close_job(id);
  EXPECT_TRUE(state.take_wakeups().space);
  EXPECT_EQ(state.status(0).pinned_bytes(), 0u);
  try {
    state.poll_batch(id, &batch);
    ADD_FAILURE() << "a closed job polled";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), EngineError::kUnavailable);
  }
}

TEST(ServingState, ALoadWhoseJobsLeftIsKeptOnlyIfItFitsWithoutEvicting) {
  ServingState state(options());
  const auto id = open_one_job(state);
  auto task = state.take_task();
  ASSERT_TRUE(task);
  state.close_job(id);
  // Claimed before the job left: the loader stores it as usual; it is cached, unpinned.
  ASSERT_NE(state.place(task->key, task->claim_size, task->claim_shape), nullptr);
  state.loaded_in_place(task->key, LoadedItem{task->claim_shape, "", 0.001});
  EXPECT_EQ(state.status(0).cached_items(), 1u);
  EXPECT_EQ(state.status(0).pinned_bytes(), 0u);
  // Taken after it left: not claimed first, and placed only where there is free room.
  auto next = state.take_task();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->claim_size, 0u);
  const Placement* placed = nullptr;
  ASSERT_EQ(state.prepared(next->key, LoadedItem{{8, 8}, "", 0.001}, 8 * 8 * 3, &placed), ServingState::Next::kPlace);
  ASSERT_NE(placed, nullptr);
  state.stored(next->key);
  EXPECT_EQ(state.status(0).cached_items(), 2u);
}

// So that the loader prepares it straight into its blocks (engine_test.cc checks the bytes).
TEST(ServingState, AnImageStoredAtItsOwnSizeIsClaimedBeforePreparingAtTheSizeItsHeaderGave) {
  ServingState state(options());
  v1::AddDatasetRequest own = synthetic("own", 16);
  own.set_crop(0);
  add(state, own);
  v1::Registered reply;
  state.open_job(job_request("own", 4, 1, 2), &reply, {}, 0.0);
  state.dispatch(kStart);
  auto task = state.take_task();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->claim_size, 12u * 10 * 3);
  EXPECT_EQ(task->claim_shape, (ImageSize{12, 10}));
}

TEST(ServingState, ShuttingDownFailsEveryJobAndHandsOutNoMoreTasks) {
  ServingState state(options());
  int changes = 0;
  const auto id = open_one_job(state, [&] { ++changes; });
  state.shut_down();
  EXPECT_FALSE(state.take_task());
  EXPECT_GT(changes, 0);
  v1::Batch batch;
  EXPECT_THROW(state.poll_batch(id, &batch), EngineError);
  v1::Registered reply;
  EXPECT_THROW(state.open_job(job_request("d", 4, 1, 2), &reply, {}, 0.0), EngineError);
}

TEST(ServingState, TheSavedListsVersionGrowsWithEveryAddAndRemoveSoThatAnOlderListIsNeverWrittenLast) {
  ServingState state(options());
  const uint64_t v0 = state.saved_datasets().second;
  add(state, synthetic("a", 8));
  add(state, synthetic("b", 8));
  const auto [two, v2] = state.saved_datasets();
  EXPECT_EQ(two.size(), 2u);
  EXPECT_GT(v2, v0);
  EXPECT_TRUE(add(state, synthetic("a", 8)).existed());
  EXPECT_EQ(state.saved_datasets().second, v2) << "an identical re-add changes nothing";
  state.remove_dataset("a");
  const auto [one, v3] = state.saved_datasets();
  EXPECT_EQ(one.size(), 1u);
  EXPECT_GT(v3, v2);
  EXPECT_THROW(state.remove_dataset("a"), EngineError);
}

EngineError::Code code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const EngineError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return EngineError::kInvalidArgument;
}

TEST(ServingState, OnlyItsOwnerTheDaemonsUidOrRootMayRemoveADatasetOrEndAJob) {
  const Caller daemon{getuid()}, root{0}, alice{daemon.uid + 1001}, bob{daemon.uid + 1002};
  ServingState state(options());
  add(state, synthetic("alices", 8), alice);
  add(state, synthetic("bobs", 8), bob);
  for (const v1::DatasetInfo& d : state.list_datasets())
    EXPECT_EQ(d.owner_uid(), d.name() == "alices" ? alice.uid : bob.uid);
  EXPECT_EQ(state.saved_datasets().first[0].owner, alice.uid) << "kept across restarts";
  try {
    state.remove_dataset("alices", bob);
    ADD_FAILURE() << "bob removed alice's dataset";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), EngineError::kPermissionDenied);
    EXPECT_NE(std::string(e.what()).find("belongs to uid " + std::to_string(alice.uid)), std::string::npos) << e.what();
  }
  // A job on bob's dataset: using another's dataset is what sharing is for.
  v1::Register trial = job_request("bobs", 4, 1, 2);
  trial.set_name("trial");
  v1::Registered reply;
  state.open_job(trial, &reply, {}, 0.0, alice);
  EXPECT_EQ(code_of([&] { state.end_job("trial", bob); }), EngineError::kPermissionDenied);
  // Names are not unique across uids: bob's "trial" is his own, and alice's is left alone.
  state.open_job(trial, &reply, {}, 0.0, bob);
  state.end_job("trial", bob);
  auto owners = [&] {
    std::vector<uid_t> out;
    const v1::StatusReply status = state.status(1.0);
    for (const v1::JobStatus& j : status.jobs()) out.push_back(j.owner_uid());
    return out;
  };
  ASSERT_EQ(owners(), std::vector<uid_t>{alice.uid});
  state.end_job("trial", daemon);  // the daemon's owner may
  EXPECT_TRUE(owners().empty());
  state.open_job(trial, &reply, {}, 0.0, alice);
  state.end_job("trial", root);  // and root
  EXPECT_TRUE(owners().empty());
  state.remove_dataset("alices", alice);
  state.remove_dataset("bobs", root);
  EXPECT_TRUE(state.list_datasets().empty());
}

TEST(ServingState, OneUserOtherThanTheOwnerCannotTakeADatasetsEveryJobSlot) {
  const Caller daemon{getuid()}, alice{daemon.uid + 1001};
  ServingState state(options());
  add(state, synthetic("shared", 8));
  v1::Registered reply;
  for (size_t i = 0; i < kMaxJobsPerUserAndDataset; ++i) state.open_job(job_request("shared", 4, 1, 1), &reply, {}, 0.0, alice);
  try {
    state.open_job(job_request("shared", 4, 1, 1), &reply, {}, 0.0, alice);
    ADD_FAILURE() << "alice took more than half of the slots";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.code(), EngineError::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("already has 32 jobs on dataset 'shared'"), std::string::npos) << e.what();
  }
  state.open_job(job_request("shared", 4, 1, 1), &reply, {}, 0.0, daemon);  // the rest are not hers
}

TEST(ServingState, OneUserOtherThanTheOwnerCannotTakeEveryDatasetSlot) {
  const Caller daemon{getuid()}, alice{daemon.uid + 1001};
  ServingState state(options());
  for (size_t i = 0; i < kMaxDatasetsPerUser; ++i) add(state, synthetic("d" + std::to_string(i), 4), alice);
  EXPECT_EQ(code_of([&] { add(state, synthetic("one-more", 4), alice); }), EngineError::kResourceExhausted);
  add(state, synthetic("the-owners", 4), daemon);
}

TEST(ServingState, OneUserOtherThanTheOwnerIndexesAtMostItsAllowanceOfItemsInAll) {
  const Caller daemon{getuid()}, alice{daemon.uid + 1001}, bob{daemon.uid + 1002};
  ServingOptions o = options();
  o.max_items_per_user = 10;
  ServingState state(o);
  add(state, synthetic("six", 6), alice);
  EXPECT_EQ(code_of([&] { add(state, synthetic("five", 5), alice); }), EngineError::kResourceExhausted);
  add(state, synthetic("four", 4), alice);
  add(state, synthetic("bobs", 10), bob);  // each member has its own
  add(state, synthetic("the-owners", 100), daemon);
  state.remove_dataset("six", alice);  // what a removed dataset held is free again
  add(state, synthetic("five", 5), alice);
}

}  // namespace
}  // namespace joader
