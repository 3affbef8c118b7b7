// `joader serve`, `joader dataset add|list|rm`, `joader status`.
#pragma once

#include <CLI/CLI.hpp>

namespace joader::cli {

void add_serve_command(CLI::App& app, int& exit_code);
void add_dataset_command(CLI::App& app, int& exit_code);
void add_job_command(CLI::App& app, int& exit_code);
void add_stop_command(CLI::App& app, int& exit_code);
void add_status_command(CLI::App& app, int& exit_code);

// "512MiB", "2GiB", "1.5G", "1000000" -> bytes. Throws std::invalid_argument.
uint64_t parse_size(const std::string& text);

}  // namespace joader::cli
