// libFuzzer harness: the daemon's gRPC handlers (JoaderService over a real Engine) on arbitrary
// sequences of calls, through a real gRPC server reached by an in-process channel. Each input is
// read as up to 8 operations — AddDataset, RemoveDataset, Status, ListDatasets, or a Job stream
// that writes Register/Ack messages (well-formed with fuzzed fields, or parsed from raw bytes)
// and reads replies — so both the wire parsing and the Engine's state machine are exercised.
//
// Oracles, beyond the sanitizers: no handler may hang (every call has a deadline), and once every
// call of an input has finished, the daemon must hold no job and no pinned byte (checked with a
// grace period for loads still being copied): a leak there is a daemon that slowly stops serving.
//
// The Engine's data root is an empty private directory, so fuzzed sources cannot read the
// machine's files; synthetic sources are kept small so that an input stays fast.
#include <fuzzer/FuzzedDataProvider.h>
#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "joader.grpc.pb.h"
#include "server/daemon.h"

namespace {

using joader::v1::JobReply;
using joader::v1::JobRequest;

// The daemon `joader serve` runs (joader::Daemon), without a socket: reached in process.
struct Fuzzed {
  std::unique_ptr<joader::Daemon> daemon;
  std::unique_ptr<joader::v1::Joader::Stub> stub;
  joader::Engine& engine() { return daemon->engine(); }
};

Fuzzed& daemon() {
  static Fuzzed* d = [] {
    google::protobuf::SetLogHandler(nullptr);  // fuzzed strings that are not UTF-8: refused, not logged
    auto* out = new Fuzzed;
    char root[] = "/tmp/joader-service-fuzz-XXXXXX";
    if (mkdtemp(root) == nullptr) std::abort();
    joader::DaemonOptions o;
    o.engine.cache_bytes = 4 << 20;
    o.engine.threads = 1;
    o.engine.data_root = root;
    out->daemon = joader::Daemon::start(o);
    joader::v1::AddDatasetRequest base;
    base.set_protocol_version(joader::kProtocolVersion);
    base.set_name("base");
    base.set_source("synthetic:64:16x12");
    base.set_crop(8);
    out->engine().add_dataset(base, {});
    out->stub = joader::v1::Joader::NewStub(out->daemon->in_process_channel());
    return out;
  }();
  return *d;
}

void set_deadline(grpc::ClientContext& ctx, int ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

std::string dataset_name(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return "base";
    case 1: return "d" + std::to_string(in.ConsumeIntegralInRange(0, 3));
    default: return in.ConsumeRandomLengthString(24);
  }
}

// A source that is cheap to index and read, or fuzzed text (refused or confined to the empty root).
std::string source(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return "synthetic:" + std::to_string(in.ConsumeIntegralInRange(1, 300)) + ":" +
             std::to_string(in.ConsumeIntegralInRange(1, 64)) + "x" + std::to_string(in.ConsumeIntegralInRange(1, 64));
    case 1: return "imagefolder:/etc";
    case 2: return "filelist:/etc/passwd";
    default: return in.ConsumeRandomLengthString(40);
  }
}

bool too_big(const std::string& src) {
  // synthetic:COUNT[:WxH] with a large count or size would only make the input slow.
  if (src.rfind("synthetic:", 0) != 0) return false;
  unsigned long count = std::strtoul(src.c_str() + 10, nullptr, 10);
  const size_t colon = src.find(':', 10);
  unsigned long w = 256, h = 256;
  if (colon != std::string::npos) {
    char* x = nullptr;
    w = std::strtoul(src.c_str() + colon + 1, &x, 10);
    h = (x != nullptr && *x == 'x') ? std::strtoul(x + 1, nullptr, 10) : 0;
  }
  return count > 2000 || w * h > 128 * 128;
}

void add_dataset(FuzzedDataProvider& in) {
  joader::v1::AddDatasetRequest req;
  if (in.ConsumeBool()) {
    if (!req.ParseFromString(in.ConsumeRandomLengthString(200))) return;
  } else {
    req.set_protocol_version(in.ConsumeIntegralInRange(0, 3) == 0 ? in.ConsumeIntegral<uint32_t>() : 1);
    req.set_name(dataset_name(in));
    req.set_source(source(in));
    req.set_raw(in.ConsumeBool());
    req.set_resize(in.ConsumeIntegralInRange<uint32_t>(0, 40));
    req.set_crop(in.ConsumeIntegralInRange<uint32_t>(0, 40));
    req.set_on_error(in.ConsumeBool() ? "skip" : in.ConsumeRandomLengthString(6));
  }
  if (too_big(req.source())) return;
  grpc::ClientContext ctx;
  set_deadline(ctx, 5000);
  auto reader = daemon().stub->AddDataset(&ctx, req);
  joader::v1::AddDatasetProgress p;
  while (reader->Read(&p)) {
  }
  reader->Finish();
}

JobRequest job_message(FuzzedDataProvider& in, uint64_t last_seq) {
  JobRequest m;
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: {  // raw bytes
      m.ParseFromString(in.ConsumeRandomLengthString(64));
      break;
    }
    case 1: {
      m.mutable_ack()->set_seq(in.ConsumeBool() ? last_seq : in.ConsumeIntegral<uint64_t>());
      break;
    }
    default: {
      joader::v1::Register* r = m.mutable_register_();
      r->set_protocol_version(in.ConsumeIntegralInRange(0, 7) == 0 ? 2 : 1);
      r->set_dataset(dataset_name(in));
      if (in.ConsumeBool()) r->set_name(in.ConsumeRandomLengthString(16));
      const int n = in.ConsumeIntegralInRange(0, 12);
      for (int i = 0; i < n; ++i) r->add_ids(in.ConsumeIntegralInRange<uint32_t>(0, 70));
      r->set_batch_size(in.ConsumeIntegralInRange<uint32_t>(0, 9));
      r->set_epochs(in.ConsumeIntegralInRange<uint32_t>(0, 3));
      r->set_prefetch(in.ConsumeIntegralInRange<uint32_t>(0, 5));
      r->set_drop_last(in.ConsumeBool());
      if (in.ConsumeBool()) {
        r->set_resume(true);
        r->set_resume_epoch(in.ConsumeIntegralInRange<uint32_t>(0, 4));
        const int c = in.ConsumeIntegralInRange(0, 6);
        for (int i = 0; i < c; ++i) r->add_resume_consumed(in.ConsumeIntegralInRange<uint32_t>(0, 70));
      }
    }
  }
  return m;
}

void job(FuzzedDataProvider& in) {
  grpc::ClientContext ctx;
  set_deadline(ctx, 300);
  auto rw = daemon().stub->Job(&ctx);
  uint64_t last_seq = 0;
  const int steps = in.ConsumeIntegralInRange(1, 24);
  for (int i = 0; i < steps && in.remaining_bytes() > 0; ++i) {
    if (i > 0 && in.ConsumeBool()) {
      JobReply reply;
      if (!rw->Read(&reply)) break;
      if (reply.has_batch()) last_seq = reply.batch().seq();
    } else if (!rw->Write(job_message(in, last_seq))) {
      break;
    }
  }
  if (in.ConsumeBool()) {
    rw->WritesDone();
    JobReply reply;
    while (rw->Read(&reply)) {
    }
  } else {
    ctx.TryCancel();  // the client vanishes
  }
  rw->Finish();
}

// Checks the oracle, then removes the datasets the input added, so that inputs are independent.
void check_nothing_held_and_reset() {
  joader::Engine& engine = daemon().engine();
  joader::v1::StatusReply s;
  for (int i = 0;; ++i) {
    s = engine.status();
    if (s.jobs_size() == 0 && s.pinned_bytes() == 0) break;
    if (i == 200) {
      std::fprintf(stderr, "after every call ended the daemon still holds %d job(s) and %llu pinned bytes\n",
                   s.jobs_size(), static_cast<unsigned long long>(s.pinned_bytes()));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const joader::v1::DatasetInfo& d : engine.list_datasets()) {
    if (d.name() != "base") engine.remove_dataset(d.name());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  for (int op = 0; op < 8 && in.remaining_bytes() > 0; ++op) {
    switch (in.ConsumeIntegralInRange(0, 5)) {
      case 0: add_dataset(in); break;
      case 1: {
        joader::v1::RemoveDatasetRequest req;
        req.set_name(dataset_name(in));
        if (req.name() == "base") break;
        grpc::ClientContext ctx;
        set_deadline(ctx, 5000);
        joader::v1::RemoveDatasetReply reply;
        daemon().stub->RemoveDataset(&ctx, req, &reply);
        break;
      }
      case 2: {
        grpc::ClientContext ctx;
        set_deadline(ctx, 5000);
        joader::v1::StatusReply reply;
        daemon().stub->Status(&ctx, joader::v1::StatusRequest(), &reply);
        break;
      }
      case 3: {
        grpc::ClientContext ctx;
        set_deadline(ctx, 5000);
        joader::v1::ListDatasetsReply reply;
        daemon().stub->ListDatasets(&ctx, joader::v1::ListDatasetsRequest(), &reply);
        break;
      }
      default: job(in); break;
    }
  }
  check_nothing_held_and_reset();
  return 0;
}
