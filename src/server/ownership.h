// Ownership of datasets and jobs in a daemon that several uids use (`joader serve --allow-group`):
// each belongs to the uid whose client added or opened it, and only that uid, the daemon's own uid
// and root may remove or end it. Every admitted uid may run jobs on any dataset (sharing is the
// point) and read the status; none can take another's work away.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>

namespace joader {

// Who makes a request: the uid of the client's process, from its connection's SO_PEERCRED
// (server/rpc/listener.h). Calls made inside the daemon's process (restoring its saved datasets,
// tests, fuzzing) are the daemon's own.
struct Caller {
  uid_t uid = ::getuid();
};

// True if `caller` may remove or end what uid `owner` made, in a daemon run by uid `daemon`; and
// whether `caller` is subject to the per-user limits (not the daemon's owner, not root).
bool may_manage(uid_t owner, Caller caller, uid_t daemon = ::getuid());
bool is_member(Caller caller, uid_t daemon = ::getuid());

// The refusal when !may_manage: "WHAT belongs to uid N: only its owner, …". Uids by number only:
// it is made under the Engine's lock, where a name lookup (NSS: LDAP, sssd) must not run.
std::string management_refusal(const std::string& what, uid_t owner, Caller caller, uid_t daemon = ::getuid());

}  // namespace joader
