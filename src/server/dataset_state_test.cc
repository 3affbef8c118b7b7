// The saved dataset list alone: what is saved is what is loaded, a missing file is no datasets,
// a damaged one is an error naming it, and a save never leaves a torn file.
#include "server/dataset_state.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/protocol.h"

namespace joader {
namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/joader-state-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

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
  const std::vector<SavedDataset> saved = {request("train", "imagefolder:/data/train", 0, true),
                                                    request("val", "imagefolder:/data/val", 224, false)};
  ASSERT_TRUE(file.save(saved));
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
  }
  EXPECT_FALSE(std::filesystem::exists(file.path() + ".tmp")) << "the temporary file is renamed over the list";
  ASSERT_TRUE(file.save({saved[1]}));
  EXPECT_EQ(file.load().size(), 1u);
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

TEST(DatasetStateFile, ASaveThatCannotBeWrittenLeavesThePreviousList) {
  TempDir dir;
  const DatasetStateFile file(dir.path + "/datasets.json");
  ASSERT_TRUE(file.save({request("kept", "synthetic:10", 8, false)}));
  std::filesystem::create_directory(file.path() + ".tmp");  // the temporary file cannot be opened
  EXPECT_FALSE(file.save({}));
  ASSERT_EQ(file.load().size(), 1u);
  EXPECT_EQ(file.load()[0].spec.name(), "kept");
}

}  // namespace
}  // namespace joader
