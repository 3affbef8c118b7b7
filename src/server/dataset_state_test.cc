// The saved dataset list alone: what is saved is what is loaded, a missing file is no datasets,
// a damaged one is an error naming it, a save never leaves a torn file, and the file is the
// daemon's alone: 0600, never read or written through a planted link, never trusted from another
// uid or when others may write it.
#include "server/dataset_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/protocol.h"
#include "testing/temp_dir.h"

namespace joader {
namespace {

using test_support::TempDir;

SavedDataset request(const std::string& name, const std::string& source, uint32_t crop, bool skip) {
  SavedDataset saved{{}, "00112233445566" + std::to_string(crop % 100), crop + 7u};
  v1::AddDatasetRequest& r = saved.spec;
  r.set_name(name);
  r.set_source(source);
  r.set_crop(crop);
  r.set_resize(crop == 0 ? 0 : crop + 32);
  r.set_on_error(skip ? "skip" : "fail");
  return saved;
}

TEST(DatasetStateFile, LoadsWhatWasSavedWithTheProtocolVersionSetAndEachItemListsFingerprint) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  EXPECT_TRUE(file.load().empty()) << "nothing saved yet";
  std::vector<SavedDataset> saved = {request("train", "imagefolder:/data/train", 0, true),
                                                    request("val", "imagefolder:/data/val", 224, false)};
  saved[1].owner = 4242;
  file.save(saved);
  const std::vector<SavedDataset> loaded = file.load();
  ASSERT_EQ(loaded.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded[i].spec.name(), saved[i].spec.name());
    EXPECT_EQ(loaded[i].spec.source(), saved[i].spec.source());
    EXPECT_EQ(loaded[i].spec.crop(), saved[i].spec.crop());
    EXPECT_EQ(loaded[i].spec.resize(), saved[i].spec.resize());
    EXPECT_EQ(loaded[i].spec.on_error(), saved[i].spec.on_error());
    EXPECT_EQ(loaded[i].spec.protocol_version(), kProtocolVersion);
    EXPECT_EQ(loaded[i].fingerprint, saved[i].fingerprint);
    EXPECT_EQ(loaded[i].items, saved[i].items);
    EXPECT_EQ(loaded[i].owner, saved[i].owner);
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 1)
      << "the temporary file is renamed over the list";
  file.save({saved[1]});
  EXPECT_EQ(file.load().size(), 1u);
}

TEST(DatasetStateFile, IsWrittenWithMode0600WhateverTheUmask) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  const mode_t old = umask(0);
  file.save({request("train", "synthetic:10", 8, false)});
  umask(old);
  struct stat st{};
  ASSERT_EQ(stat(file.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(DatasetStateFile, APlantedSymlinkIsNeitherReadNorWrittenThrough) {
  TempDir dir;
  const std::string victim = dir.path + "/victim", path = dir.path + "/datasets.json";
  std::ofstream(victim) << R"({"version": 1, "datasets": []})";
  for (const std::string& link : {path, path + ".tmp"}) {
    std::filesystem::remove(path);
    std::filesystem::create_symlink(victim, link);
    if (link == path) {
      EXPECT_THROW(DatasetStateFile(path).load(), DatasetStateError) << "a symlink is not followed";
    }
    DatasetStateFile(path).save({request("train", "synthetic:10", 8, false)});
    std::ifstream in(victim);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), R"({"version": 1, "datasets": []})")
        << "nothing written through " << link;
    EXPECT_FALSE(std::filesystem::is_symlink(path)) << "the link is replaced by the daemon's own file";
    EXPECT_EQ(DatasetStateFile(path).load().size(), 1u);
    std::filesystem::remove(link);
  }
}

TEST(DatasetStateFile, AListOthersMayWriteOrOfAnotherUidIsNotTrusted) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  file.save({request("train", "synthetic:10", 8, false)});
  chmod(file.path().c_str(), 0666);
  EXPECT_THROW(file.load(), DatasetStateError);
  chmod(file.path().c_str(), 0600);
  EXPECT_EQ(file.load().size(), 1u);
  if (geteuid() != 0) GTEST_SKIP() << "giving the file to another uid needs root";
  ASSERT_EQ(chown(file.path().c_str(), 65534, 65534), 0);
  try {
    file.load();
    ADD_FAILURE() << "a list of uid 65534 was trusted";
  } catch (const DatasetStateError& e) {
    EXPECT_NE(std::string(e.what()).find("uid 65534"), std::string::npos) << e.what();
  }
}

TEST(DatasetStateFile, AListWithAnotherNameIsNotTrusted) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  file.save({request("train", "synthetic:10", 8, false)});
  ASSERT_EQ(link(file.path().c_str(), (dir.path + "/elsewhere").c_str()), 0);
  EXPECT_THROW(file.load(), DatasetStateError) << "a hard link another user made could be rewritten under it";
}

TEST(DatasetStateFile, ADamagedListIsNamedWithoutQuotingItsBytes) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  std::ofstream(file.path()) << "{\"version\": 1, \"datasets\": [SECRET-TOKEN";
  try {
    file.load();
    ADD_FAILURE() << "accepted";
  } catch (const DatasetStateError& e) {
    EXPECT_EQ(std::string(e.what()).find("SECRET"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
  }
}

TEST(DatasetStateFile, AListSetAsideIsKeptUnderANewNameAndThePathIsFree) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  std::ofstream(file.path()) << "{cut sho";
  EXPECT_THROW(file.load(), DatasetStateError);
  const std::string kept = file.set_aside();
  ASSERT_NE(kept, "");
  EXPECT_EQ(kept.rfind(file.path() + ".bad-", 0), 0u) << kept;
  std::ifstream in(kept);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{cut sho");
  EXPECT_TRUE(file.load().empty());
}

TEST(DatasetStateFile, ListsOfOlderDaemonsLoadWithRelativeSourcesMadeAbsoluteAndNoFingerprint) {
  TempDir dir;
  const std::string path = dir.path + "/datasets.json";
  std::ofstream(path) << R"({"version": 1, "datasets": [{"name": "old", "source": "imagefolder:data/train",
    "raw": false, "resize": 0, "crop": 0, "on_error": "fail"}]})";
  const std::vector<SavedDataset> loaded = DatasetStateFile(path).load();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].spec.source(), "imagefolder:" + std::filesystem::current_path().string() + "/data/train");
  EXPECT_EQ(loaded[0].fingerprint, "") << "unknown: a restart does not compare";
}

TEST(DatasetStateFile, ADamagedListIsAnErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.path + "/datasets.json";
  for (const char* text : {"{not json", R"({"version": 1})", R"({"datasets": [{"name": "x"}]})"}) {
    std::ofstream(path, std::ios::trunc) << text;
    try {
      DatasetStateFile(path).load();
      ADD_FAILURE() << "accepted " << text;
    } catch (const DatasetStateError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(DatasetStateFile, ASaveThatCannotBeWrittenIsAnErrorNamingTheFileAndLeavesThePreviousList) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  file.save({request("kept", "synthetic:10", 8, false)});
  // The new list cannot replace the old one: the path is now a folder that is not empty.
  const std::string moved = dir.path + "/old.json";
  std::filesystem::rename(file.path(), moved);
  std::filesystem::create_directories(file.path() + "/x");
  try {
    file.save({});
    ADD_FAILURE() << "a save that could not rename reported nothing";
  } catch (const DatasetStateError& e) {
    EXPECT_NE(std::string(e.what()).find(file.path()), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 2) << "no temporary file is left";
  EXPECT_EQ(DatasetStateFile(moved).load()[0].spec.name(), "kept");
}

}  // namespace
}  // namespace joader
