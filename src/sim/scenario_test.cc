#include "sim/scenario.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace joader {
namespace {

std::string error_of(const std::string& json) {
  try {
    parse_scenario(json);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Scenario, ParsesEverySubsetKindAndDefaults) {
  const Scenario sc = parse_scenario(R"({"universe": 10, "cache_items": 3, "epochs": 2, "seed": 5,
    "sampler": "lockstep", "policy": "lru", "jobs": [
      {"name": "a", "subset": {"all": true}},
      {"subset": {"range": [2, 5]}, "start": 4, "speed": 0.5},
      {"subset": {"ids": [9, 1]}, "epochs": 7, "stop": 100},
      {"subset": {"sample": 4, "seed": 3}}]})");
  EXPECT_EQ(sc.universe, 10u);
  EXPECT_EQ(sc.cache_items, 3u);
  EXPECT_EQ(sc.sampler, "lockstep");
  ASSERT_EQ(sc.jobs.size(), 4u);
  EXPECT_EQ(sc.jobs[0].subset.size(), 10u);
  EXPECT_EQ(sc.jobs[1].name, "job1");
  EXPECT_EQ(sc.jobs[1].subset, (std::vector<ItemId>{2, 3, 4}));
  EXPECT_EQ(sc.jobs[1].start, 4u);
  EXPECT_EQ(sc.jobs[1].speed, 0.5);
  EXPECT_EQ(sc.jobs[1].epochs, 2u);
  EXPECT_EQ(sc.jobs[2].epochs, 7u);
  EXPECT_EQ(sc.jobs[2].stop, 100u);
  EXPECT_EQ(sc.jobs[3].subset.size(), 4u);
}

TEST(Scenario, SamplesWithOneSeedAreNested) {
  const auto quarter = sample_subset(1000, 250, 9);
  auto all = sample_subset(1000, 1000, 9);
  EXPECT_TRUE(std::equal(quarter.begin(), quarter.end(), all.begin()));
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end());
}

TEST(Scenario, BadInputGetsAOneLineErrorNamingThePlace) {
  const auto jobs = [](const std::string& j) { return R"({"universe": 10, "jobs": [)" + j + "]}"; };
  EXPECT_EQ(error_of("{\"universe\": 10,"), "malformed JSON: [json.exception.parse_error.101] parse error at line 1, column 17: syntax error while parsing object key - unexpected end of input; expected string literal");
  EXPECT_EQ(error_of("[]"), "scenario: expected a JSON object at the top level");
  // Found by fuzz/scenario_fuzz: a number too large for a double is nlohmann's out_of_range.
  EXPECT_EQ(error_of(R"({"universe": 1e999})").rfind("malformed JSON: ", 0), 0u);
  EXPECT_EQ(error_of(R"({"jobs": []})"), "scenario: missing field 'universe' (the item count)");
  EXPECT_EQ(error_of(R"({"universe": 10, "jobs": []})"), "jobs: expected a non-empty array of jobs");
  EXPECT_EQ(error_of(R"({"universe": -1, "jobs": []})"), "universe: expected a non-negative integer, got -1");
  // Found by fuzz/scenario_fuzz: a universe of 10^9 made each sampled subset allocate 4 GB.
  EXPECT_EQ(error_of(R"({"universe": 1000003334, "jobs": [{"subset": {"sample": 10}}]})"),
            "universe: must be at most 16777216 items (2^24, as for the daemon's datasets), got 1000003334");
  EXPECT_EQ(error_of(R"({"universe": 10, "sampler": "random", "jobs": []})"),
            "sampler: unknown sampler 'random' (expected dsa, independent or lockstep)");
  EXPECT_EQ(error_of(R"({"universe": 10, "policy": "mru", "jobs": []})"),
            "policy: unknown policy 'mru' (expected one of refcnt, lru, fifo, belady, rate, planned)");
  EXPECT_EQ(error_of(R"({"universe": 10, "load_ms": -1, "jobs": []})"),
            "load_ms: must be a number of steps in [0, 1e6], got -1");
  EXPECT_EQ(error_of(R"({"universe": 10, "loaders": 0, "jobs": []})"), "loaders: must be at least 1");
  EXPECT_EQ(error_of(R"({"universe": 10, "policy": "belady", "load_ms": 2, "jobs": []})"),
            "load_ms: belady replays a trace recorded without a cache, whose timing load time would change: use "
            "load_ms 0");
  EXPECT_EQ(error_of(R"({"universe": 10, "disk": {"items": 5}, "jobs": []})"),
            "disk.read_ms: expected the steps of a read from the tier, a number, got nothing");
  EXPECT_EQ(error_of(R"({"universe": 10, "disk": {"read_ms": 1, "size": 5}, "jobs": []})"), "disk: unknown field 'size'");
  EXPECT_EQ(error_of(R"({"universe": 10, "disk": {"read_ms": 1, "warm": 1}, "jobs": []})"),
            "disk.warm: expected true or false, got 1");
  EXPECT_EQ(error_of(R"({"universe": 10, "policy": "belady", "disk": {"read_ms": 1}, "jobs": []})"),
            "disk.read_ms: belady replays a trace recorded without a cache, whose timing read time would change: use "
            "read_ms 0");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"ids": [1, 10]}})")),
            "jobs[0].subset.ids[1]: id 10 is outside the universe [0, 10)");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"range": [0, 11]}})")),
            "jobs[0].subset.range: ids outside the universe: hi = 11 > universe = 10");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"range": [4, 4]}})")), "jobs[0].subset.range: empty subset: [4, 4)");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"ids": []}})")), "jobs[0].subset.ids: empty subset");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"ids": [3, 3]}})")), "jobs[0].subset.ids[1]: id 3 appears twice");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"all": true}, "speed": 0})")),
            "jobs[0].speed: must be a positive number of items per step, got 0");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"all": true}, "speed": -2.5})")),
            "jobs[0].speed: must be a positive number of items per step, got -2.5");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"all": true}, "sped": 1})")), "jobs[0]: unknown field 'sped'");
  EXPECT_EQ(error_of(jobs(R"({"name": "x", "subset": {"all": true}}, {"name": "x", "subset": {"all": true}})")),
            "jobs[1].name: duplicate job name 'x'");
  EXPECT_EQ(error_of(jobs(R"({"subset": {"every": 2}})")),
            R"(jobs[0].subset: unknown subset kind {"every":2} (expected all, range, ids or sample))");
}

}  // namespace
}  // namespace joader
