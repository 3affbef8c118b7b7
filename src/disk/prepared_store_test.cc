#include "disk/prepared_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include "testing/temp_dir.h"

namespace joader {
namespace {

using test_support::TempDir;

// An item's bytes, a function of (seed, item) only, so that any reader can tell them right.
std::vector<uint8_t> bytes_of(uint32_t item, size_t length, uint32_t seed = 1) {
  std::vector<uint8_t> out(length);
  uint64_t x = (uint64_t(seed) << 32 | item) * 0x9e3779b97f4a7c15ull + 1;
  for (uint8_t& b : out) {
    x ^= x >> 29, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 32;
    b = uint8_t(x);
  }
  return out;
}

size_t length_of(uint32_t item) { return 100 + (item * 7919u) % 3000; }

PreparedStore::Options options(const std::string& dir, uint64_t capacity = uint64_t{1} << 30) {
  PreparedStore::Options o;
  o.dir = dir + "/cache";
  o.capacity = capacity;
  return o;
}

PreparedStore::Options logged(PreparedStore::Options o, std::vector<std::string>* lines) {
  auto mu = std::make_shared<std::mutex>();
  o.log = [lines, mu](const std::string& line) {
    std::lock_guard lk(*mu);
    lines->push_back(line);
  };
  return o;
}

// The log's lines but the warning a folder on tmpfs gets (/tmp may be one).
std::vector<std::string> notable(const std::vector<std::string>& log) {
  std::vector<std::string> out;
  for (const std::string& line : log) {
    if (line.find("tmpfs") == std::string::npos) out.push_back(line);
  }
  return out;
}

// Reads the item back and checks it is exactly bytes_of(item).
bool reads_back(PreparedStore& store, PreparedStore::Namespace ns, uint32_t item, uint32_t seed = 1) {
  const std::optional<PreparedStore::Entry> entry = store.find(ns, item);
  if (!entry) return false;
  std::vector<uint8_t> out(entry->length);
  return store.read(ns, item, out) && out == bytes_of(item, length_of(item), seed);
}

void offer_all(PreparedStore& store, PreparedStore::Namespace ns, uint32_t begin, uint32_t end, uint32_t seed = 1) {
  for (uint32_t item = begin; item < end; ++item) {
    ASSERT_TRUE(store.offer(ns, item, {item, item + 1}, bytes_of(item, length_of(item), seed))) << item;
  }
  store.flush();
}

std::vector<std::string> segments(const std::string& cache) {
  std::vector<std::string> out;
  for (const auto& space : std::filesystem::directory_iterator(cache)) {
    if (!space.is_directory()) continue;
    for (const auto& f : std::filesystem::directory_iterator(space.path())) {
      if (f.path().filename().string().rfind("seg-", 0) == 0) out.push_back(f.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PreparedStore, ItemsOfferedAreReadBackByteForByteInThisRunAndAfterTheStoreIsOpenedAgain) {
  TempDir dir;
  PreparedStore::Namespace ns;
  {
    PreparedStore store(options(dir.path));
    ns = store.open_namespace("train", "fp-1", "crop 224");
    offer_all(store, ns, 0, 200);
    for (uint32_t item = 0; item < 200; ++item) ASSERT_TRUE(reads_back(store, ns, item)) << item;
    EXPECT_EQ(store.find(ns, 0)->shape, (PreparedStore::Shape{0, 1}));
    EXPECT_FALSE(store.offer(ns, 7, {}, bytes_of(7, 10))) << "an item is stored once";
    EXPECT_EQ(store.stats().items, 200u);
    EXPECT_EQ(store.stats().written, 200u);
  }
  PreparedStore store(options(dir.path));
  EXPECT_EQ(store.open_namespace("train", "fp-1", "crop 224"), ns) << "the same dataset and prep, the same items";
  EXPECT_EQ(store.stats().items, 200u);
  for (uint32_t item = 0; item < 200; ++item) ASSERT_TRUE(reads_back(store, ns, item)) << item;
  EXPECT_EQ(store.find(ns, 199)->shape, (PreparedStore::Shape{199, 200}));
  EXPECT_FALSE(store.find(ns, 200));
  EXPECT_TRUE(store.holds(ns, 199));
  EXPECT_FALSE(store.holds(ns, 200));
  EXPECT_FALSE(store.holds(ns + 1, 0)) << "another namespace";
  EXPECT_EQ(store.stats().misses, 1u) << "a lookup of an item not stored; holds() counts nothing";
  EXPECT_EQ(store.stats().hits, 200u);
  EXPECT_EQ(store.stats().corrupt, 0u);
}

TEST(PreparedStore, ItemsSpreadOverSeveralSegmentFilesWhenOneIsFull) {
  TempDir dir;
  PreparedStore::Options o = options(dir.path);
  o.segment_bytes = 20000;
  PreparedStore::Namespace ns;
  {
    PreparedStore store(o);
    ns = store.open_namespace("train", "fp", "raw");
    offer_all(store, ns, 0, 100);
  }
  EXPECT_GT(segments(o.dir).size(), 5u);
  for (const std::string& seg : segments(o.dir)) EXPECT_LE(std::filesystem::file_size(seg), 20000u) << seg;
  PreparedStore store(o);
  ns = store.open_namespace("train", "fp", "raw");
  offer_all(store, ns, 100, 120);  // appends after the segments found, overwriting none
  for (uint32_t item = 0; item < 120; ++item) ASSERT_TRUE(reads_back(store, ns, item)) << item;
}

TEST(PreparedStore, ASecondStoreOnTheSameFolderIsRefusedNamingThePidThatHoldsIt) {
  TempDir dir;
  PreparedStore first(options(dir.path));
  try {
    PreparedStore second(options(dir.path));
    FAIL() << "two stores on one folder";
  } catch (const PreparedStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another process (pid " + std::to_string(getpid()) + ")"),
              std::string::npos)
        << e.what();
  }
}

TEST(PreparedStore, AFolderThatCannotBeMadeIsRefusedWithItsReason) {
  TempDir dir;
  const std::string file = dir.path + "/a-file";
  { std::ofstream(file) << "x"; }
  PreparedStore::Options o;
  o.dir = file;
  o.capacity = 1 << 20;
  EXPECT_THROW(PreparedStore{o}, PreparedStoreError);
  o.dir = file + "/below";
  EXPECT_THROW(PreparedStore{o}, PreparedStoreError);
}

TEST(PreparedStore, AFolderOthersMayWriteIsRefused) {
  TempDir dir;
  const std::string shared = dir.path + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);  // whatever the umask
  PreparedStore::Options o;
  o.dir = shared;
  o.capacity = 1 << 20;
  try {
    PreparedStore store(o);
    FAIL() << "a folder anyone may write";
  } catch (const PreparedStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("mode 0777"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);
  PreparedStore store(o);
}

TEST(PreparedStore, ALinkInPlaceOfTheFolderOrOfANamespaceInItIsNotFollowed) {
  TempDir dir;
  const std::string elsewhere = dir.path + "/elsewhere";
  std::filesystem::create_directories(elsewhere);
  { std::ofstream(elsewhere + "/precious") << "x"; }
  std::filesystem::create_directory_symlink(elsewhere, dir.path + "/cache");
  EXPECT_THROW(PreparedStore{options(dir.path)}, PreparedStoreError) << "DIR itself a link";
  std::filesystem::remove(dir.path + "/cache");
  std::filesystem::create_directories(dir.path + "/cache");
  std::filesystem::create_directory_symlink(elsewhere, dir.path + "/cache/00112233aabbccdd");
  std::vector<std::string> log;
  {
    PreparedStore store(logged(options(dir.path), &log));
    EXPECT_EQ(store.stats().items, 0u);
    const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
    offer_all(store, ns, 0, 3);
    store.drop_namespace(ns);
  }
  ASSERT_EQ(notable(log).size(), 1u);
  EXPECT_NE(notable(log)[0].find("00112233aabbccdd is not a folder of this user"), std::string::npos) << log[0];
  EXPECT_TRUE(std::filesystem::exists(elsewhere + "/precious")) << "nothing deleted through the link";
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path + "/cache/00112233aabbccdd")) << "left alone";
}

TEST(PreparedStore, ANamespaceDroppedWhileItsItemsAreWrittenKeepsNothingAndCountsNothing) {
  TempDir dir;
  PreparedStore store(options(dir.path));
  for (int round = 0; round < 20; ++round) {
    const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
    for (uint32_t item = 0; item < 50; ++item) store.offer(ns, item, {}, bytes_of(item, length_of(item)));
    store.drop_namespace(ns);  // with records queued and one being written, most rounds
    EXPECT_EQ(store.stats().items, 0u);
    EXPECT_EQ(store.stats().bytes, 0u);
  }
  store.flush();
  const PreparedStore::Stats s = store.stats();
  EXPECT_EQ(s.items, 0u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.queued_bytes, 0u);
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  offer_all(store, ns, 0, 10);
  for (uint32_t item = 0; item < 10; ++item) EXPECT_TRUE(reads_back(store, ns, item)) << item;
  EXPECT_EQ(store.stats().items, 10u);
}

TEST(PreparedStore, DatasetsOfEarlierRunsThatNoneOpensNowGiveTheirRoomWhenTheStoreIsFull) {
  TempDir dir;
  const uint64_t capacity = 30 * (40 + 3100);
  PreparedStore::Namespace old_ns;
  {
    PreparedStore store(options(dir.path, capacity));
    old_ns = store.open_namespace("last-week", "fp", "raw");
    uint32_t item = 0;
    while (store.offer(old_ns, item, {}, bytes_of(item, length_of(item)))) ++item;
    store.flush();
    EXPECT_FALSE(store.stats().admitting);
  }
  std::vector<std::string> log;
  PreparedStore store(logged(options(dir.path, capacity), &log));
  const PreparedStore::Namespace kept = store.open_namespace("train", "fp", "raw");
  EXPECT_TRUE(store.stats().admitting);
  offer_all(store, kept, 0, 20);
  EXPECT_FALSE(store.find(old_ns, 0)) << "last week's dataset, not registered now, made room";
  for (uint32_t item = 0; item < 20; ++item) EXPECT_TRUE(reads_back(store, kept, item)) << item;
  ASSERT_FALSE(notable(log).empty());
  EXPECT_NE(notable(log)[0].find("dataset 'last-week' of an earlier run"), std::string::npos) << notable(log)[0];
}

TEST(PreparedStore, ARecordCorruptedOnDiskIsNeverServedAndTheItemCanBeWrittenAgain) {
  TempDir dir;
  std::vector<std::string> log;
  PreparedStore store(logged(options(dir.path), &log));
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  offer_all(store, ns, 0, 3);
  // Flip one byte of item 1's payload on disk (records: header of 40 bytes, then the bytes).
  const std::string seg = segments(dir.path + "/cache").at(0);
  const off_t at = off_t(40 + length_of(0) + 40 + 17);
  const int fd = ::open(seg.c_str(), O_RDWR);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= 0x20;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);

  std::vector<uint8_t> out(length_of(1));
  EXPECT_FALSE(store.read(ns, 1, out)) << "a corrupt record is a miss, not wrong bytes";
  EXPECT_FALSE(store.find(ns, 1)) << "and is forgotten";
  EXPECT_EQ(store.stats().corrupt, 1u);
  EXPECT_EQ(notable(log).size(), 1u);
  EXPECT_TRUE(reads_back(store, ns, 0));
  EXPECT_TRUE(reads_back(store, ns, 2));
  offer_all(store, ns, 1, 2);
  EXPECT_TRUE(reads_back(store, ns, 1));
}

TEST(PreparedStore, ATornTailIsCutWhenTheStoreIsOpenedAndTheRecordsBeforeItStay) {
  TempDir dir;
  PreparedStore::Namespace ns;
  {
    PreparedStore store(options(dir.path));
    ns = store.open_namespace("train", "fp", "raw");
    offer_all(store, ns, 0, 10);
  }
  const std::string seg = segments(dir.path + "/cache").at(0);
  const uintmax_t whole = std::filesystem::file_size(seg);
  std::filesystem::resize_file(seg, whole - length_of(9) / 2);  // item 9 half written
  std::vector<std::string> log;
  PreparedStore store(logged(options(dir.path), &log));
  EXPECT_EQ(store.stats().items, 9u);
  EXPECT_EQ(store.stats().corrupt, 1u);
  log = notable(log);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("torn or corrupt record"), std::string::npos) << log[0];
  EXPECT_EQ(std::filesystem::file_size(seg), whole - 40 - length_of(9)) << "cut after the last whole record";
  for (uint32_t item = 0; item < 9; ++item) EXPECT_TRUE(reads_back(store, ns, item)) << item;
  EXPECT_FALSE(store.find(ns, 9));
  offer_all(store, ns, 9, 10);
  EXPECT_TRUE(reads_back(store, ns, 9));
}

TEST(PreparedStore, AProcessKilledWhileWritingLeavesOnlyWholeRecordsBehind) {
  TempDir dir;
  const PreparedStore::Options o = options(dir.path);
  for (int round = 0; round < 5; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      PreparedStore store(o);
      const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
      for (uint32_t item = 0;; item = (item + 1) % 100000) {
        std::vector<uint8_t> bytes = bytes_of(item, length_of(item));
        store.offer(ns, item, {item, item + 1}, bytes);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 40 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status));
  }
  PreparedStore store(o);
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  const uint64_t items = store.stats().items;
  EXPECT_GT(items, 0u) << "the writers wrote something before they were killed";
  const uint64_t cut = store.stats().corrupt;
  EXPECT_LE(cut, 1u) << "at most the last writer's torn record (each opening cut the one before)";
  uint64_t checked = 0;
  for (uint32_t item = 0; item < 100000; ++item) {
    if (!store.find(ns, item)) continue;
    EXPECT_TRUE(reads_back(store, ns, item)) << item;
    ++checked;
  }
  EXPECT_EQ(checked, items);
  EXPECT_EQ(store.stats().corrupt, cut) << "every record indexed at opening reads back intact";
}

TEST(PreparedStore, ADatasetWhoseFilesOrPrepChangedLosesItsOldItemsAndOthersKeepTheirs) {
  TempDir dir;
  PreparedStore::Namespace old_ns, other;
  {
    PreparedStore store(options(dir.path));
    old_ns = store.open_namespace("train", "fp-1", "crop 224");
    other = store.open_namespace("val", "fp-9", "crop 224");
    offer_all(store, old_ns, 0, 5);
    offer_all(store, other, 0, 5, 2);
  }
  PreparedStore store(options(dir.path));
  const PreparedStore::Namespace changed_files = store.open_namespace("train", "fp-2", "crop 224");
  EXPECT_NE(changed_files, old_ns);
  EXPECT_FALSE(store.find(old_ns, 0)) << "never the old files' bytes";
  EXPECT_FALSE(store.find(changed_files, 0));
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/cache/" + fmt::format("{:016x}", old_ns)));
  EXPECT_EQ(store.stats().items, 5u);
  for (uint32_t item = 0; item < 5; ++item) EXPECT_TRUE(reads_back(store, other, item, 2)) << item;
  const PreparedStore::Namespace changed_prep = store.open_namespace("val", "fp-9", "crop 256");
  EXPECT_NE(changed_prep, other);
  EXPECT_FALSE(store.find(other, 0));
  EXPECT_EQ(store.stats().items, 0u);
  EXPECT_EQ(store.stats().bytes, 0u);
}

TEST(PreparedStore, AdmissionStopsAtTheCapacityOnceAndResumesWhenADatasetIsRemoved) {
  TempDir dir;
  std::vector<std::string> log;
  const uint64_t capacity = 10 * (40 + 3100);
  PreparedStore store(logged(options(dir.path, capacity), &log));
  const PreparedStore::Namespace a = store.open_namespace("a", "fp", "raw");
  const PreparedStore::Namespace b = store.open_namespace("b", "fp", "raw");
  uint32_t admitted = 0;
  for (uint32_t item = 0; item < 100; ++item) {
    if (store.offer(a, item, {}, bytes_of(item, length_of(item)))) ++admitted;
  }
  store.flush();
  EXPECT_GE(admitted, 10u);
  EXPECT_LT(admitted, 100u);
  EXPECT_LE(store.stats().bytes, capacity);
  EXPECT_FALSE(store.stats().admitting);
  EXPECT_EQ(notable(log).size(), 1u) << "one line when admission stops";
  EXPECT_FALSE(store.offer(b, 0, {}, bytes_of(0, 10)));
  for (uint32_t item = 0; item < admitted; ++item) EXPECT_TRUE(reads_back(store, a, item)) << "reads go on";

  store.drop_namespace(a);
  EXPECT_TRUE(store.stats().admitting) << "room again";
  EXPECT_EQ(store.stats().bytes, 0u);
  EXPECT_FALSE(store.find(a, 0));
  offer_all(store, b, 0, 5);
  EXPECT_TRUE(reads_back(store, b, 4));
}

TEST(PreparedStore, AnOfferThatTheWriteQueueCannotHoldIsNotAdmittedAndAdmissionGoesOn) {
  TempDir dir;
  PreparedStore::Options o = options(dir.path);
  o.queue_bytes = 40 + 50;  // one record of 50 bytes
  PreparedStore store(o);
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  EXPECT_FALSE(store.offer(ns, 1, {}, bytes_of(1, 51)));
  EXPECT_TRUE(store.stats().admitting);
  EXPECT_TRUE(store.offer(ns, 1, {}, bytes_of(1, 50)));
  store.flush();
  EXPECT_TRUE(store.find(ns, 1));
  EXPECT_FALSE(store.offer(99, 1, {}, bytes_of(1, 5))) << "a namespace never opened";
}

// A write error (here EFBIG from a file size limit, as a full disk's ENOSPC would be) stops
// admission with one log line; what was written is still read.
TEST(PreparedStore, AWriteErrorStopsAdmissionWithOneLogLineAndReadsGoOn) {
  TempDir dir;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{20000, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::vector<std::string> log;
    int failures = 0;
    {
      PreparedStore store(logged(options(dir.path), &log));
      const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
      for (uint32_t item = 0; item < 40; ++item) {
        store.offer(ns, item, {}, bytes_of(item, length_of(item)));
        store.flush();
      }
      const PreparedStore::Stats s = store.stats();
      failures += s.admitting;
      failures += s.stopped.find("File too large") == std::string::npos;
      failures += s.items == 0 || s.items >= 40;
      for (uint32_t item = 0; item < 40; ++item) {
        if (store.find(ns, item)) failures += !reads_back(store, ns, item);
      }
      failures += store.offer(ns, 39, {}, bytes_of(39, 10));
    }
    failures += notable(log).size() != 1;
    ::_exit(failures);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "checks that failed in the child";
  PreparedStore store(options(dir.path));  // what it wrote is whole
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  EXPECT_GT(store.stats().items, 0u);
  EXPECT_EQ(store.stats().corrupt, 0u);
  EXPECT_TRUE(reads_back(store, ns, 0));
}

TEST(PreparedStore, AFolderOnTmpfsIsWarnedOfAndAFolderOnDiskIsNot) {
  struct statfs fs;
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) GTEST_SKIP() << "no tmpfs at /dev/shm";
  {
    TempDir dir("/dev/shm");
    std::vector<std::string> log;
    PreparedStore store(logged(options(dir.path), &log));
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("tmpfs"), std::string::npos) << log[0];
  }
  const std::string here = std::filesystem::current_path();
  if (::statfs(here.c_str(), &fs) != 0 || fs.f_type == TMPFS_MAGIC) return;
  TempDir dir(here.c_str());
  std::vector<std::string> log;
  PreparedStore store(logged(options(dir.path), &log));
  EXPECT_TRUE(log.empty());
}

// Whether files in `dir` can be opened for reads that bypass the page cache.
bool takes_o_direct(const std::string& dir) {
  const std::string probe = dir + "/probe";
  std::ofstream(probe) << "x";
  const int fd = ::open(probe.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  std::filesystem::remove(probe);
  return fd >= 0;
}

TEST(PreparedStore, RecordsOfAnyLengthAtAnyOffsetReadBackWithDirectReadsAndThroughThePageCache) {
  // Direct reads go through an aligned buffer of 1 MiB chunks: lengths around the 4 KiB alignment
  // and around the chunk, records starting at odd offsets, and the last one ending at the file's end.
  const size_t chunk = size_t{1} << 20;
  const std::vector<size_t> lengths = {1, 13, 4056, 4095, 4096, 4097, chunk - 41, chunk - 40, chunk,
                                       chunk + 1, 2 * chunk + 4097, 7};
  std::vector<std::vector<uint8_t>> items;
  for (uint32_t item = 0; item < lengths.size(); ++item) items.push_back(bytes_of(item, lengths[item]));
  std::vector<std::string> parents;
  for (const char* parent : {"/tmp", "/dev/shm"}) {  // a disk (here) and tmpfs
    if (std::filesystem::is_directory(parent)) parents.push_back(parent);
  }
  bool some_direct = false;
  for (const std::string& parent : parents) {
    for (const bool direct_reads : {true, false}) {
      TempDir dir(parent);
      PreparedStore::Options o = options(dir.path);
      o.direct_reads = direct_reads;
      for (int opening = 0; opening < 2; ++opening) {  // read back as written, then by a new store
        PreparedStore store(o);
        const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
        const bool direct = store.stats().direct_reads;
        EXPECT_EQ(direct, direct_reads && takes_o_direct(o.dir)) << parent;
        some_direct |= direct;
        if (opening == 0) {
          for (uint32_t item = 0; item < lengths.size(); ++item) {
            ASSERT_TRUE(store.offer(ns, item, {}, items[item])) << item;
            store.flush();
          }
        }
        for (uint32_t item = 0; item < lengths.size(); ++item) {
          std::vector<uint8_t> out(lengths[item]);
          ASSERT_TRUE(store.read(ns, item, out)) << parent << " direct " << direct << " item " << item;
          ASSERT_TRUE(out == items[item]) << parent << " direct " << direct << " item " << item;
        }
        EXPECT_EQ(store.stats().corrupt, 0u);
        EXPECT_EQ(store.stats().direct_reads, direct) << parent << ": no direct read fell back to the page cache";
      }
    }
  }
  if (!some_direct) GTEST_SKIP() << "no folder here takes O_DIRECT: only reads through the page cache were tried";
}

TEST(PreparedStore, ThreadsOfferingAndReadingAtOnceEachReadTheirOwnItemsBack) {
  TempDir dir;
  PreparedStore::Options o = options(dir.path);
  o.segment_bytes = 100000;
  PreparedStore store(o);
  const PreparedStore::Namespace ns = store.open_namespace("train", "fp", "raw");
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t item = t; item < 400; item += 4) {
        while (!store.offer(ns, item, {}, bytes_of(item, length_of(item)))) std::this_thread::yield();
        if (item >= 40 && store.find(ns, item - 40) && !reads_back(store, ns, item - 40)) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  store.flush();
  EXPECT_EQ(wrong.load(), 0);
  for (uint32_t item = 0; item < 400; ++item) EXPECT_TRUE(reads_back(store, ns, item)) << item;
}

}  // namespace
}  // namespace joader
