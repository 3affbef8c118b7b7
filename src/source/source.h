// Source: a dataset's items 0..N-1 — where each one's bytes live, its label and the class names —
// fixed when the source is opened. Item ids mean the same thing as in the user's PyTorch pipeline:
// for imagefolder, id i is torchvision.datasets.ImageFolder(root).samples[i].
//
// Kinds (open_source spec "KIND:ARG"):
//   imagefolder:DIR   torchvision's ImageFolder layout and order (see open_source).
//   filelist:FILE     one "path<TAB>label" per line; '#' lines and blank lines ignored; relative
//                     paths are relative to FILE's directory. No class names.
//   lmdb:PATH         an LMDB environment (a directory holding data.mdb, or the data file itself),
//                     read-only. Items are the records of the unnamed database in key order; each
//                     value is an 8-byte little-endian int64 label followed by the encoded image.
//                     Records are indexed once, at open: the environment should not change
//                     while it is open.
//   tar:GLOB          WebDataset shards (the files GLOB matches, sorted): each sample with a .jpg,
//                     .jpeg or .png member, in shard order, labelled by its .cls member (-1 without);
//                     indexed once with libarchive into (shard, offset, size), read by offset.
//                     Damaged headers, truncated members and compressed shards are errors naming
//                     the shard and the member.
//   synthetic:N[:WxH] N (at most 2^20) generated JPEGs, W and H at most 8192 (default 256x256, quality 90), label id % 10, classes
//                     "class0".."class9"; image id is synthetic_jpeg(id, W, H), made on each read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace joader {

struct ItemMeta {
  // A file path, "lmdb:<key>" (bytes other than printable ASCII as \xNN) or "synthetic:<id>".
  std::string path;
  int64_t label = 0;
  uint64_t size = 0;  // stored bytes when indexed; 0 if unknown (synthetic) or unreadable
  // When the file holding it (the image, the tar shard, the LMDB data file) was last modified, as
  // indexed, in nanoseconds since the epoch; 0 if unknown (synthetic) or unreadable.
  int64_t modified_ns = 0;
};

// A source that cannot be opened or an item that cannot be read. The message is one line meant for
// the user, naming the source, or the item when names_item() (then it starts "item N (path): ",
// and callers add nothing).
class SourceError : public std::runtime_error {
 public:
  enum Subject { kSource, kItem };
  explicit SourceError(const std::string& message, Subject subject = kSource)
      : std::runtime_error(message), subject_(subject) {}
  bool names_item() const { return subject_ == kItem; }

 private:
  Subject subject_;
};

class Source {
 public:
  virtual ~Source() = default;

  virtual size_t size() const = 0;
  // Throws SourceError when id >= size().
  virtual const ItemMeta& item(uint32_t id) const = 0;
  // Replaces out with the item's stored bytes. Thread-safe: each call opens its own file descriptor
  // or LMDB read transaction. Throws SourceError naming the id and path, e.g.
  // "item 17 (/data/a/x.jpg): cannot open: Permission denied".
  virtual void read(uint32_t id, std::vector<uint8_t>& out) const = 0;
  // At least the first `n` bytes of the item (all of it if shorter); errors as read(). For reading
  // image headers when a dataset is added. Default: read().
  virtual void read_prefix(uint32_t id, size_t n, std::vector<uint8_t>& out) const {
    (void)n;
    read(id, out);
  }
  // The item's image size when the source knows it without reading (synthetic), else {0, 0}.
  virtual std::pair<uint32_t, uint32_t> known_image_size(uint32_t id) const {
    (void)id;
    return {0, 0};
  }
  // Class names, index = label; empty when the source has none.
  virtual const std::vector<std::string>& classes() const = 0;
  // E.g. "imagefolder:/data/train (1000 items, 10 classes)".
  virtual std::string describe() const = 0;
};

// The identity of a source's item list, as 16 hex digits: a 64-bit FNV-1a hash of, for every item in
// order, its path (as item() gives it), label and stored size, then the class names. Two indexings
// of an unchanged folder agree; a file added, removed, renamed, relabelled or resized changes it.
// Contents and mtimes are not read: a file rewritten in place with the same size keeps it (so
// does `touch`). Datasets show it (status, DatasetInfo.fingerprint); Python's state_dict() keeps it.
std::string fingerprint(const Source& source);

// The fingerprint and every item's modification time, as 16 hex digits: what a copy of the items'
// prepared bytes that outlives the daemon (the disk tier) is keyed by, so that a file rewritten in
// place, even at the same size, is prepared again. (A file rewritten with its old mtime restored
// is not noticed; nothing short of reading every file would.)
std::string content_fingerprint(const Source& source);

// Opens and indexes a source; progress(n) is called about every 1000 items indexed (may be empty).
//
// imagefolder:DIR gives torchvision's ImageFolder(DIR).samples exactly: the classes are the sorted
// names of DIR's entries that are directories (following symlinks, hidden ones included), label =
// index; for each class in order, the directories of sorted(os.walk(DIR/class, followlinks=True))
// — ordered by their full path string, not depth-first — and in each, its non-directory entries
// (broken symlinks included) sorted by name whose lowercased name ends with one of .jpg .jpeg .png
// .ppm .bmp .pgm .tif .tiff .webp. Paths are DIR/class/..., joined as os.path.join does. Names sort
// by bytes, which is Python's code point order for UTF-8. (Checked, on such trees, against
// torchvision's find_classes and make_dataset code run in Python.) One deliberate difference: a
// directory reached again below itself through a symlink (a loop) is skipped, where os.walk
// descends until the kernel refuses to resolve the path (ELOOP) and lists the same files at every
// level.
//
// Throws SourceError with a one-line message: an unknown kind, a missing or unreadable root, an
// imagefolder without class folders or with a class without images (torchvision refuses both),
// a malformed filelist line ("filelist:/f line 3: expected 'path<TAB>label'"), a missing file in a
// filelist, an unreadable LMDB or a record shorter than its label, a bad synthetic spec (more than
// 2^20 items), a directory inside an imagefolder that cannot be listed (os.walk would skip it
// silently and its images would be missing from the epoch).
//
// data_root, if not empty, is a resolved absolute directory (realpath) that every file must lie in
// after following symlinks: the root, file list, LMDB path and each listed file are checked when
// indexing, every directory of an imagefolder as it is walked, and each file again on its open
// descriptor when read (so that a symlink swapped afterwards cannot escape). Synthetic sources
// read no file.
std::unique_ptr<Source> open_source(const std::string& spec, const std::function<void(size_t)>& progress = {},
                                    const std::string& data_root = "");

// The synthetic source's image for id: a deterministic function of (id, width, height) — smooth
// gradients, a few shapes and fine noise, so that JPEG sizes and decode costs are realistic —
// encoded with encode_jpeg at quality 90.
std::vector<uint8_t> synthetic_jpeg(uint32_t id, uint32_t width, uint32_t height);

}  // namespace joader
