// joader: the single command-line entry point (docs/DAEMON.md lists the commands).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <string>

#include "cli/daemon_commands.h"
#include "cli/simulate_command.h"
#include "cli/top_command.h"

namespace {

std::string names_of(const std::vector<CLI::App*>& commands) {
  std::string out;
  for (const CLI::App* c : commands) out += (out.empty() ? "" : ", ") + c->get_name();
  return out;
}

// The first word that should name a command but names none, e.g. "statsu" in `joader statsu` or
// "lst" in `joader dataset lst`, as one error line naming the word and the commands there are
// (CLI11 alone says "A subcommand is required" or "arguments were not expected").
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "joader";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const std::vector<CLI::App*> commands = at->get_subcommands({});
    if (commands.empty() || word.empty() || word[0] == '-') return "";
    CLI::App* next = nullptr;
    for (CLI::App* c : commands) {
      if (c->check_name(word)) next = c;
    }
    if (next == nullptr) {
      return "unknown command '" + word + "' for " + path + " (commands: " + names_of(commands) + "; see " + path +
             " --help)";
    }
    at = next;
    path += " " + word;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Joader: shared data preparation for concurrent deep-learning jobs"};
  app.require_subcommand(1);
  int exit_code = 0;
  joader::cli::add_serve_command(app, exit_code);
  joader::cli::add_dataset_command(app, exit_code);
  joader::cli::add_job_command(app, exit_code);
  joader::cli::add_status_command(app, exit_code);
  joader::cli::add_stop_command(app, exit_code);
  joader::cli::add_top_command(app, exit_code);
  joader::cli::add_simulate_command(app, exit_code);
  joader::cli::add_demo_command(app, exit_code);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "error: {}\n", unknown);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error of this command.
    std::string what = e.what(), path = "joader";
    CLI::App* at = &app;
    while (!at->get_subcommands().empty()) {  // the deepest command that was recognised
      at = at->get_subcommands().front();
      path += " " + at->get_name();
    }
    if (what == "A subcommand is required") what = "a command is required: " + names_of(at->get_subcommands({}));
    fmt::print(stderr, "error: {} (see {} --help)\n", what, path);
    return 2;
  }
  return exit_code;
}
