#pragma once

#include <CLI/CLI.hpp>

namespace galaxy::cli {

// Each subcommand lives in its own cmd_<name>.cc and registers itself with a file-scope
// CommandRegistrar; register_commands adds them all, in name order.
using AddCommandFn = void (*)(CLI::App& app);
struct CommandRegistrar {
  CommandRegistrar(const char* name, AddCommandFn add);
};

void register_commands(CLI::App& app);
int exit_code();
void set_exit_code(int code);

}  // namespace galaxy::cli
