#include "server/ownership.h"

#include <pwd.h>

#include <vector>

namespace joader {

std::string describe_uid(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const std::string number = "uid " + std::to_string(uid);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return number;
  return std::string(found->pw_name) + " (" + number + ")";
}

std::string management_refusal(const std::string& what, uid_t owner, Caller caller, uid_t daemon) {
  if (caller.uid == owner || caller.uid == daemon || caller.uid == 0) return "";
  return what + " belongs to " + describe_uid(owner) + ": only its owner, the daemon's owner (" +
         describe_uid(daemon) + ") or root may do that; " + describe_uid(caller.uid) + " may not";
}

}  // namespace joader
