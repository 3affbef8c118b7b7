#include "server/ownership.h"

namespace joader {

bool is_member(Caller caller, uid_t daemon) { return caller.uid != daemon && caller.uid != 0; }

bool may_manage(uid_t owner, Caller caller, uid_t daemon) { return caller.uid == owner || !is_member(caller, daemon); }

std::string management_refusal(const std::string& what, uid_t owner, Caller caller, uid_t daemon) {
  return what + " belongs to uid " + std::to_string(owner) + ": only its owner, the daemon's owner (uid " +
         std::to_string(daemon) + ") or root may do that; uid " + std::to_string(caller.uid) + " may not";
}

}  // namespace joader
