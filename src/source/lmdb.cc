#include "source/source_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <map>
#include <array>
#include <cerrno>
#include <cstdint>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <utility>

namespace joader::source_detail {
namespace {

// Keys as readable text: printable ASCII as is, other bytes and '\' as \xNN.
std::string printable_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out += escaped;
    }
  }
  return out;
}

constexpr size_t kLabelBytes = 8;

struct EnvClose {
  void operator()(MDB_env* env) const { mdb_env_close(env); }
};
struct TxnAbort {
  void operator()(MDB_txn* txn) const { mdb_txn_abort(txn); }
};
struct CursorClose {
  void operator()(MDB_cursor* cursor) const { mdb_cursor_close(cursor); }
};
using UniqueTxn = std::unique_ptr<MDB_txn, TxnAbort>;

class LmdbSource : public IndexedSource {
 public:
  // `path` is the LMDB folder (holding data.mdb) or the data file itself. The daemon only reads:
  // the data file is opened read-only after every symlink is resolved (and checked against the
  // data root), without LMDB's lock file (MDB_NOLOCK), so that nothing is ever created or written
  // — a daemon running as root must not truncate a lock.mdb a user symlinked to a file of root's.
  // Without the lock, a writer changing the LMDB while it is served is not seen consistently: a
  // dataset is read-only while it is served, as for Python loaders' lmdb.open(readonly=True,
  // lock=False).
  LmdbSource(const std::string& spec, const std::string& path, const std::function<void(size_t)>& progress,
             const std::string& data_root)
      : IndexedSource(spec) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      throw SourceError(spec + ": cannot open: " + errno_text(errno));
    const std::string data = S_ISDIR(st.st_mode) ? path + "/data.mdb" : path;
    const std::string real = resolved_path(data);
    if (real.empty()) {
      throw SourceError(spec + ": " + data + ": " + errno_text(errno) +
                        (S_ISDIR(st.st_mode) ? " (an LMDB directory holds data.mdb; or name the data file itself)" : ""));
    }
    check_confined(spec, real, data_root);
    // A FIFO or a device would block or mislead LMDB's open: only a regular file is a data file.
    struct stat data_st{};
    if (::stat(real.c_str(), &data_st) != 0 || !S_ISREG(data_st.st_mode))
      throw SourceError(spec + ": " + data + " is not a regular file");
    data_modified_ns_ = modified_ns(data_st);
    // MDB_NOTLS: read transactions are begun and ended by whichever loader thread calls read().
    const unsigned flags = MDB_RDONLY | MDB_NOTLS | MDB_NOSUBDIR | MDB_NOLOCK;
    if (const int rc = open_env(real, flags)) throw SourceError(spec + ": cannot open: " + mdb_strerror(rc));
    // The file LMDB opened is the one checked, not one a symlink swapped in since.
    int fd = -1;
    if (!data_root.empty() && (mdb_env_get_fd(env_.get(), &fd) != 0 || !inside(fd_path(fd), data_root)))
      throw SourceError(spec + ": " + data + " is outside the daemon's data root " + data_root);
    index(progress);
  }

  void read(uint32_t id, std::vector<uint8_t>& out) const override {
    item(id);  // range check
    MDB_txn* txn = nullptr;
    if (const int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn))
      fail_read(id, std::string("cannot begin a read transaction: ") + mdb_strerror(rc));
    const UniqueTxn txn_guard(txn);
    MDB_val key{key_offsets_[id + 1] - key_offsets_[id],
                const_cast<char*>(keys_.data() + key_offsets_[id])};
    MDB_val value{};
    if (const int rc = mdb_get(txn, dbi_, &key, &value))
      fail_read(id, std::string("cannot read the record: ") + mdb_strerror(rc));
    if (value.mv_size < kLabelBytes) fail_read(id, "record is shorter than its 8-byte label");
    const auto* bytes = static_cast<const uint8_t*>(value.mv_data);
    out.assign(bytes + kLabelBytes, bytes + value.mv_size);
  }

 private:
  // Returns mdb_env_open's result; env_ holds the handle either way (a failed open must be closed).
  int open_env(const std::string& path, unsigned flags) {
    MDB_env* env = nullptr;
    if (const int rc = mdb_env_create(&env)) return rc;
    env_.reset(env);
    return mdb_env_open(env, path.c_str(), flags, 0);
  }

  void check(int rc) const {
    if (rc != 0) throw SourceError(spec_ + ": cannot read: " + mdb_strerror(rc));
  }

  void index(const std::function<void(size_t)>& progress) {
    MDB_txn* txn = nullptr;
    check(mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn));
    const UniqueTxn txn_guard(txn);
    check(mdb_dbi_open(txn, nullptr, 0, &dbi_));
    MDB_cursor* cursor = nullptr;
    check(mdb_cursor_open(txn, dbi_, &cursor));
    const std::unique_ptr<MDB_cursor, CursorClose> cursor_guard(cursor);
    key_offsets_.push_back(0);
    MDB_val key, value;
    int rc;
    while ((rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) == 0) {
      const std::string_view key_bytes(static_cast<const char*>(key.mv_data), key.mv_size);
      if (value.mv_size < kLabelBytes)
        throw SourceError(spec_ + ": record " + printable_key(key_bytes) +
                          " is shorter than its 8-byte label");
      const auto* bytes = static_cast<const uint8_t*>(value.mv_data);
      uint64_t label = 0;
      for (size_t i = 0; i < kLabelBytes; ++i) label |= static_cast<uint64_t>(bytes[i]) << (8 * i);
      items_.push_back({"lmdb:" + printable_key(key_bytes), static_cast<int64_t>(label),
                        value.mv_size - kLabelBytes, data_modified_ns_});
      keys_.append(key_bytes);
      key_offsets_.push_back(keys_.size());
      if (progress && items_.size() % 1000 == 0) progress(items_.size());
    }
    if (rc != MDB_NOTFOUND) check(rc);
    if (items_.empty()) throw SourceError(spec_ + ": no records");
  }

  std::unique_ptr<MDB_env, EnvClose> env_;
  MDB_dbi dbi_ = 0;                  // the unnamed database's handle, valid for every transaction
  std::string keys_;                 // every key, concatenated in item order
  int64_t data_modified_ns_ = 0;     // the data file's mtime when opened (every item's modified_ns)
  std::vector<size_t> key_offsets_;  // item i's key is keys_[key_offsets_[i], key_offsets_[i + 1])
};

}  // namespace

std::unique_ptr<Source> open_lmdb(const std::string& spec, const std::string& path,
                                  const std::function<void(size_t)>& progress, const std::string& data_root) {
  check_confined(spec, path, data_root);
  return std::make_unique<LmdbSource>(spec, path, progress, data_root);
}

}  // namespace joader::source_detail
