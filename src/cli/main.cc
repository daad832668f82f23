// `galaxy` — one command, many subcommands (docs/cli.md). Subcommands register themselves in
// the command table below; each has --help and, where it reports, --json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"galaxy — software interconnect stack: chip models, simulated fabric, management"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "galaxy 0.1.0");
  galaxy::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return galaxy::cli::exit_code();
}
