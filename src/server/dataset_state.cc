#include "server/dataset_state.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/source_spec.h"

namespace joader {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string fmt_mode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void DatasetStateFile::save(const std::vector<SavedDataset>& datasets) const {
  nlohmann::json list = nlohmann::json::array();
  for (const SavedDataset& d : datasets) {
    const v1::AddDatasetRequest& r = d.spec;
    list.push_back({{"name", r.name()}, {"source", r.source()}, {"raw", r.raw()}, {"resize", r.resize()},
                    {"crop", r.crop()}, {"on_error", r.on_error() == "skip" ? "skip" : "fail"},
                    {"fingerprint", d.fingerprint}, {"items", d.items}, {"owner", d.owner}});
  }
  const std::string text = nlohmann::json{{"version", 1}, {"datasets", list}}.dump(1) + "\n";
  std::string tmp = path_ + ".XXXXXX";
  const Fd out{::mkostemp(tmp.data(), O_CLOEXEC)};  // 0600, created here (O_EXCL)
  if (out.fd < 0) throw DatasetStateError("cannot write " + path_ + ": cannot create a file beside it: " + errno_text(errno));
  const auto fail = [&](const char* step) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw DatasetStateError("cannot write " + path_ + ": " + step + ": " + errno_text(e));
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(out.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed");
    done += static_cast<size_t>(n);
  }
  if (::fsync(out.fd) != 0) fail("fsync failed");
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) fail("cannot rename the new list over it");
}

std::vector<SavedDataset> DatasetStateFile::load() const {
  std::vector<SavedDataset> out;
  const Fd in{::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  if (in.fd < 0) {
    if (errno == ENOENT) return out;  // nothing saved yet
    if (errno == ELOOP) throw DatasetStateError(path_ + " is a symbolic link: not read (the daemon writes a regular file)");
    throw DatasetStateError("cannot read " + path_ + ": " + errno_text(errno));
  }
  struct stat st{};
  if (::fstat(in.fd, &st) != 0) throw DatasetStateError("cannot stat " + path_ + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw DatasetStateError(path_ + " is not a regular file: not read");
  if (st.st_nlink != 1) {
    throw DatasetStateError(path_ + " has " + std::to_string(st.st_nlink) +
                            " names (hard links): not read (the daemon writes a file of one name)");
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    throw DatasetStateError(path_ + " belongs to uid " + std::to_string(st.st_uid) + " with mode " +
                            fmt_mode(st.st_mode) + ": not read (only a file of the daemon's uid that no one else may "
                            "write is trusted; remove it)");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DatasetStateError("cannot read " + path_ + ": " + errno_text(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    for (const auto& d : doc.at("datasets")) {
      SavedDataset saved;
      v1::AddDatasetRequest& req = saved.spec;
      req.set_protocol_version(kProtocolVersion);
      req.set_name(d.at("name").get<std::string>());
      req.set_source(absolute_source(d.at("source").get<std::string>()));
      req.set_raw(d.at("raw").get<bool>());
      req.set_resize(d.at("resize").get<uint32_t>());
      req.set_crop(d.at("crop").get<uint32_t>());
      req.set_on_error(d.at("on_error").get<std::string>());
      saved.fingerprint = d.value("fingerprint", std::string());
      saved.items = d.value("items", uint64_t{0});
      saved.owner = d.value("owner", static_cast<uid_t>(::getuid()));
      out.push_back(std::move(saved));
    }
  } catch (const nlohmann::json::parse_error& e) {
    // By position only: the parser's message quotes the file's bytes, and the log may be read by others.
    throw DatasetStateError(path_ + " is not a valid dataset list: not JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {
    throw DatasetStateError(path_ + " is not a valid dataset list: " + e.what());
  }
  return out;
}

std::string DatasetStateFile::set_aside() const {
  const std::string to = path_ + ".bad-" + std::to_string(std::time(nullptr));
  return std::rename(path_.c_str(), to.c_str()) == 0 ? to : "";
}

}  // namespace joader
