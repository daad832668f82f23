#include "cli/commands.h"

namespace galaxy::cli {

namespace {
int g_exit_code = 0;
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

void register_commands(CLI::App& app) {
  add_fabric_command(app);
  add_sim_command(app);
}

}  // namespace galaxy::cli
