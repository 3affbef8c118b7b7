// PreparedStore: prepared items on local disk, kept across daemon runs (the disk tier of issue 40).
//
// What the arena holds for an item (its bytes decoded, resized or cropped as its dataset says) is
// written to a folder after the item's first load; a later load of that item — in this run, after
// a restart, or in tomorrow's run of a sweep — reads it back instead of reading and decoding the
// file again. Items are keyed by a namespace per (dataset, fingerprint, prep description) and the
// item id, so that a changed file list or a changed prep never serves stale bytes (the caller
// makes the fingerprint cover whatever must invalidate the items).
//
// Layout of DIR:
//   LOCK                    flock()ed by the one process that serves DIR (its pid written in it)
//   <namespace>/meta        the dataset's name, fingerprint and prep, one per line (for people and
//                           for dropping a dataset's old namespace when its files or prep change)
//   <namespace>/seg-NNNNNN  segments of at most kSegmentBytes: records, each a RecordHeader (item,
//                           shape, length, checksums) and the item's bytes
//   trash-*                 a dropped namespace's folder, being deleted (removed at opening if left)
// <namespace> is 16 hex digits (namespace_of()). Few large files, appended to, never rewritten; one
// descriptor kept open per segment (two where reads bypass the page cache).
//
// Trust: DIR must be a real folder (not a link) of this process's uid that no one else may write,
// so that nobody can plant or swap what is in it; a namespace folder or segment in it that is not
// this uid's own plain folder or file (left from before DIR was made private) is left alone, unread.
//
// Reading: with O_DIRECT where DIR's file system takes it (one read per record, header and bytes
// together, through an aligned buffer of the reading thread), else through the page cache. A
// direct read that fails or does not check is tried through the page cache before the record is
// called corrupt; if that one is good, direct reads are turned off (one log line).
//
// Integrity: every record carries an XXH3 checksum of its header and of its bytes. Opening scans
// every segment; the first record that is torn (a process killed mid-write) or corrupt ends that
// segment's index and the segment is cut there. A record found corrupt when read back (a bad
// sector, a file changed under us) is forgotten and read() says so: the caller decodes the item
// again. Nothing is trusted that was not checked.
//
// Admission: every item offered while fewer than `capacity` bytes are stored (epochs touch every
// item uniformly, so a fixed set is as good as any policy). Nothing is evicted but whole
// namespaces: a dataset's when it is removed or changes, and, when the store is full, those that
// no open_namespace() of this process asked for (datasets of earlier runs not registered now),
// least recently opened first. Writes run on a background thread from a queue of copied bytes
// bounded by queue_bytes: offering an item never waits for the disk (an item offered while the
// queue is full, or larger than the queue, is not kept). A write error (a full disk, EIO) stops
// admission for good, with one log line; reads go on.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace joader {

// DIR cannot be used: not creatable or not a directory, or held by another process (the message
// names it and its pid).
class PreparedStoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PreparedStore {
 public:
  static constexpr uint64_t kSegmentBytes = uint64_t{1} << 30;

  struct Options {
    std::string dir;
    // Bytes of records at most; 0: half of what DIR holds at opening plus its filesystem's free
    // space (so that restarts do not ratchet it up).
    uint64_t capacity = 0;
    uint64_t queue_bytes = uint64_t{64} << 20;   // bytes of records waiting to be written, at most
    uint64_t segment_bytes = kSegmentBytes;      // a segment file's size at most (tests make it small)
    bool direct_reads = true;  // read with O_DIRECT where DIR's file system takes it (tests turn it off)
    // One line per notable event (may be empty). Called with the store's lock held: it must not
    // call into the store, nor take a lock that is held while calling the store.
    std::function<void(const std::string&)> log;
  };

  // Opens (creating it if needed) and indexes DIR, taking its lock; logs a warning when DIR is on
  // tmpfs (it is memory, not disk). Throws PreparedStoreError.
  explicit PreparedStore(Options options);
  ~PreparedStore();  // writes what is queued, then releases DIR
  PreparedStore(const PreparedStore&) = delete;
  PreparedStore& operator=(const PreparedStore&) = delete;

  using Namespace = uint64_t;
  // The namespace of a dataset's prepared items: a 64-bit hash of its name, its fingerprint and its
  // prep's description (PrepSpec::describe()). The name is part of it so that removing one dataset
  // never takes the items of another registered with the same files and prep.
  static Namespace namespace_of(const std::string& dataset, const std::string& fingerprint, const std::string& prep);
  // Makes the namespace of `dataset` as now indexed ready for records, and drops every other
  // namespace whose meta names `dataset` (its files or prep changed since). Returns it.
  Namespace open_namespace(const std::string& dataset, const std::string& fingerprint, const std::string& prep);
  // Forgets and deletes a namespace's records (its dataset was removed). Never waits for the writer:
  // a record being written to it is discarded.
  void drop_namespace(Namespace ns);
  // Forgets one item's record (the caller found it unfit), so that it may be offered again.
  void forget(Namespace ns, uint32_t item);

  struct Shape {
    uint32_t width = 0, height = 0;  // as the arena records the item (0 × 0 for raw bytes)
    bool operator==(const Shape&) const = default;
  };
  struct Entry {
    uint64_t length = 0;
    Shape shape;
  };
  // The item's record, if one is stored (its bytes are checked when read); counts a miss if not.
  std::optional<Entry> find(Namespace ns, uint32_t item) const;
  // Whether a record of the item is stored (a write still queued is not), counting nothing. Never
  // waits: false while another thread holds the store's lock, which may be across file-system
  // calls (a segment created, a namespace dropped), since its caller may hold a lock of its own
  // (the engine's, for the cache's eviction order: a wrong "no" only keeps an item longer).
  bool holds(Namespace ns, uint32_t item) const;
  // Reads the item's bytes into `out`, which must be exactly its length. False when it is not
  // stored, or its record turned out short or corrupt (then it is forgotten: the caller prepares
  // the item again, and may offer it again).
  bool read(Namespace ns, uint32_t item, std::span<uint8_t> out);
  // Offers the item's bytes for writing (copied before returning). False, and nothing queued, when
  // it is stored or queued already, the namespace is unknown, admission has stopped, the store is
  // full, or the write queue is.
  bool offer(Namespace ns, uint32_t item, Shape shape, std::span<const uint8_t> bytes);
  // Waits until every offered item is written (or failed).
  void flush();

  struct Stats {
    uint64_t capacity = 0;       // as given, or as chosen at opening
    uint64_t bytes = 0;          // of records indexed (headers included)
    uint64_t items = 0;
    uint64_t hits = 0;           // reads that returned the bytes
    uint64_t misses = 0;         // lookups (find, read) of items not stored
    uint64_t corrupt = 0;        // records dropped as short or corrupt (at open and on reads)
    uint64_t written = 0;        // records written by this process
    uint64_t queued_bytes = 0;   // of records waiting to be written (headers included)
    bool admitting = true;
    std::string stopped;         // why admission stopped, if it did
    // Reads bypass the page cache (O_DIRECT): false where DIR's file system refused it at opening,
    // or once a direct read failed where a read through the page cache did not.
    bool direct_reads = false;
  };
  Stats stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace joader
