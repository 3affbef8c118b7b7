// joader_raw_client: speaks the gRPC protocol directly, without the client library, to send what a
// well-behaved client never would. Each MODE prints one line "CODE MESSAGE" (the call's final
// gRPC status) and exits 0; the tests check the code and that the daemon goes on serving.
//
//   first-not-register DATASET  a job stream whose first message is an Ack
//   acks-out-of-thin-air DATASET  Register (items 0..39, batch 4, one epoch), then 10 000 Acks of
//                               batches never sent (random seqs, 0, 2^64-1) and a second Register;
//                               then reads and acknowledges normally; prints "exact" on a line
//                               before the status if every item came exactly once
//   huge-register DATASET       a Register of 70 MiB (more than the 64 MiB limit)
//   long-name DATASET           a Register whose job name is 1 MiB long
//   long-dataset-name           an AddDataset whose name is 1 MiB long
//   control-chars               an AddDataset whose name holds a newline
//   never-register              a job stream that sends nothing: prints the status it ends with
//   hold-jobs DATASET N         N job streams that register (batches of 4) and then read nothing;
//                               prints "open N" once every one is registered, holds them until
//                               stdin closes, then cancels them
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
#include <iostream>
#include <random>
#include <set>
#include <string>

#include "common/protocol.h"
#include "joader.grpc.pb.h"

namespace {

using joader::v1::JobReply;
using joader::v1::JobRequest;

int print(const grpc::Status& s) {
  std::printf("%d %s\n", static_cast<int>(s.error_code()), s.error_message().c_str());
  return 0;
}

JobRequest make_register(const std::string& dataset, uint32_t batch) {
  JobRequest r;
  auto* reg = r.mutable_register_();
  reg->set_protocol_version(joader::kProtocolVersion);
  reg->set_dataset(dataset);
  reg->set_batch_size(batch);
  reg->set_epochs(1);
  return r;
}

// Writes `first`, then reads (acknowledging batches) until the daemon ends the stream.
grpc::Status one_message_job(joader::v1::Joader::Stub& stub, const JobRequest& first) {
  grpc::ClientContext ctx;
  auto rw = stub.Job(&ctx);
  rw->Write(first);
  JobReply reply;
  while (rw->Read(&reply)) {
    if (reply.has_end()) rw->WritesDone();
  }
  return rw->Finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: joader_raw_client SOCKET MODE [DATASET]\n";
    return 2;
  }
  const std::string socket = argv[1], mode = argv[2], dataset = argc > 3 ? argv[3] : "";
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);  // let the daemon be the one that refuses
  auto stub = joader::v1::Joader::NewStub(
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));

  if (mode == "first-not-register") {
    JobRequest ack;
    ack.mutable_ack()->set_seq(5);
    return print(one_message_job(*stub, ack));
  }
  if (mode == "huge-register") {
    JobRequest r = make_register(dataset, 4);
    r.mutable_register_()->set_name(std::string(70 << 20, 'x'));  // one string: cheap to build, even under TSan
    return print(one_message_job(*stub, r));
  }
  if (mode == "long-name") {
    JobRequest r = make_register(dataset, 4);
    r.mutable_register_()->set_name(std::string(1 << 20, 'j'));
    return print(one_message_job(*stub, r));
  }
  if (mode == "long-dataset-name" || mode == "control-chars") {
    joader::v1::AddDatasetRequest req;
    req.set_protocol_version(joader::kProtocolVersion);
    req.set_name(mode == "control-chars" ? "two\nlines" : std::string(1 << 20, 'd'));
    req.set_source("synthetic:10");
    req.set_crop(8);
    grpc::ClientContext ctx;
    auto reader = stub->AddDataset(&ctx, req);
    joader::v1::AddDatasetProgress p;
    while (reader->Read(&p)) {
    }
    return print(reader->Finish());
  }
  if (mode == "acks-out-of-thin-air") {
    grpc::ClientContext ctx;
    auto rw = stub->Job(&ctx);
    JobRequest r = make_register(dataset, 4);
    for (uint32_t i = 0; i < 40; ++i) r.mutable_register_()->add_ids(i);
    rw->Write(r);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 10'000; ++i) {
      JobRequest ack;
      ack.mutable_ack()->set_seq(i == 0 ? 0 : i == 1 ? ~uint64_t{0} : rng() | (uint64_t{1} << 40));
      rw->Write(ack);
    }
    rw->Write(r);  // a second Register is not a new job
    std::multiset<uint32_t> ids;
    JobReply reply;
    while (rw->Read(&reply)) {
      if (reply.has_batch()) {
        ids.insert(reply.batch().ids().begin(), reply.batch().ids().end());
        JobRequest ack;
        ack.mutable_ack()->set_seq(reply.batch().seq());
        rw->Write(ack);
      } else if (reply.has_end()) {
        rw->WritesDone();
      }
    }
    bool exact = ids.size() == 40;
    for (uint32_t i = 0; i < 40; ++i) exact = exact && ids.count(i) == 1;
    if (exact) std::printf("exact\n");
    return print(rw->Finish());
  }
  if (mode == "never-register") {
    grpc::ClientContext ctx;
    auto rw = stub->Job(&ctx);
    JobReply reply;
    while (rw->Read(&reply)) {
    }
    return print(rw->Finish());
  }
  if (mode == "hold-jobs") {
    const int n = argc > 4 ? std::atoi(argv[4]) : 0;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<grpc::ClientReaderWriter<JobRequest, JobReply>>> streams;
    for (int i = 0; i < n; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      streams.push_back(stub->Job(contexts.back().get()));
      streams.back()->Write(make_register(dataset, 4));
      JobReply reply;
      if (!streams.back()->Read(&reply) || !reply.has_registered()) {
        return print(streams.back()->Finish());
      }
    }
    std::printf("open %d\n", n);
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    for (auto& c : contexts) c->TryCancel();
    for (auto& s : streams) s->Finish();
    return print(grpc::Status(grpc::StatusCode::CANCELLED, "held and cancelled"));
  }
  std::cerr << "unknown mode " << mode << "\n";
  return 2;
}
