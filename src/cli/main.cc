// joader: the single command-line entry point (DESIGN §6).
#include <CLI/CLI.hpp>

#include "cli/daemon_commands.h"
#include "cli/simulate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Joader: shared data preparation for concurrent deep-learning jobs"};
  app.require_subcommand(1);
  int exit_code = 0;
  joader::cli::add_serve_command(app, exit_code);
  joader::cli::add_dataset_command(app, exit_code);
  joader::cli::add_status_command(app, exit_code);
  joader::cli::add_simulate_command(app, exit_code);
  joader::cli::add_demo_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
