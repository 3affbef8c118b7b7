// BatchBuilder on a real client Job, against a scripted daemon whose arena holds known images:
// the batch a C++ program gets equals what prep/ and client/layout.h make of the same bytes.
#include "client/batch_builder.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/layout.h"
#include "common/augment_wire.h"
#include "ipc/shared_arena.h"
#include "joader.grpc.pb.h"

namespace joader {
namespace {

constexpr uint32_t kHeight = 6, kWidth = 8;
constexpr uint64_t kItemBytes = uint64_t{kHeight} * kWidth * 3;

// Registers a dataset of kHeight × kWidth RGB items and sends one batch of items 0..n-1, item i
// at offset i * kItemBytes of its arena (image i's byte k is 7 * i + 3 * k mod 256), then waits
// until the client goes.
class ImagesDaemon final : public v1::Joader::Service {
 public:
  ImagesDaemon(uint32_t items, uint64_t length) : items_(items), length_(length) {
    for (uint64_t k = 0; k < items * kItemBytes; ++k) arena_.data()[k] = uint8_t((7 * (k / kItemBytes) + 3 * k) % 256);
  }
  const uint8_t* image(uint32_t i) const { return arena_.data() + i * kItemBytes; }

  grpc::Status Job(grpc::ServerContext*, grpc::ServerReaderWriter<v1::JobReply, v1::JobRequest>* stream) override {
    v1::JobRequest request;
    if (!stream->Read(&request)) return grpc::Status::OK;
    v1::JobReply reply;
    v1::Registered* r = reply.mutable_registered();
    r->set_job("job-1");
    r->set_arena(arena_.name());
    r->set_arena_size(arena_.size());
    r->set_items_per_epoch(items_);
    r->set_height(kHeight);
    r->set_width(kWidth);
    r->set_channels(3);
    stream->Write(reply);
    reply.Clear();
    v1::Batch* b = reply.mutable_batch();
    b->set_epoch(2);
    b->set_last_of_epoch(true);
    for (uint32_t i = 0; i < items_; ++i) {
      b->add_ids(10 + i);
      b->add_labels(i);
      b->add_offsets(i * kItemBytes);
      b->add_lengths(length_);
    }
    stream->Write(reply);
    while (stream->Read(&request)) {
    }
    return grpc::Status::OK;
  }

 private:
  uint32_t items_;
  uint64_t length_;
  SharedArena arena_{1 << 20};
};

class BatchBuilderOnAJob : public ::testing::Test {
 protected:
  std::unique_ptr<Job> open(uint32_t items, uint64_t length = kItemBytes) {
    char dir[] = "/tmp/joader-builder-test-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    const std::string socket = dir_ + "/d.sock";
    service_ = std::make_unique<ImagesDaemon>(items, length);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    client_ = std::make_unique<Client>(socket);
    JobOptions options;
    options.dataset = "d";
    return client_->open_job(options);
  }
  void TearDown() override {
    client_.reset();
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  static ImageView view(const uint8_t* rgb) { return ImageView{rgb, kWidth, kHeight, size_t{kWidth} * 3}; }

  std::string dir_;
  std::unique_ptr<ImagesDaemon> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(BatchBuilderOnAJob, StoredImagesComeAsTheFloatPlanesOfToTensorAndNormalize) {
  auto job = open(2);
  BatchBuilder builder(*job, {}, 0, 1);
  BatchFormat format;
  format.chw = true;
  format.floats = true;
  format.normalize = std::array<float, 6>{0.5f, 0.4f, 0.3f, 0.2f, 0.25f, 0.3f};
  Batch b;
  ASSERT_TRUE(job->next(&b));
  ASSERT_EQ(builder.kind(), BatchKind::kImages);
  EXPECT_EQ(builder.shape(2, format), (std::array<size_t, 4>{2, 3, kHeight, kWidth}));
  ASSERT_TRUE(builder.floats(format));
  std::vector<float> batch(builder.elements(2, format));
  builder.gather(b, format, batch.data());
  const size_t pixels = size_t{kHeight} * kWidth;
  for (uint32_t i = 0; i < 2; ++i) {
    for (size_t p = 0; p < pixels; ++p) {
      for (int c = 0; c < 3; ++c) {
        const float x = float(service_->image(i)[3 * p + c]) / 255.0f;
        const float want = (x - (*format.normalize)[c]) / (*format.normalize)[3 + c];
        ASSERT_EQ(batch[i * pixels * 3 + c * pixels + p], want) << "item " << i << " pixel " << p << " channel " << c;
      }
    }
  }
}

TEST_F(BatchBuilderOnAJob, AnAugmentingJobGetsWhatAugmentMakesOfEachItemForItsSeedEpochAndId) {
  auto job = open(3);
  const std::vector<AugmentOp> ops =
      ops_from_json({R"({"random_resized_crop": {"size": 4}})", R"({"random_horizontal_flip": {}})"});
  BatchBuilder builder(*job, ops, 42, 2);
  const BatchFormat format;  // uint8 NHWC
  Batch b;
  ASSERT_TRUE(job->next(&b));
  EXPECT_EQ(builder.shape(3, format), (std::array<size_t, 4>{3, 4, 4, 3}));
  std::vector<uint8_t> batch(builder.elements(3, format));
  builder.gather(b, format, batch.data());
  for (uint32_t i = 0; i < 3; ++i) {
    const Image want = augment(view(service_->image(i)), ops, 42, 2, 10 + i);  // epoch 2, id 10 + i
    ASSERT_EQ(std::vector<uint8_t>(batch.begin() + i * 48, batch.begin() + (i + 1) * 48), want.rgb) << "item " << i;
  }
}

TEST_F(BatchBuilderOnAJob, AnItemThatCannotBeAugmentedEndsTheJobWithDataLossNamingIt) {
  auto job = open(1, kItemBytes - 3);  // one pixel short of its image
  BatchBuilder builder(*job, ops_from_json({R"({"center_crop": {"size": 4}})"}), 1, 1);
  Batch b;
  ASSERT_TRUE(job->next(&b));
  std::vector<uint8_t> batch(builder.elements(1, BatchFormat{}));
  try {
    builder.gather(b, BatchFormat{}, batch.data());
    FAIL() << "an item of the wrong size was augmented";
  } catch (const ClientError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::DATA_LOSS);
    EXPECT_NE(std::string(e.what()).find("augment: item 10:"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(job->next(&b)) << "the job has ended";
}

TEST(BatchFormat, NormalizeOrEraseWithoutFloatsIsRefused) {
  BatchFormat format;
  format.erase = ErasingOp{};
  EXPECT_THROW(format.check(), ClientError);
  format.floats = true;
  EXPECT_NO_THROW(format.check());
  format.erase->p = 2;
  EXPECT_THROW(format.check(), ClientError);
}

}  // namespace
}  // namespace joader
