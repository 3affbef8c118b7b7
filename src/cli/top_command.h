// `joader top`: a live terminal view of a daemon (jobs, cache, sharing), refreshed like top(1).
#pragma once

#include <CLI/CLI.hpp>

namespace joader::cli {

void add_top_command(CLI::App& app, int& exit_code);

}  // namespace joader::cli
