#include "source/source.h"

#include <lmdb.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "prep/image_prep.h"

namespace joader {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

std::string source_error(const std::string& spec) {
  try {
    open_source(spec);
  } catch (const SourceError& e) {
    return e.what();
  }
  return "no error";
}

Bytes read_item(const Source& source, uint32_t id) {
  Bytes out;
  source.read(id, out);
  return out;
}

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

class SourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "joader_source_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }  // does not follow symlinks

  // Writes `content` to dir_/relative, creating parent directories.
  std::string write(const std::string& relative, const std::string& content = "data") {
    const fs::path path = dir_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }
  void symlink(const std::string& target, const std::string& relative) {
    fs::create_directories((dir_ / relative).parent_path());
    fs::create_symlink(target, dir_ / relative);
  }
  std::string path(const std::string& relative) const { return (dir_ / relative).string(); }

  fs::path dir_;
};

// ---- imagefolder ----

TEST_F(SourceTest, ImageFolderOrderAndLabelsMatchTorchvision) {
  write("train/zebra/z1.jpg");
  symlink("/nonexistent/broken.png", "train/zebra/broken.png");  // os.walk lists it as a file
  symlink("../apple/a.JPG", "train/zebra/link.jpg");
  write("train/apple/b.jpg", "bbbbb");
  write("train/apple/a.JPG");
  write("train/apple/notes.txt");
  write("train/apple/a.jpg.txt");
  write("train/apple/sub/x.png");
  write("train/apple/sub/deeper/y.jpeg");
  write("train/apple/sub dir/s.webp");
  write("train/apple/sub-a/t.bmp");
  write("train/apple/dir.jpg/inner.tif");  // a directory, whatever its name
  symlink("..", "train/apple/sub/loop");   // back to apple: cut, where os.walk repeats until ELOOP
  write("train/Banana/k.ppm");
  write("train/été/é1.jpg");
  write("train/été/e2.jpg");
  write("outside/c.pgm");
  symlink("../outside", "train/cherry");  // a class folder reached through a symlink
  write("train/README.txt");              // a file at the top is not a class

  const std::unique_ptr<Source> source = open_source("imagefolder:" + path("train"));
  EXPECT_EQ(source->classes(),
            (std::vector<std::string>{"Banana", "apple", "cherry", "zebra", "été"}));
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"Banana/k.ppm", 0},
      // Directories by full path: "sub" < "sub dir" < "sub-a" < "sub/deeper", as ' ' < '-' < '/'.
      {"apple/a.JPG", 1},
      {"apple/b.jpg", 1},
      {"apple/dir.jpg/inner.tif", 1},
      {"apple/sub/x.png", 1},
      {"apple/sub dir/s.webp", 1},
      {"apple/sub-a/t.bmp", 1},
      {"apple/sub/deeper/y.jpeg", 1},
      {"cherry/c.pgm", 2},
      {"zebra/broken.png", 3},
      {"zebra/link.jpg", 3},
      {"zebra/z1.jpg", 3},
      {"été/e2.jpg", 4},  // 'e' < 'é' in code point (and UTF-8 byte) order
      {"été/é1.jpg", 4},
  };
  ASSERT_EQ(source->size(), expected.size());
  for (uint32_t id = 0; id < expected.size(); ++id) {
    EXPECT_EQ(source->item(id).path, path("train/" + expected[id].first)) << id;
    EXPECT_EQ(source->item(id).label, expected[id].second) << id;
  }
  EXPECT_EQ(source->item(2).size, 5u);  // apple/b.jpg
  EXPECT_EQ(source->item(9).size, 0u);  // the broken symlink
  EXPECT_EQ(read_item(*source, 2), bytes_of("bbbbb"));
  EXPECT_EQ(source->describe(), "imagefolder:" + path("train") + " (14 items, 5 classes)");
}

TEST_F(SourceTest, FingerprintChangesWithTheItemListNotWithMtimes) {
  write("train/a/1.jpg", "one");
  write("train/b/2.jpg", "two");
  const std::string spec = "imagefolder:" + path("train");
  const std::string before = fingerprint(*open_source(spec));
  EXPECT_EQ(before.size(), 16u);
  EXPECT_EQ(fingerprint(*open_source(spec)), before) << "indexing twice";
  fs::last_write_time(path("train/a/1.jpg"), fs::file_time_type::clock::now() - std::chrono::hours(1));
  EXPECT_EQ(fingerprint(*open_source(spec)), before) << "touch changes nothing a job sees";

  write("train/a/0.jpg", "zero");  // item 0 is now another file
  const std::string added = fingerprint(*open_source(spec));
  EXPECT_NE(added, before);
  fs::remove(path("train/a/0.jpg"));
  EXPECT_EQ(fingerprint(*open_source(spec)), before);
  write("train/b/2.jpg", "two, longer");
  EXPECT_NE(fingerprint(*open_source(spec)), before) << "a resized file";
  write("train/b/2.jpg", "two");
  fs::rename(path("train/b"), path("train/c"));  // same files, another class name
  EXPECT_NE(fingerprint(*open_source(spec)), before);
}

TEST_F(SourceTest, ImageFolderPathsJoinLikeOsPathJoin) {
  write("train/a/x.jpg");
  EXPECT_EQ(open_source("imagefolder:" + path("train") + "/")->item(0).path, path("train/a/x.jpg"));
}

TEST_F(SourceTest, ReadNamesTheItemAndTheReason) {
  symlink("/nonexistent/x.jpg", "train/a/x.jpg");
  const std::unique_ptr<Source> source = open_source("imagefolder:" + path("train"));
  Bytes out;
  try {
    source->read(0, out);
    FAIL() << "read of a broken symlink succeeded";
  } catch (const SourceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "item 0 (" + path("train/a/x.jpg") + "): cannot open: No such file or directory");
  }
  EXPECT_THROW(source->read(1, out), SourceError);
  EXPECT_THROW(source->item(1), SourceError);
}

TEST_F(SourceTest, ImageFolderReportsProgressAboutEveryThousandItems) {
  for (int c = 0; c < 3; ++c) fs::create_directories(path("train/c" + std::to_string(c)));
  for (int i = 0; i < 1000; ++i)
    std::ofstream(path("train/c" + std::to_string(i % 3) + "/" + std::to_string(i) + ".jpg"));
  std::vector<size_t> calls;
  const auto source =
      open_source("imagefolder:" + path("train"), [&](size_t n) { calls.push_back(n); });
  EXPECT_EQ(source->size(), 1000u);
  EXPECT_EQ(calls, std::vector<size_t>{1000});
}

TEST_F(SourceTest, ImageFolderErrorsSayWhatIsWrong) {
  EXPECT_EQ(source_error("imagefolder:" + path("missing")),
            "imagefolder:" + path("missing") + ": cannot open: No such file or directory");
  write("flat/x.jpg");
  EXPECT_EQ(source_error("imagefolder:" + path("flat")),
            "imagefolder:" + path("flat") + ": no class folders");
  write("mixed/full/x.jpg");
  write("mixed/empty/notes.txt");
  EXPECT_EQ(source_error("imagefolder:" + path("mixed")),
            "imagefolder:" + path("mixed") +
                ": found no images with extensions .jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, "
                ".tiff, .webp"
                " in class folders empty");
}

// ---- data root ----

class DataRootTest : public SourceTest {
 protected:
  void SetUp() override {
    SourceTest::SetUp();
    root_ = fs::canonical(dir_).string() + "/root";
    fs::create_directories(root_);
  }
  std::string error(const std::string& spec) {
    try {
      open_source(spec, {}, root_);
    } catch (const SourceError& e) {
      return e.what();
    }
    return "no error";
  }
  std::string root_;
};

TEST_F(DataRootTest, SourcesInsideTheRootAreServed) {
  write("root/train/a/x.jpg", "xx");
  write("root/list.txt", "train/a/x.jpg\t1\n");
  symlink("a", "root/train/b");  // a link that stays inside
  EXPECT_EQ(open_source("imagefolder:" + path("root/train"), {}, root_)->size(), 2u);
  const std::unique_ptr<Source> list = open_source("filelist:" + path("root/list.txt"), {}, root_);
  EXPECT_EQ(read_item(*list, 0), bytes_of("xx"));
}

TEST_F(DataRootTest, RootsAndFilesOutsideAreRefusedNamingWhereTheyLead) {
  write("outside/a/x.jpg");
  const std::string real_outside = fs::canonical(dir_).string() + "/outside";
  EXPECT_EQ(error("imagefolder:" + path("outside")),
            "imagefolder:" + path("outside") + ": " + path("outside") + " resolves to " + real_outside +
                ", outside the daemon's data root " + root_);
  // ../ and symlinked class folders lead out too.
  EXPECT_NE(error("imagefolder:" + path("root/../outside")).find("outside the daemon's data root"), std::string::npos);
  write("root/train/a/y.jpg");
  symlink(path("outside/a"), "root/train/b");
  EXPECT_EQ(error("imagefolder:" + path("root/train")),
            "imagefolder:" + path("root/train") + ": cannot list " + path("root/train/b") + ": resolves to " +
                real_outside + "/a, outside the daemon's data root " + root_ +
                "; torchvision would skip it silently, Joader refuses rather than leave its images out");
  const std::string list = write("root/list.txt", "train/a/y.jpg\t0\n../outside/a/x.jpg\t1\n");
  EXPECT_EQ(error("filelist:" + list), "filelist:" + list + " line 2: " + path("root/../outside/a/x.jpg") +
                                           " resolves to " + real_outside + "/a/x.jpg, outside the daemon's data root " +
                                           root_);
  EXPECT_NE(error("filelist:" + write("outside/list.txt", "a/x.jpg\t0\n")).find("outside the daemon's data root"),
            std::string::npos);
  EXPECT_NE(error("lmdb:" + path("outside")).find("outside the daemon's data root"), std::string::npos);
  EXPECT_EQ(error("synthetic:3"), "no error");
}

TEST_F(DataRootTest, AFileSwappedForASymlinkAfterIndexingCannotEscape) {
  write("root/train/a/x.jpg", "inside");
  write("outside/secret.jpg", "secret");
  const std::unique_ptr<Source> source = open_source("imagefolder:" + path("root/train"), {}, root_);
  fs::remove(path("root/train/a/x.jpg"));
  symlink(path("outside/secret.jpg"), "root/train/a/x.jpg");
  try {
    read_item(*source, 0);
    FAIL() << "read a file outside the data root";
  } catch (const SourceError& e) {
    EXPECT_EQ(std::string(e.what()), "item 0 (" + path("root/train/a/x.jpg") +
                                         "): outside the daemon's data root: Permission denied");
  }
}

// ---- filelist ----

TEST_F(SourceTest, FileListResolvesPathsAgainstItsDirectory) {
  write("data/a.jpg", "aa");
  write("data/sub/b.png", "bbb");
  const std::string absolute = write("elsewhere/c.jpg");
  const std::string list = write(
      "data/list.txt", "# path<TAB>label\na.jpg\t3\n\n   \nsub/b.png\t-1\r\n" + absolute + "\t7");
  const std::unique_ptr<Source> source = open_source("filelist:" + list);
  ASSERT_EQ(source->size(), 3u);
  EXPECT_EQ(source->item(0).path, path("data/a.jpg"));
  EXPECT_EQ(source->item(1).path, path("data/sub/b.png"));
  EXPECT_EQ(source->item(2).path, absolute);
  EXPECT_EQ(source->item(0).label, 3);
  EXPECT_EQ(source->item(1).label, -1);
  EXPECT_EQ(source->item(2).label, 7);
  EXPECT_EQ(source->item(1).size, 3u);
  EXPECT_TRUE(source->classes().empty());
  EXPECT_EQ(read_item(*source, 1), bytes_of("bbb"));
  EXPECT_EQ(source->describe(), "filelist:" + list + " (3 items)");
}

TEST_F(SourceTest, FileListErrorsNameTheLine) {
  write("a.jpg");
  const std::string no_tab = write("no_tab.txt", "a.jpg\t1\n# ok\na.jpg 2\n");
  EXPECT_EQ(source_error("filelist:" + no_tab),
            "filelist:" + no_tab + " line 3: expected 'path<TAB>label'");
  const std::string bad_label = write("bad_label.txt", "a.jpg\tcat\n");
  EXPECT_EQ(source_error("filelist:" + bad_label),
            "filelist:" + bad_label +
                " line 1: expected 'path<TAB>label', and label 'cat' is not an integer");
  const std::string missing = write("missing.txt", "a.jpg\t1\nmissing.jpg\t2\n");
  EXPECT_EQ(
      source_error("filelist:" + missing),
      "filelist:" + missing + " line 2: " + path("missing.jpg") + ": No such file or directory");
  EXPECT_EQ(source_error("filelist:" + path("nope.txt")),
            "filelist:" + path("nope.txt") + ": cannot open: No such file or directory");
  const std::string empty = write("empty.txt", "# nothing\n");
  EXPECT_EQ(source_error("filelist:" + empty), "filelist:" + empty + ": no items");
}

// ---- lmdb ----

// Writes records (key, label, payload) into a new LMDB environment at path.
void write_lmdb(const std::string& path, unsigned flags,
                const std::vector<std::tuple<std::string, int64_t, std::string>>& records) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 1 << 20), 0);
  ASSERT_EQ(mdb_env_open(env, path.c_str(), flags, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  for (const auto& [key, label, payload] : records) {
    std::string value(8, '\0');
    for (int i = 0; i < 8; ++i)
      value[i] = static_cast<char>(static_cast<uint64_t>(label) >> (8 * i));
    value += payload;
    MDB_val k{key.size(), const_cast<char*>(key.data())}, v{value.size(), value.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST_F(SourceTest, LmdbItemsAreRecordsInKeyOrder) {
  fs::create_directories(path("db"));
  write_lmdb(path("db"), 0, {{"b", 7, "BBB"}, {"a", -2, "AAAA"}, {std::string("c\x01", 2), 0, ""}});
  const std::unique_ptr<Source> source = open_source("lmdb:" + path("db"));
  ASSERT_EQ(source->size(), 3u);
  EXPECT_EQ(source->item(0).path, "lmdb:a");
  EXPECT_EQ(source->item(1).path, "lmdb:b");
  EXPECT_EQ(source->item(2).path, "lmdb:c\\x01");
  EXPECT_EQ(source->item(0).label, -2);
  EXPECT_EQ(source->item(1).label, 7);
  EXPECT_EQ(source->item(0).size, 4u);
  EXPECT_EQ(source->item(2).size, 0u);
  EXPECT_EQ(read_item(*source, 0), bytes_of("AAAA"));
  EXPECT_EQ(read_item(*source, 2), Bytes{});
  EXPECT_EQ(source->describe(), "lmdb:" + path("db") + " (3 items)");
}

TEST_F(SourceTest, LmdbOpensASingleFileEnvironment) {
  write_lmdb(path("single.mdb"), MDB_NOSUBDIR, {{"k", 1, "payload"}});
  const std::unique_ptr<Source> source = open_source("lmdb:" + path("single.mdb"));
  ASSERT_EQ(source->size(), 1u);
  EXPECT_EQ(read_item(*source, 0), bytes_of("payload"));
}

TEST_F(SourceTest, LmdbReadsFromManyThreads) {
  fs::create_directories(path("db"));
  std::vector<std::tuple<std::string, int64_t, std::string>> records;
  for (int i = 0; i < 50; ++i)
    records.emplace_back("key" + std::to_string(100 + i), i, std::string(i, 'x'));
  write_lmdb(path("db"), 0, records);
  const std::unique_ptr<Source> source = open_source("lmdb:" + path("db"));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Bytes out;
      for (int round = 0; round < 20; ++round)
        for (uint32_t id = 0; id < 50; ++id) {
          source->read(id, out);
          mismatches[t] += out.size() != id;
        }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// The daemon may run as root for users: opening a dataset must create and write nothing, and a
// symlink must not lead it to a file outside its data root.
std::string contents(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(SourceTest, LmdbIsReadWithoutWritingThroughAPlantedLockFile) {
  fs::create_directories(path("db"));
  write_lmdb(path("db"), 0, {{"k", 1, "payload"}});
  const std::string victim = write("victim", "a file of someone else's");
  fs::remove(path("db/lock.mdb"));
  fs::create_symlink(victim, path("db/lock.mdb"));
  const std::unique_ptr<Source> source = open_source("lmdb:" + path("db"));
  EXPECT_EQ(read_item(*source, 0), bytes_of("payload"));
  EXPECT_EQ(contents(victim), "a file of someone else's") << "LMDB's lock was written through the link";
}

TEST_F(SourceTest, LmdbCreatesNoLockFileBesideADataFileOrInItsFolder) {
  write_lmdb(path("single.mdb"), MDB_NOSUBDIR, {{"k", 1, "payload"}});
  fs::remove(path("single.mdb-lock"));
  fs::create_directories(path("db"));
  write_lmdb(path("db"), 0, {{"k", 1, "payload"}});
  fs::remove(path("db/lock.mdb"));
  for (const std::string& spec : {"lmdb:" + path("single.mdb"), "lmdb:" + path("db"), "lmdb:" + path("db/data.mdb")}) {
    EXPECT_EQ(read_item(*open_source(spec), 0), bytes_of("payload")) << spec;
  }
  EXPECT_FALSE(fs::exists(path("single.mdb-lock")));
  EXPECT_FALSE(fs::exists(path("db/lock.mdb")));
  EXPECT_FALSE(fs::exists(path("db/data.mdb-lock")));
}

TEST_F(SourceTest, LmdbDataFileLinkedOutOfTheDataRootIsRefused) {
  fs::create_directories(path("secret"));
  write_lmdb(path("secret"), 0, {{"k", 1, "SECRET"}});
  fs::create_directories(path("root/db"));
  fs::create_symlink(path("secret/data.mdb"), path("root/db/data.mdb"));
  const std::string root = fs::canonical(path("root")).string();
  for (const std::string& spec : {"lmdb:" + path("root/db"), "lmdb:" + path("root/db/data.mdb")}) {
    try {
      open_source(spec, {}, root);
      ADD_FAILURE() << spec << " was opened";
    } catch (const SourceError& e) {
      EXPECT_NE(std::string(e.what()).find("outside the daemon's data root"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SourceTest, LmdbErrorsSayWhatIsWrong) {
  EXPECT_EQ(source_error("lmdb:" + path("missing")),
            "lmdb:" + path("missing") + ": cannot open: No such file or directory");
  fs::create_directories(path("short"));
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_open(env, path("short").c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  MDB_val k{1, const_cast<char*>("x")}, v{3, const_cast<char*>("abc")};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  EXPECT_EQ(source_error("lmdb:" + path("short")),
            "lmdb:" + path("short") + ": record x is shorter than its 8-byte label");
}

// ---- synthetic ----

TEST(SyntheticSource, ItemsAreDeterministicJpegsWithLabelsIdModTen) {
  const std::unique_ptr<Source> source = open_source("synthetic:25:64x48");
  ASSERT_EQ(source->size(), 25u);
  EXPECT_EQ(source->classes().size(), 10u);
  EXPECT_EQ(source->classes()[3], "class3");
  EXPECT_EQ(source->item(13).label, 3);
  EXPECT_EQ(source->item(13).path, "synthetic:13");
  EXPECT_EQ(source->describe(), "synthetic:25:64x48 (25 items, 10 classes)");
  const Bytes jpeg = read_item(*source, 5);
  EXPECT_EQ(jpeg, synthetic_jpeg(5, 64, 48));
  EXPECT_EQ(jpeg, read_item(*source, 5));
  EXPECT_NE(jpeg, synthetic_jpeg(6, 64, 48));
  const Image img = decode_image(jpeg, PrepSpec().max_pixels);
  EXPECT_EQ(img.width, 64u);
  EXPECT_EQ(img.height, 48u);
  Bytes out;
  EXPECT_THROW(source->read(25, out), SourceError);
}

TEST(SyntheticSource, DefaultsTo256SquareImagesOfPhotoLikeSize) {
  const std::unique_ptr<Source> source = open_source("synthetic:2");
  const Bytes jpeg = read_item(*source, 1);
  const Image img = decode_image(jpeg, PrepSpec().max_pixels);
  EXPECT_EQ(img.width, 256u);
  EXPECT_EQ(img.height, 256u);
  // A 256x256 photo at quality 90 takes a few tens of kB; flat content would take a few.
  EXPECT_GT(jpeg.size(), 15000u);
  EXPECT_LT(jpeg.size(), 80000u);
}

TEST(SyntheticSource, RejectsBadSpecs) {
  for (const std::string spec :
       {"synthetic:", "synthetic:0", "synthetic:abc", "synthetic:-1", "synthetic:10:64",
        "synthetic:10:0x5", "synthetic:10:64x48x2", "synthetic:10:70000x5", "synthetic:10:8193x8", "synthetic:1048577",
        "synthetic:4000000000"})
    EXPECT_EQ(source_error(spec),
              "bad synthetic spec '" + spec +
                  "': expected synthetic:COUNT[:WxH], COUNT in 1..1048576, W and H in 1..8192");
}

TEST(OpenSource, RejectsUnknownKinds) {
  EXPECT_EQ(
      source_error("nfs:/x"),
      "unknown source kind 'nfs' in 'nfs:/x' (expected imagefolder, filelist, lmdb, tar or synthetic)");
  EXPECT_EQ(
      source_error("/data/train"),
      "source '/data/train' is not KIND:ARG, with KIND imagefolder, filelist, lmdb, tar or synthetic");
}

}  // namespace
}  // namespace joader
