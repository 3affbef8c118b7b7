// DatasetStateFile: the daemon's dataset registrations kept across restarts — a JSON list of the
// AddDataset requests (name, source, raw, resize, crop, on_error) with the item count and
// fingerprint each had when saved (absent in lists older daemons saved: then "" and 0), version 1.
//
// save() writes the whole list to PATH.tmp and renames it over PATH, so that a crash leaves the old
// list or the new one, never a torn file. load() returns the saved requests (none when the file
// does not exist yet), with their protocol version set and relative source paths, which daemons
// saved before relative paths were refused, made absolute against the working directory.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "joader.pb.h"

namespace joader {

class DatasetStateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SavedDataset {
  v1::AddDatasetRequest spec;
  std::string fingerprint;  // of its item list when saved (source.h, fingerprint()); "" if unknown
  uint64_t items = 0;
};

class DatasetStateFile {
 public:
  explicit DatasetStateFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // False if the list could not be written (the previous one stays).
  bool save(const std::vector<SavedDataset>& datasets) const;
  // Throws DatasetStateError naming the file if it exists but is not a valid list.
  std::vector<SavedDataset> load() const;

 private:
  std::string path_;
};

}  // namespace joader
