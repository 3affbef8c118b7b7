// libFuzzer harness: the scenario parser (`joader simulate` input) on arbitrary text, and a short
// simulation of whatever parses. Errors must be ScenarioError/SamplerError, never a crash.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "sampler/remaining_sets.h"
#include "sim/scenario.h"
#include "sim/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsing materialises each job's subset (4 bytes per item of the universe): inputs with a
  // universe above 4096 could ask for gigabytes across many jobs, beyond the fuzzer's memory
  // limit. The parser's bound on the universe is a unit test (scenario_test.cc).
  const auto doc = nlohmann::json::parse(data, data + size, nullptr, false);
  if (doc.is_object() && doc.contains("universe") && doc["universe"].is_number() &&
      doc["universe"].get<double>() > 4096) {
    return 0;
  }
  try {
    joader::Scenario sc = joader::parse_scenario(std::string(reinterpret_cast<const char*>(data), size));
    // Bound the work a parsed scenario can ask for.
    if (sc.universe > 4096) return 0;
    uint64_t work = 0;
    for (const auto& j : sc.jobs) work += uint64_t{j.epochs} * j.subset.size() + j.start + (j.stop ? *j.stop : 0);
    if (work > 200000) return 0;
    for (const auto& j : sc.jobs) {
      if (j.speed < 0.01) return 0;
    }
    joader::simulate(sc);
  } catch (const joader::ScenarioError&) {
  } catch (const joader::SamplerError&) {
  }
  return 0;
}
