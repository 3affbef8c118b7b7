// DatasetStateFile: the daemon's dataset registrations kept across restarts — a JSON list of the
// AddDataset requests (name, source, raw, resize, crop, on_error) with the item count, fingerprint
// and owner's uid each had when saved (absent in lists older daemons saved: then "", 0 and the
// daemon's uid), version 1.
//
// The file is the daemon's alone, wherever it lies (a socket in /tmp puts it there): save() writes
// the whole list to a new file that only it can have made (mkostemp: 0600, O_EXCL) and renames it
// over PATH, so that a crash leaves the old list or the new one, never a torn file, and a planted
// PATH.tmp or symlink is never written through. load() follows no symlink and trusts only a
// regular file of the daemon's uid that no one else may write. It returns the saved requests (none
// when the file does not exist yet), with their protocol version set and relative source paths,
// which daemons saved before relative paths were refused, made absolute against the working
// directory.
#pragma once

#include <sys/types.h>
#include <unistd.h>

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
  uid_t owner = ::getuid();  // who added it (server/ownership.h); absent in older lists: the daemon's uid
};

class DatasetStateFile {
 public:
  explicit DatasetStateFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Throws DatasetStateError naming the file and the reason if the list could not be written (the
  // previous one stays).
  void save(const std::vector<SavedDataset>& datasets) const;
  // Throws DatasetStateError naming the file if it exists but is not a valid list, is a symlink, not
  // a regular file or has other names (hard links), belongs to another uid or may be written by
  // others.
  std::vector<SavedDataset> load() const;
  // Renames a file load() refused to PATH.bad-SECONDS (seconds since the epoch), so that the next
  // save() does not overwrite registrations a person may want back; returns the new name, or ""
  // (with errno) if it cannot be moved.
  std::string set_aside() const;

 private:
  std::string path_;
};

}  // namespace joader
