#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace galaxy::cli {

// Each subcommand lives in its own cmd_<name>.cc and registers itself with a file-scope
// CommandRegistrar; register_commands adds them all, in name order.
using AddCommandFn = void (*)(CLI::App& app);
// `remote`: the command also runs against management daemons (galaxy --server URL, cli/client.h).
struct CommandRegistrar {
  CommandRegistrar(const char* name, AddCommandFn add, bool remote = false);
};

void register_commands(CLI::App& app);
bool runs_remote(const std::string& name);
int exit_code();
void set_exit_code(int code);

}  // namespace galaxy::cli
