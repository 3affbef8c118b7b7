#include "sim/scenario.h"

#include <algorithm>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "cache/eviction_policy.h"
#include "common/rng.h"

namespace joader {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw ScenarioError(where + ": " + what);
}

void reject_unknown_fields(const json& obj, const std::string& where,
                           std::initializer_list<const char*> known) {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) fail(where, "unknown field '" + key + "'");
  }
}

uint64_t get_uint(const json& v, const std::string& where, uint64_t max) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    fail(where, "expected a non-negative integer, got " + v.dump());
  }
  const uint64_t x = v.get<uint64_t>();
  if (x > max) fail(where, "must be at most " + std::to_string(max) + ", got " + v.dump());
  return x;
}

std::vector<ItemId> parse_subset(const json& s, const std::string& where, uint32_t universe) {
  if (!s.is_object() || s.size() == 0) {
    fail(where, R"(expected one of {"all": true}, {"range": [lo, hi]}, {"ids": [...]}, {"sample": n, "seed": s})");
  }
  if (s.contains("all")) {
    reject_unknown_fields(s, where, {"all"});
    if (s["all"] != true) fail(where + ".all", "must be true");
    std::vector<ItemId> ids(universe);
    std::iota(ids.begin(), ids.end(), ItemId{0});
    return ids;
  }
  if (s.contains("range")) {
    reject_unknown_fields(s, where, {"range"});
    const json& r = s["range"];
    if (!r.is_array() || r.size() != 2) fail(where + ".range", "expected [lo, hi) as two integers");
    const uint64_t lo = get_uint(r[0], where + ".range[0]", std::numeric_limits<uint32_t>::max());
    const uint64_t hi = get_uint(r[1], where + ".range[1]", std::numeric_limits<uint32_t>::max());
    if (hi > universe) {
      fail(where + ".range", "ids outside the universe: hi = " + std::to_string(hi) + " > universe = " +
                                 std::to_string(universe));
    }
    if (lo >= hi) fail(where + ".range", "empty subset: [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    std::vector<ItemId> ids(hi - lo);
    std::iota(ids.begin(), ids.end(), static_cast<ItemId>(lo));
    return ids;
  }
  if (s.contains("ids")) {
    reject_unknown_fields(s, where, {"ids"});
    const json& a = s["ids"];
    if (!a.is_array()) fail(where + ".ids", "expected an array of item ids");
    if (a.empty()) fail(where + ".ids", "empty subset");
    std::vector<ItemId> ids;
    ids.reserve(a.size());
    std::vector<bool> seen(universe, false);
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string w = where + ".ids[" + std::to_string(i) + "]";
      const uint64_t x = get_uint(a[i], w, std::numeric_limits<uint32_t>::max());
      if (x >= universe) {
        fail(w, "id " + std::to_string(x) + " is outside the universe [0, " + std::to_string(universe) + ")");
      }
      if (seen[x]) fail(w, "id " + std::to_string(x) + " appears twice");
      seen[x] = true;
      ids.push_back(static_cast<ItemId>(x));
    }
    return ids;
  }
  if (s.contains("sample")) {
    reject_unknown_fields(s, where, {"sample", "seed"});
    const uint64_t count = get_uint(s["sample"], where + ".sample", universe);
    if (count == 0) fail(where + ".sample", "empty subset");
    const uint64_t seed = s.contains("seed") ? get_uint(s["seed"], where + ".seed", UINT64_MAX) : 0;
    return sample_subset(universe, static_cast<uint32_t>(count), seed);
  }
  fail(where, "unknown subset kind " + s.dump() + R"( (expected all, range, ids or sample))");
}

}  // namespace

std::vector<ItemId> sample_subset(uint32_t universe, uint32_t count, uint64_t seed) {
  // Partial Fisher–Yates: the first `count` positions of a uniform permutation.
  std::vector<ItemId> perm(universe);
  std::iota(perm.begin(), perm.end(), ItemId{0});
  Rng rng(seed);
  for (uint32_t i = 0; i < count; ++i) {
    std::swap(perm[i], perm[i + rng.uniform(universe - i)]);
  }
  perm.resize(count);
  perm.shrink_to_fit();
  return perm;
}

Scenario parse_scenario(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    throw ScenarioError(std::string("malformed JSON: ") + e.what());
  }
  if (!doc.is_object()) fail("scenario", "expected a JSON object at the top level");
  reject_unknown_fields(doc, "scenario",
                        {"universe", "cache_items", "epochs", "seed", "sampler", "policy", "horizon", "load_ms", "loaders",
                         "disk", "jobs"});
  Scenario sc;
  if (!doc.contains("universe")) fail("scenario", "missing field 'universe' (the item count)");
  const uint64_t universe = get_uint(doc["universe"], "universe", std::numeric_limits<uint64_t>::max());
  if (universe == 0) fail("universe", "must be at least 1");
  if (universe > kMaxUniverse) {
    fail("universe", "must be at most " + std::to_string(kMaxUniverse) + " items (2^24, as for the daemon's datasets), got " +
                         std::to_string(universe));
  }
  sc.universe = static_cast<uint32_t>(universe);
  if (doc.contains("cache_items")) sc.cache_items = get_uint(doc["cache_items"], "cache_items", UINT64_MAX);
  if (doc.contains("epochs")) sc.epochs = static_cast<uint32_t>(get_uint(doc["epochs"], "epochs", 1u << 30));
  if (sc.epochs == 0) fail("epochs", "must be at least 1");
  if (doc.contains("seed")) sc.seed = get_uint(doc["seed"], "seed", UINT64_MAX);
  for (auto [field, out] : {std::pair{"sampler", &sc.sampler}, std::pair{"policy", &sc.policy}}) {
    if (!doc.contains(field)) continue;
    if (!doc[field].is_string()) fail(field, "expected a string, got " + doc[field].dump());
    *out = doc[field].get<std::string>();
  }
  if (sc.sampler != "dsa" && sc.sampler != "independent" && sc.sampler != "lockstep") {
    fail("sampler", "unknown sampler '" + sc.sampler + "' (expected dsa, independent or lockstep)");
  }
  if (std::ranges::count(policy_names(), sc.policy) == 0) {
    fail("policy", fmt::format("unknown policy '{}' (expected one of {})", sc.policy, fmt::join(policy_names(), ", ")));
  }
  if (doc.contains("horizon")) sc.horizon = get_uint(doc["horizon"], "horizon", 1u << 24);
  if (doc.contains("load_ms")) {
    if (!doc["load_ms"].is_number()) fail("load_ms", "expected a number, got " + doc["load_ms"].dump());
    sc.load_ms = doc["load_ms"].get<double>();
    if (!(sc.load_ms >= 0 && sc.load_ms <= 1e6)) {
      fail("load_ms", "must be a number of steps in [0, 1e6], got " + doc["load_ms"].dump());
    }
  }
  if (doc.contains("loaders")) sc.loaders = static_cast<uint32_t>(get_uint(doc["loaders"], "loaders", 1024));
  if (sc.loaders == 0) fail("loaders", "must be at least 1");
  if (sc.load_ms > 0 && sc.policy == "belady") {
    fail("load_ms", "belady replays a trace recorded without a cache, whose timing load time would change: use load_ms 0");
  }
  if (doc.contains("disk")) {
    const json& d = doc["disk"];
    if (!d.is_object()) fail("disk", "expected an object {\"read_ms\": ..., \"items\": ..., \"warm\": ..., \"cheap_first\": ...}, got " + d.dump());
    reject_unknown_fields(d, "disk", {"read_ms", "items", "warm", "cheap_first"});
    sc.disk.enabled = true;
    if (!d.contains("read_ms") || !d["read_ms"].is_number()) {
      fail("disk.read_ms", "expected the steps of a read from the tier, a number, got " +
                               (d.contains("read_ms") ? d["read_ms"].dump() : std::string("nothing")));
    }
    sc.disk.read_ms = d["read_ms"].get<double>();
    if (!(sc.disk.read_ms >= 0 && sc.disk.read_ms <= 1e6)) {
      fail("disk.read_ms", "must be a number of steps in [0, 1e6], got " + d["read_ms"].dump());
    }
    if (d.contains("items")) sc.disk.items = get_uint(d["items"], "disk.items", UINT64_MAX);
    for (auto [field, out] : {std::pair{"warm", &sc.disk.warm}, std::pair{"cheap_first", &sc.disk.cheap_first}}) {
      if (!d.contains(field)) continue;
      if (!d[field].is_boolean()) fail(std::string("disk.") + field, "expected true or false, got " + d[field].dump());
      *out = d[field].get<bool>();
    }
    if (sc.disk.read_ms > 0 && sc.policy == "belady") {
      fail("disk.read_ms", "belady replays a trace recorded without a cache, whose timing read time would change: use read_ms 0");
    }
  }

  if (!doc.contains("jobs") || !doc["jobs"].is_array() || doc["jobs"].empty()) {
    fail("jobs", "expected a non-empty array of jobs");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < doc["jobs"].size(); ++i) {
    const json& j = doc["jobs"][i];
    const std::string where = "jobs[" + std::to_string(i) + "]";
    if (!j.is_object()) fail(where, "expected an object");
    reject_unknown_fields(j, where, {"name", "subset", "start", "stop", "speed", "epochs", "batch", "prefetch", "jitter",
                                          "ordered"});
    JobSpec job;
    job.name = "job" + std::to_string(i);
    if (j.contains("name")) {
      if (!j["name"].is_string() || j["name"].get<std::string>().empty()) {
        fail(where + ".name", "expected a non-empty string");
      }
      job.name = j["name"].get<std::string>();
    }
    if (!names.insert(job.name).second) fail(where + ".name", "duplicate job name '" + job.name + "'");
    if (!j.contains("subset")) fail(where, "missing field 'subset'");
    job.subset = parse_subset(j["subset"], where + ".subset", sc.universe);
    if (j.contains("start")) job.start = get_uint(j["start"], where + ".start", 1ull << 40);
    if (j.contains("stop")) {
      job.stop = get_uint(j["stop"], where + ".stop", 1ull << 40);
      if (*job.stop <= job.start) fail(where + ".stop", "must be after start");
    }
    if (j.contains("speed")) {
      if (!j["speed"].is_number()) fail(where + ".speed", "expected a number, got " + j["speed"].dump());
      job.speed = j["speed"].get<double>();
      if (!(job.speed > 0) || !std::isfinite(job.speed)) {
        fail(where + ".speed", "must be a positive number of items per step, got " + j["speed"].dump());
      }
    }
    if (j.contains("batch")) job.batch = static_cast<uint32_t>(get_uint(j["batch"], where + ".batch", 1u << 20));
    if (job.batch == 0) fail(where + ".batch", "must be at least 1");
    if (j.contains("prefetch")) job.prefetch = static_cast<uint32_t>(get_uint(j["prefetch"], where + ".prefetch", 1024));
    if (job.prefetch == 0) fail(where + ".prefetch", "must be at least 1");
    if (j.contains("jitter")) {
      if (!j["jitter"].is_number()) fail(where + ".jitter", "expected a number, got " + j["jitter"].dump());
      job.jitter = j["jitter"].get<double>();
      if (!(job.jitter >= 0 && job.jitter < 1)) fail(where + ".jitter", "must be in [0, 1), got " + j["jitter"].dump());
    }
    if (j.contains("ordered")) {
      if (!j["ordered"].is_boolean()) fail(where + ".ordered", "expected true or false, got " + j["ordered"].dump());
      job.ordered = j["ordered"].get<bool>();
    }
    job.epochs = sc.epochs;
    if (j.contains("epochs")) job.epochs = static_cast<uint32_t>(get_uint(j["epochs"], where + ".epochs", 1u << 30));
    if (job.epochs == 0) fail(where + ".epochs", "must be at least 1");
    sc.jobs.push_back(std::move(job));
  }
  return sc;
}

}  // namespace joader
