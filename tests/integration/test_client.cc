// joader_test_client: one job through the C++ client library, for the integration tests.
// Prints one line per received item: "EPOCH ID LABEL FNV1A64" and, with --verify, checks that the
// bytes equal an independent preparation of the same item (same source, same prep spec) done
// here, outside the daemon. Exit status: 0 done, 3 the daemon reported an error (printed as
// "error CODE: MESSAGE" then "at MONOTONIC_SECONDS" on stderr), 4 a verification failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "client/client.h"
#include "prep/image_prep.h"
#include "source/source.h"

namespace {

uint64_t fnv1a(const uint8_t* p, uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::vector<uint32_t> parse_ids(const std::string& spec) {
  // "LO:HI" (half-open) or "a,b,c"
  std::vector<uint32_t> ids;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    const uint32_t lo = std::stoul(spec.substr(0, colon)), hi = std::stoul(spec.substr(colon + 1));
    for (uint32_t i = lo; i < hi; ++i) ids.push_back(i);
    return ids;
  }
  std::stringstream ss(spec);
  for (std::string tok; std::getline(ss, tok, ',');) ids.push_back(std::stoul(tok));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Joader integration-test client"};
  std::string socket, ids, verify_source, name, consumed;
  joader::JobOptions o;
  double delay_ms = 0, jitter_ms = 0;
  uint32_t crop = 0, resize = 0, stop_after = 0, resume_epoch = 0;
  bool raw = false;
  app.add_option("--socket", socket);
  app.add_option("--dataset", o.dataset)->required();
  app.add_option("--name", o.name);
  app.add_option("--ids", ids, "LO:HI or a,b,c");
  app.add_option("--batch", o.batch_size);
  app.add_option("--epochs", o.epochs);
  app.add_option("--prefetch", o.prefetch);
  app.add_flag("--drop-last", o.drop_last);
  app.add_option("--delay-ms", delay_ms, "consumption time per batch");
  app.add_option("--jitter-ms", jitter_ms, "uniform jitter added to the delay");
  app.add_option("--verify-source", verify_source, "prepare each item here too and compare bytes");
  app.add_option("--crop", crop);
  app.add_option("--resize", resize);
  app.add_flag("--raw", raw);
  app.add_option("--protocol-version", o.protocol_version);
  app.add_option("--stop-after", stop_after, "exit (without closing) after this many batches");
  app.add_option("--resume-epoch", resume_epoch);
  app.add_option("--resume-consumed", consumed, "a,b,c consumed in --resume-epoch");
  std::string start_gate;
  app.add_option("--start-gate", start_gate, "register only once this file exists (jobs that start together)");
  CLI11_PARSE(app, argc, argv);
  if (!ids.empty()) o.ids = parse_ids(ids);
  if (!consumed.empty() || resume_epoch > 0) {
    o.resume = true;
    o.resume_epoch = resume_epoch;
    if (!consumed.empty()) o.resume_consumed = parse_ids(consumed);
  }

  std::unique_ptr<joader::Source> source;
  joader::PrepSpec spec;
  spec.raw = raw;
  spec.crop = crop;
  spec.resize = resize;
  if (!verify_source.empty()) source = joader::open_source(verify_source);
  std::mt19937 rng(getpid());
  std::uniform_real_distribution<double> jitter(0, jitter_ms);
  std::vector<uint8_t> bytes, expected;
  uint32_t batches = 0;
  while (!start_gate.empty() && access(start_gate.c_str(), F_OK) != 0) usleep(200);
  try {
    joader::Client client(socket);
    auto job = client.open_job(o);
    joader::Batch b;
    while (job->next(&b)) {
      for (const joader::ItemView& it : b.items) {
        std::printf("%u %u %lld %llu\n", b.epoch, it.id, static_cast<long long>(it.label),
                    static_cast<unsigned long long>(fnv1a(it.data, it.size)));
        if (source) {
          source->read(it.id, bytes);
          joader::prepare(spec, bytes, expected);
          if (expected.size() != it.size || std::memcmp(expected.data(), it.data, it.size) != 0) {
            std::fprintf(stderr, "verify: item %u differs from an independent preparation\n", it.id);
            return 4;
          }
          if (it.label != source->item(it.id).label) {
            std::fprintf(stderr, "verify: item %u has label %lld, expected %lld\n", it.id,
                         static_cast<long long>(it.label), static_cast<long long>(source->item(it.id).label));
            return 4;
          }
        }
      }
      std::fflush(stdout);
      if (delay_ms + jitter_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms + jitter(rng)));
      }
      job->ack(b);
      if (stop_after != 0 && ++batches == stop_after) {
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::hours(1));  // wait to be killed
      }
    }
  } catch (const joader::ClientError& e) {
    // "at T": when the client saw the error, in CLOCK_MONOTONIC seconds (Python's time.monotonic()),
    // so a test can time the detection itself, without this process's exit.
    const double at = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    std::fprintf(stderr, "error %d: %s\nat %.6f\n", e.code(), e.what(), at);
    return 3;
  }
  return 0;
}
