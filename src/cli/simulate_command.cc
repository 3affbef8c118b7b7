#include "cli/simulate_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "sampler/remaining_sets.h"
#include "sim/scenario.h"
#include "sim/simulator.h"

namespace joader::cli {
namespace {

struct SimulateOptions {
  std::string scenario_path;
  std::string trace_path;
  bool json = false;
  std::string sampler, policy;
  std::optional<uint64_t> seed, cache_items, horizon;
};

void print_table(const Scenario& sc, const SimResult& r) {
  fmt::print("sampler {}  policy {}  universe {}  cache {} items  seed {}\n", sc.sampler, sc.policy,
             sc.universe, sc.cache_items, sc.seed);
  fmt::print("loads {}  deliveries {}  hits {}  L/D {:.4f}  steps {}\n", r.loads, r.deliveries, r.hits,
             r.ld_ratio(), r.steps);
  if (sc.disk.enabled) {
    fmt::print("disk tier: decodes {}  disk reads {}  decodes per delivery {:.4f}\n", r.decodes, r.disk_reads,
               r.decodes_per_delivery());
  }
  fmt::print("\n");
  fmt::print("{:<16} {:>12} {:>8} {:>10}\n", "job", "deliveries", "epochs", "end step");
  for (const SimJobResult& j : r.jobs) {
    fmt::print("{:<16} {:>12} {:>8} {:>10}\n", j.name, j.deliveries, j.epochs, j.end_step);
  }
}

nlohmann::json to_json(const Scenario& sc, const SimResult& r) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const SimJobResult& j : r.jobs) {
    jobs.push_back({{"name", j.name}, {"deliveries", j.deliveries}, {"epochs", j.epochs}, {"end_step", j.end_step}});
  }
  return {{"loads", r.loads},     {"decodes", r.decodes},     {"disk_reads", r.disk_reads},
          {"deliveries", r.deliveries}, {"ld_ratio", r.ld_ratio()}, {"decodes_per_delivery", r.decodes_per_delivery()},
          {"hits", r.hits},       {"steps", r.steps},         {"sampler", sc.sampler},
          {"policy", sc.policy},  {"jobs", jobs}};
}

int run_simulate(const SimulateOptions& o) {
  std::ifstream in(o.scenario_path);
  if (!in) {
    fmt::print(stderr, "error: cannot read scenario file '{}'\n", o.scenario_path);
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  Scenario sc;
  try {
    sc = parse_scenario(text.str());
    // Command-line overrides go through the same validation as the file.
    auto doc = nlohmann::json::parse(text.str());
    bool overridden = false;
    if (!o.sampler.empty()) doc["sampler"] = o.sampler, overridden = true;
    if (!o.policy.empty()) doc["policy"] = o.policy, overridden = true;
    if (o.seed) doc["seed"] = *o.seed, overridden = true;
    if (o.cache_items) doc["cache_items"] = *o.cache_items, overridden = true;
    if (o.horizon) doc["horizon"] = *o.horizon, overridden = true;
    if (overridden) sc = parse_scenario(doc.dump());
  } catch (const ScenarioError& e) {
    fmt::print(stderr, "error: {}: {}\n", o.scenario_path, e.what());
    return 2;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> trace(nullptr, &std::fclose);
  if (!o.trace_path.empty()) {
    trace.reset(std::fopen(o.trace_path.c_str(), "w"));
    if (!trace) {
      fmt::print(stderr, "error: cannot write trace file '{}'\n", o.trace_path);
      return 2;
    }
  }
  std::function<void(const TraceEvent&)> on_delivery;
  if (trace) {
    // Job names are escaped once; each event is then a fixed-format line.
    std::vector<std::string> names;
    for (const JobSpec& j : sc.jobs) names.push_back(nlohmann::json(j.name).dump());
    on_delivery = [f = trace.get(), names](const TraceEvent& e) {
      fmt::print(f, "{{\"t\":{},\"job\":{},\"epoch\":{},\"item\":{},\"hit\":{}}}\n", e.t, names[e.job], e.epoch,
                 e.item, e.hit);
    };
  }
  SimResult result;
  try {
    result = simulate(sc, on_delivery);
  } catch (const std::runtime_error& e) {  // ScenarioError, SamplerError
    fmt::print(stderr, "error: {}: {}\n", o.scenario_path, e.what());
    return 2;
  }
  if (o.json) {
    std::cout << to_json(sc, result).dump() << "\n";
  } else {
    print_table(sc, result);
  }
  return 0;
}

// The showcase scenario: the paper's appendix setup (S2) — four jobs, each an independent random
// 75 % sample of the dataset, starting a quarter epoch apart.
constexpr const char* kDemoScenario = R"({
  "universe": 13334, "cache_items": 1000, "epochs": 3, "seed": 1,
  "jobs": [
    {"name": "job0", "subset": {"sample": 10000, "seed": 11}, "start": 0},
    {"name": "job1", "subset": {"sample": 10000, "seed": 12}, "start": 2500},
    {"name": "job2", "subset": {"sample": 10000, "seed": 13}, "start": 5000},
    {"name": "job3", "subset": {"sample": 10000, "seed": 14}, "start": 7500}
  ]
})";

int run_demo() {
  fmt::print(
      "Joader simulator showcase.\n"
      "Four training jobs read overlapping 75 % subsets of a 13 334-item dataset, starting a quarter\n"
      "epoch apart, through a 1 000-item cache; 3 epochs each. L/D = loads / deliveries: 1.0 means\n"
      "every delivery was read and decoded again, 0.25 would be perfect sharing between 4 jobs.\n\n");
  fmt::print("{:<13} {:<8} {:>8} {:>11} {:>7}\n", "sampler", "policy", "loads", "deliveries", "L/D");
  const std::pair<const char*, const char*> runs[] = {
      {"independent", "lru"}, {"lockstep", "lru"}, {"dsa", "lru"},
      {"dsa", "refcnt"},      {"dsa", "rate"},     {"dsa", "belady"}};
  double baseline = 0;
  for (auto [sampler, policy] : runs) {
    Scenario sc = parse_scenario(kDemoScenario);
    sc.sampler = sampler;
    sc.policy = policy;
    const SimResult r = simulate(sc);
    if (baseline == 0) baseline = double(r.loads);
    fmt::print("{:<13} {:<8} {:>8} {:>11} {:>7.3f}   loads {:>5.1f} % of independent+lru\n", sampler, policy,
               r.loads, r.deliveries, r.ld_ratio(), 100.0 * r.loads / baseline);
  }
  fmt::print("\n(belady is the offline optimum on the DSA trace: a lower bound for any online policy.)\n");
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Run a scenario on a virtual clock with the real sampler and cache policy");
  cmd->add_option("--scenario", opts->scenario_path, "Scenario JSON file (see docs/SIMULATOR.md)")->required();
  cmd->add_flag("--json", opts->json, "Print the result as JSON");
  cmd->add_option("--trace", opts->trace_path, "Write one JSON object per delivery to this file (JSONL)");
  cmd->add_option("--sampler", opts->sampler, "Override the scenario's sampler (dsa, independent, lockstep)");
  cmd->add_option("--policy", opts->policy, "Override the scenario's policy (refcnt, lru, fifo, belady, rate, planned)");
  cmd->add_option("--seed", opts->seed, "Override the scenario's seed");
  cmd->add_option("--cache-items", opts->cache_items, "Override the scenario's cache size (items)");
  cmd->add_option("--horizon", opts->horizon, "Override the scenario's horizon (items each job decides ahead)");
  cmd->callback([opts, &exit_code] { exit_code = run_simulate(*opts); });
}

// The main job: three PyTorch trainings sharing one daemon (python/joader/demo.py), run with
// Debian's /usr/bin/python3 and the package built next to this executable.
int run_training_demo() {
  std::error_code ec;
  const std::filesystem::path build = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  const std::string python_path = (build / "python").string();
  setenv("PYTHONPATH", python_path.c_str(), 1);
  const std::string build_arg = build.string();
  execl("/usr/bin/python3", "/usr/bin/python3", "-m", "joader.demo", "--build", build_arg.c_str(), static_cast<char*>(nullptr));
  fmt::print(stderr, "error: cannot run /usr/bin/python3: {}\n", std::strerror(errno));
  return 1;
}

void add_demo_command(CLI::App& app, int& exit_code) {
  auto simulated = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "demo", "Three PyTorch trainings sharing one daemon, with live progress and the decode work saved");
  cmd->add_flag("--simulated", *simulated, "Instead, show what DSA and the cache policies save in the simulator");
  cmd->callback([simulated, &exit_code] { exit_code = *simulated ? run_demo() : run_training_demo(); });
}

}  // namespace joader::cli
