// The Engine driven directly from plain threads, as the gRPC service drives it (one thread per
// job reading batches, another acknowledging them), without gRPC: under `make test-tsan` these
// tests check the Engine's locking with no gRPC frame in any stack, where the suppressions for
// Debian's uninstrumented gRPC cannot hide a race.
#include "server/engine.h"

#include <atomic>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace joader {
namespace {

EngineOptions small_engine() {
  EngineOptions o;
  o.cache_bytes = 1 << 20;  // 4096 items of 256 bytes: the two datasets below do not fit together
  o.threads = 2;
  return o;
}

v1::AddDatasetRequest synthetic(const std::string& name, int items) {
  v1::AddDatasetRequest r;
  r.set_protocol_version(kProtocolVersion);
  r.set_name(name);
  r.set_source("synthetic:" + std::to_string(items) + ":12x10");
  r.set_crop(8);
  return r;
}

v1::Register job_request(const std::string& dataset, uint32_t batch, uint32_t epochs, uint32_t prefetch) {
  v1::Register r;
  r.set_protocol_version(kProtocolVersion);
  r.set_dataset(dataset);
  r.set_batch_size(batch);
  r.set_epochs(epochs);
  r.set_prefetch(prefetch);
  return r;
}

// Reads every batch of a job on this thread while a second thread acknowledges them, as the
// service's Job handler and its ack thread do. Returns the ids received, by epoch.
std::map<uint32_t, std::multiset<uint32_t>> run_job(Engine& engine, Engine::JobId id, size_t stop_after = 0) {
  std::map<uint32_t, std::multiset<uint32_t>> epochs;
  std::mutex mu;
  std::condition_variable cv;
  std::queue<uint64_t> to_ack;
  bool done = false;
  std::thread acker([&] {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return done || !to_ack.empty(); });
      if (to_ack.empty()) return;
      const uint64_t seq = to_ack.front();
      to_ack.pop();
      lk.unlock();
      engine.ack(id, seq);
      lk.lock();
    }
  });
  BatchOut b;
  size_t batches = 0;
  while ((stop_after == 0 || batches < stop_after) && engine.next_batch(id, &b)) {
    epochs[b.epoch].insert(b.ids.begin(), b.ids.end());
    ++batches;
    std::lock_guard lk(mu);
    to_ack.push(b.seq);
    cv.notify_one();
  }
  {
    std::lock_guard lk(mu);
    done = true;
    cv.notify_one();
  }
  acker.join();
  engine.close_job(id);
  return epochs;
}

TEST(EngineConcurrency, JobsOnManyThreadsGetExactEpochsWhileOthersLeaveAndDatasetsComeAndGo) {
  Engine engine(small_engine());
  engine.add_dataset(synthetic("main", 300), {});
  std::atomic<bool> running{true};

  std::vector<std::map<uint32_t, std::multiset<uint32_t>>> results(4);
  std::vector<std::thread> jobs;
  for (int j = 0; j < 4; ++j) {
    jobs.emplace_back([&, j] {
      v1::Registered reply;
      const Engine::JobId id = engine.open_job(job_request("main", 5 + j * 4, 2, 1 + j), &reply);
      results[j] = run_job(engine, id);
    });
  }
  // Clients that vanish mid-epoch, on the same dataset and on short-lived ones that are removed
  // as soon as their job ends (loads of a removed dataset may still be in flight).
  std::thread churn([&] {
    for (int round = 0; running || round < 3; ++round) {
      v1::Registered reply;
      run_job(engine, engine.open_job(job_request("main", 3, 0, 2), &reply), 4);
      const std::string name = "tmp" + std::to_string(round % 3);
      engine.add_dataset(synthetic(name, 3000), {});
      run_job(engine, engine.open_job(job_request(name, 16, 0, 2), &reply), 2);
      engine.remove_dataset(name);
    }
  });
  std::thread observer([&] {
    while (running) {
      const v1::StatusReply s = engine.status();
      EXPECT_LE(s.pinned_bytes(), s.cache_capacity());
      engine.list_datasets();
    }
  });
  for (auto& t : jobs) t.join();
  running = false;
  churn.join();
  observer.join();

  std::multiset<uint32_t> all;
  for (uint32_t i = 0; i < 300; ++i) all.insert(i);
  for (const auto& epochs : results) {
    ASSERT_EQ(epochs.size(), 2u);
    for (const auto& [epoch, ids] : epochs) EXPECT_EQ(ids, all) << "epoch " << epoch;
  }
  const v1::StatusReply s = engine.status();
  EXPECT_EQ(s.jobs_size(), 0);
  EXPECT_EQ(s.pinned_bytes(), 0u);
  EXPECT_EQ(s.datasets_size(), 1);
}

TEST(EngineConcurrency, ShutdownWakesEveryWaitingJobWithServerShuttingDown) {
  Engine engine(small_engine());
  engine.add_dataset(synthetic("main", 100), {});
  std::vector<std::thread> jobs;
  std::atomic<int> told{0};
  for (int j = 0; j < 3; ++j) {
    jobs.emplace_back([&] {
      v1::Registered reply;
      const Engine::JobId id = engine.open_job(job_request("main", 10, 0, 1), &reply);
      BatchOut b;
      try {
        while (engine.next_batch(id, &b)) {
        }  // never acknowledged: the job stalls once its prefetch is delivered
      } catch (const EngineError& e) {
        if (std::string(e.what()) == "server shutting down") ++told;
      }
      engine.close_job(id);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  engine.shutdown();
  for (auto& t : jobs) t.join();
  EXPECT_EQ(told, 3);
}

}  // namespace
}  // namespace joader
