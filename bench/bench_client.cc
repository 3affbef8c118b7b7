// bench_client: one job through the C++ client, timing what it receives. Each batch is gathered
// from the arena into one contiguous buffer by a BatchBuilder (client/batch_builder.h, as the
// Python binding gathers a uint8 NHWC batch) before it is acknowledged, so the figure includes
// reading every byte.
//
//   bench_client --socket S --dataset D --batch 64 --epochs 3 --warmup-epochs 1
// prints one JSON line: {"items", "bytes", "seconds", "items_per_s", "gb_per_s"} over the epochs
// after the warm-up ones.
#include <chrono>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/batch_builder.h"
#include "client/client.h"

int main(int argc, char** argv) {
  CLI::App app{"Joader benchmark client"};
  std::string socket;
  joader::JobOptions o;
  uint32_t warmup = 0;
  app.add_option("--socket", socket);
  app.add_option("--dataset", o.dataset)->required();
  app.add_option("--batch", o.batch_size);
  app.add_option("--epochs", o.epochs);
  app.add_option("--prefetch", o.prefetch);
  app.add_option("--warmup-epochs", warmup, "epochs not measured (e.g. the one that fills the cache)");
  CLI11_PARSE(app, argc, argv);
  using Clock = std::chrono::steady_clock;
  std::vector<uint8_t> gathered;
  uint64_t items = 0, bytes = 0;
  Clock::time_point start;
  bool measuring = false;
  try {
    joader::Client client(socket);
    auto job = client.open_job(o);
    joader::BatchBuilder builder(*job, {}, 0, 1);
    const joader::BatchFormat format;  // uint8, NHWC
    joader::Batch b;
    while (job->next(&b)) {
      // The clock starts when the first measured batch has arrived, so that batch's items, whose
      // wait lies before the window, are not counted: the window holds exactly the items it counts.
      const bool first_measured = !measuring && b.epoch >= warmup;
      if (first_measured) {
        measuring = true;
        start = Clock::now();
      }
      uint64_t total = 0;
      for (const auto& it : b.items) total += it.size;
      gathered.resize(total);
      if (builder.kind() == joader::BatchKind::kImages) {
        builder.gather(b, format, gathered.data());
      } else {
        std::vector<uint8_t*> dst;
        for (uint8_t* at = gathered.data(); const auto& it : b.items) {
          dst.push_back(at);
          at += it.size;
        }
        builder.copy_items(b, dst);
      }
      if (measuring && !first_measured) {
        items += b.items.size();
        bytes += total;
      }
    }
  } catch (const joader::ClientError& e) {
    std::fprintf(stderr, "error %d: %s\n", e.code(), e.what());
    return 3;
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"items\": %llu, \"bytes\": %llu, \"seconds\": %.4f, \"items_per_s\": %.1f, \"gb_per_s\": %.3f}\n",
              static_cast<unsigned long long>(items), static_cast<unsigned long long>(bytes), s, items / s,
              bytes / s / 1e9);
  return 0;
}
