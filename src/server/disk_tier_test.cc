// The disk tier in the Engine (EngineOptions::disk_cache): what a daemon decoded, a restarted one
// reads back, byte for byte, and never bytes a changed file or a corrupt record would give.
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "prep/image_prep.h"
#include "server/engine.h"
#include "source/source.h"
#include "testing/requests.h"
#include "testing/temp_dir.h"

namespace joader {
namespace {

using test_support::job_request;
using test_support::synthetic;

using test_support::TempDir;

EngineOptions disk_engine(const std::string& dir) {
  EngineOptions o;
  o.cache_bytes = 8 << 20;
  o.threads = 2;
  o.check_invariants = true;
  o.disk_cache = dir + "/disk";
  o.disk_cache_bytes = 64 << 20;
  return o;
}

struct Item {
  std::vector<uint8_t> bytes;
  uint32_t width = 0, height = 0;
  bool operator==(const Item&) const = default;
};

// One epoch of a job on `dataset`, read on this thread (acknowledging each batch at once): every
// item's bytes and shape, by id.
std::map<uint32_t, Item> one_epoch(Engine& engine, const std::string& dataset) {
  std::map<uint32_t, Item> items;
  v1::Registered reply;
  const Engine::JobId id = engine.open_job(job_request(dataset, 4, 1, 2), &reply);
  v1::Batch b;
  for (;;) {
    const Engine::Poll p = engine.poll_batch(id, &b);
    if (p == Engine::Poll::kDone) break;
    if (p == Engine::Poll::kWait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    for (size_t i = 0, x = 0; i < size_t(b.ids().size()); ++i) {
      Item item;
      const uint32_t parts = b.extent_counts().empty() ? 1 : b.extent_counts()[i];
      for (uint32_t k = 0; k < parts; ++k, ++x) {
        const uint64_t at = b.extent_counts().empty() ? b.offsets()[i] : b.extent_offsets()[x];
        const uint64_t n = std::min<uint64_t>(b.extent_counts().empty() ? b.lengths()[i] : b.extent_lengths()[x],
                                              b.lengths()[i] - item.bytes.size());
        item.bytes.insert(item.bytes.end(), engine.arena().data() + at, engine.arena().data() + at + n);
      }
      if (!b.widths().empty()) item.width = b.widths()[i], item.height = b.heights()[i];
      EXPECT_TRUE(items.emplace(b.ids()[i], std::move(item)).second) << "item " << b.ids()[i] << " twice";
    }
    engine.ack(id, b.seq());
  }
  engine.close_job(id);
  return items;
}

// A first daemon's epoch of the dataset (decoded, and kept in the tier once this returns).
std::map<uint32_t, Item> first_daemons_epoch(const std::string& dir, const v1::AddDatasetRequest& add) {
  Engine engine(disk_engine(dir));
  engine.add_dataset(add, {});
  std::map<uint32_t, Item> decoded = one_epoch(engine, add.name());
  engine.disk_cache()->flush();
  return decoded;
}

std::vector<std::string> segments(const std::string& disk) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(disk)) {
    if (e.path().filename().string().rfind("seg-", 0) == 0) out.push_back(e.path());
  }
  return out;
}

TEST(DiskTier, ARestartedDaemonReadsEveryItemBackInsteadOfDecodingItWithTheSameBytesAndShapes) {
  TempDir dir;
  for (const bool own_size : {false, true}) {
    SCOPED_TRACE(own_size ? "stored at each image's own size" : "center-cropped");
    v1::AddDatasetRequest add = synthetic("train", 40);
    if (own_size) add.set_crop(0);
    std::map<uint32_t, Item> decoded;
    {
      Engine engine(disk_engine(dir.path));
      engine.add_dataset(add, {});
      decoded = one_epoch(engine, "train");
      engine.disk_cache()->flush();
      const v1::StatusReply s = engine.status();
      EXPECT_EQ(s.loads(), 40u);
      EXPECT_EQ(s.disk_reads(), 0u);
      EXPECT_EQ(s.disk_cache().written(), 40u);
      EXPECT_EQ(s.disk_cache().items(), 40u);
      engine.remove_dataset("train");  // drops its items: a fresh start for the next round
      EXPECT_EQ(engine.status().disk_cache().items(), 0u);
      engine.add_dataset(add, {});
      decoded = one_epoch(engine, "train");
      engine.disk_cache()->flush();
    }
    ASSERT_EQ(decoded.size(), 40u);
    Engine engine(disk_engine(dir.path));
    engine.add_dataset(add, {});
    EXPECT_EQ(one_epoch(engine, "train"), decoded);
    const v1::StatusReply s = engine.status();
    EXPECT_EQ(s.loads(), 40u);
    EXPECT_EQ(s.disk_reads(), 40u) << "nothing decoded";
    EXPECT_EQ(s.disk_cache().hits(), 40u);
    EXPECT_EQ(s.disk_cache().written(), 0u);
    engine.remove_dataset("train");
  }
}

TEST(DiskTier, ACorruptRecordIsDecodedAgainAndRewritten) {
  TempDir dir;
  const v1::AddDatasetRequest add = synthetic("train", 20);
  const std::map<uint32_t, Item> decoded = first_daemons_epoch(dir.path, add);
  const std::vector<std::string> segs = segments(dir.path + "/disk");
  ASSERT_EQ(segs.size(), 1u);
  {
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40 + 100);  // inside the first record's bytes
    f.put('\x5a');
  }
  Engine engine(disk_engine(dir.path));
  engine.add_dataset(add, {});
  EXPECT_EQ(one_epoch(engine, "train"), decoded) << "never the corrupt bytes";
  engine.disk_cache()->flush();
  const v1::StatusReply s = engine.status();
  EXPECT_EQ(s.disk_reads(), 19u);
  EXPECT_EQ(s.disk_cache().corrupt(), 1u);
  EXPECT_EQ(s.disk_cache().written(), 1u) << "the item decoded again is kept again";
}

TEST(DiskTier, ADatasetRegisteredAgainWithAnotherSourceOfLookalikeItemsIsNotServedTheOldOnes) {
  TempDir dir;
  v1::AddDatasetRequest add = synthetic("train", 20);  // items "synthetic:<id>", size 0, no mtime
  first_daemons_epoch(dir.path, add);
  add.set_source("synthetic:20:16x12");  // the same item list, other pictures
  Engine engine(disk_engine(dir.path));
  engine.add_dataset(add, {});
  one_epoch(engine, "train");
  EXPECT_EQ(engine.status().disk_reads(), 0u);
}

TEST(DiskTier, ARecordOfAnotherLengthThanTheItemsBlockIsNotUsedButReplaced) {
  TempDir dir;
  const v1::AddDatasetRequest add = synthetic("train", 20);
  const std::map<uint32_t, Item> decoded = first_daemons_epoch(dir.path, add);
  {  // Item 3's record replaced by a whole, intact record of a 4x4 image: not its 8x8 crop.
    PreparedStore::Options o;
    o.dir = dir.path + "/disk";
    o.capacity = 64 << 20;
    PreparedStore store(o);
    PrepSpec spec;
    spec.raw = false;
    spec.crop = 8;
    const PreparedStore::Namespace ns = store.open_namespace(
        "train", add.source() + '\n' + content_fingerprint(*open_source(add.source())), prepared_bytes_identity(spec));
    ASSERT_TRUE(store.find(ns, 3)) << "the engine's namespace, as computed here";
    store.forget(ns, 3);
    ASSERT_TRUE(store.offer(ns, 3, {4, 4}, std::vector<uint8_t>(4 * 4 * 3, 7)));
  }
  Engine engine(disk_engine(dir.path));
  engine.add_dataset(add, {});
  EXPECT_EQ(one_epoch(engine, "train"), decoded);
  engine.disk_cache()->flush();
  const v1::StatusReply s = engine.status();
  EXPECT_EQ(s.disk_reads(), 19u);
  EXPECT_EQ(s.disk_cache().written(), 1u) << "its right bytes kept again";
}

// Two images whose JPEG files have the same size (the shorter padded after its end marker, which
// decoders ignore), so that the item list's fingerprint cannot tell them apart.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> same_size_jpegs() {
  Image a{24, 16, std::vector<uint8_t>(24 * 16 * 3)}, b = a;
  for (size_t i = 0; i < a.rgb.size(); ++i) a.rgb[i] = uint8_t(i * 7), b.rgb[i] = uint8_t(255 - i * 3);
  std::vector<uint8_t> ja = encode_jpeg(a, 90), jb = encode_jpeg(b, 90);
  const size_t n = std::max(ja.size(), jb.size());
  ja.resize(n, 0), jb.resize(n, 0);
  return {ja, jb};
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

TEST(DiskTier, AFileRewrittenInPlaceAtTheSameSizeIsDecodedAgainNotServedFromDisk) {
  TempDir dir;
  const auto [before, after] = same_size_jpegs();
  std::filesystem::create_directories(dir.path + "/data/cls");
  for (int i = 0; i < 4; ++i) write_file(dir.path + "/data/cls/" + std::to_string(i) + ".jpg", before);
  v1::AddDatasetRequest add = synthetic("photos", 1);
  add.set_source("imagefolder:" + dir.path + "/data");
  std::map<uint32_t, Item> first;
  std::string fingerprint;
  {
    Engine engine(disk_engine(dir.path));
    const v1::DatasetInfo info = engine.add_dataset(add, {});
    EXPECT_EQ(info.items(), 4u);
    fingerprint = info.fingerprint();
    first = one_epoch(engine, "photos");
    engine.disk_cache()->flush();
  }
  const std::string changed = dir.path + "/data/cls/2.jpg";
  write_file(changed, after);
  const timespec later[2] = {{0, UTIME_OMIT}, {std::time(nullptr) + 100, 0}};  // whatever the clock's grain
  ASSERT_EQ(::utimensat(AT_FDCWD, changed.c_str(), later, 0), 0);

  Engine engine(disk_engine(dir.path));
  EXPECT_EQ(engine.add_dataset(add, {}).fingerprint(), fingerprint) << "the item list looks the same";
  const std::map<uint32_t, Item> second = one_epoch(engine, "photos");
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second.at(0), first.at(0));
  EXPECT_NE(second.at(2), first.at(2)) << "the new picture, not the one kept on disk";
  PrepSpec spec;
  spec.raw = false;
  spec.crop = 8;
  std::vector<uint8_t> expected;
  prepare(spec, after, expected);
  EXPECT_EQ(second.at(2).bytes, expected);
  EXPECT_EQ(engine.status().disk_reads(), 0u) << "the dataset's kept items are dropped as a whole";
}

TEST(DiskTier, ADaemonRefusesAFolderAnotherDaemonUses) {
  TempDir dir;
  Engine first(disk_engine(dir.path));
  try {
    Engine second(disk_engine(dir.path));
    FAIL() << "two daemons on one disk cache";
  } catch (const PreparedStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another process"), std::string::npos) << e.what();
  }
}

TEST(DiskTier, RawDatasetsAreNotKept) {
  TempDir dir;
  v1::AddDatasetRequest add = synthetic("raw", 10);
  add.set_crop(0);
  add.set_raw(true);
  Engine engine(disk_engine(dir.path));
  engine.add_dataset(add, {});
  EXPECT_EQ(one_epoch(engine, "raw").size(), 10u);
  engine.disk_cache()->flush();
  EXPECT_EQ(engine.status().disk_cache().items(), 0u);
}

}  // namespace
}  // namespace joader
