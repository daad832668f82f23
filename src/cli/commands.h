#pragma once

#include <CLI/CLI.hpp>

namespace galaxy::cli {

// Adds every subcommand to `app`; each callback stores its exit code.
void register_commands(CLI::App& app);
int exit_code();
void set_exit_code(int code);

// Each subcommand lives in its own file and registers here.
void add_fabric_command(CLI::App& app);
void add_sim_command(CLI::App& app);

}  // namespace galaxy::cli
