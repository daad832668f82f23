#include "cli/commands.h"

#include <map>
#include <string>

namespace galaxy::cli {

namespace {
int g_exit_code = 0;
std::map<std::string, AddCommandFn>& table() {
  static std::map<std::string, AddCommandFn> t;
  return t;
}
}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, AddCommandFn add) {
  table()[name] = add;
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

void register_commands(CLI::App& app) {
  for (const auto& [name, add] : table()) add(app);
}

}  // namespace galaxy::cli
