// Source specs ("KIND:ARG") as clients and the daemon both see them. Paths in a spec are the
// caller's: a client makes them absolute in its own working directory before sending, and the
// daemon, whose working directory means nothing to the caller, refuses relative ones.
#pragma once

#include <optional>
#include <string>

namespace joader {

// The path of a spec whose kind names a file or folder (imagefolder, filelist, lmdb, tar: a glob);
// nullopt for other kinds (synthetic) and for specs without a colon.
std::optional<std::string> source_path(const std::string& spec);

// The spec with its path made absolute against the current working directory, lexically (as
// std::filesystem::absolute: "." and ".." and symlinks are left for the daemon to resolve);
// other specs unchanged.
std::string absolute_source(const std::string& spec);

}  // namespace joader
