// `joader simulate` and `joader demo` (the training demo; --simulated: the simulator showcase).
#pragma once

#include <CLI/CLI.hpp>

namespace joader::cli {

// Adds the subcommands to `app`; each returns its exit code through `exit_code` when run.
void add_simulate_command(CLI::App& app, int& exit_code);
void add_demo_command(CLI::App& app, int& exit_code);

}  // namespace joader::cli
