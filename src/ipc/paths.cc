#include "ipc/paths.h"

#include "ipc/daemon_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace joader {

std::string default_socket_path() {
  if (const char* s = std::getenv("JOADER_SOCKET"); s != nullptr && *s != '\0') return s;
  return builtin_socket_path();
}

std::string builtin_socket_path() {
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d != nullptr && *d != '\0') {
    return std::string(d) + "/joader.sock";
  }
  return "/tmp/joader-" + std::to_string(getuid()) + "/joader.sock";
}

void prepare_socket_dir(const std::string& socket_path) {
  const std::filesystem::path dir = std::filesystem::path(socket_path).parent_path();
  if (dir.empty()) return;
  struct stat st{};
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) throw std::runtime_error("cannot inspect " + dir.string() + ": " + std::strerror(errno));
    std::filesystem::create_directories(dir.parent_path());
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create " + dir.string() + ": " + std::strerror(errno));
    }
    if (stat(dir.c_str(), &st) != 0) throw std::runtime_error("cannot inspect " + dir.string());
  }
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(dir.string() + " is not a directory");
  if (st.st_uid != getuid()) {
    throw std::runtime_error("socket directory " + dir.string() + " belongs to " + describe_user(st.st_uid) +
                             ", not to " + describe_user(getuid()) +
                             ": another user may have created it to listen in place of your daemon. Remove it (or ask "
                             "its owner to), or serve on a socket in a directory of your own (--socket PATH)");
  }
  // Other users may not rename or replace the socket: a private directory, or a sticky one
  // like /tmp where only the owner may remove its own files.
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", st.st_mode & 0777);
    throw std::runtime_error("socket directory " + dir.string() + " is writable by other users (mode " + mode +
                             "): use a private directory (chmod 700)");
  }
}

}  // namespace joader
