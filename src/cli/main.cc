// `galaxy` — one command, many subcommands (docs/cli.md). Subcommands register themselves in
// the command table below; each has --help and, where it reports, --json. With --server the
// management commands run against daemons instead of a fabric of their own (cli/client.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/client.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"galaxy — software interconnect stack: chip models, simulated fabric, management"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "galaxy 0.1.0");
  auto& remote = galaxy::cli::remote_options();
  app.add_option("--server", remote.servers,
                 "run the command against this management daemon (galaxy nmd), e.g. "
                 "http://127.0.0.1:8080; repeat for several regions");
  app.add_option("--token", remote.token, "the daemons' write token (default: $GALAXY_NMD_TOKEN)");
  galaxy::cli::register_commands(app);
  app.parse_complete_callback([&app, &remote] {
    if (remote.servers.empty()) return;
    for (const CLI::App* sub : app.get_subcommands())
      if (!galaxy::cli::runs_remote(sub->get_name()))
        throw CLI::ValidationError(
            "--server", fmt::format("E9507 `galaxy {}` does not run against a daemon; run it "
                                    "without --server",
                                    sub->get_name()));
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // "galaxy bogus": CLI11 would say only that a subcommand is required; name the word it
    // did not know, and the commands it could have been.
    const CLI::App* at = &app;
    while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
    const std::vector<std::string> rest = at->remaining();
    if (dynamic_cast<const CLI::RequiredError*>(&e) && !rest.empty() && !rest.front().empty() &&
        rest.front()[0] != '-' && at->get_require_subcommand_min() > 0) {
      std::string names;
      for (const CLI::App* c : at->get_subcommands({}))
        names += (names.empty() ? "" : ", ") + c->get_name();
      const std::string path = at == &app ? "galaxy" : "galaxy " + at->get_name();
      std::fprintf(stderr, "E9508 %s: '%s' is not a command; the commands are: %s\n", path.c_str(),
                   rest.front().c_str(), names.c_str());
      return 106;
    }
    return app.exit(e);
  }
  return galaxy::cli::exit_code();
}
