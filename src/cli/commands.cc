#include "cli/commands.h"

#include <map>
#include <string>

namespace galaxy::cli {

namespace {
int g_exit_code = 0;
struct Entry {
  AddCommandFn add;
  bool remote;
};
std::map<std::string, Entry>& table() {
  static std::map<std::string, Entry> t;
  return t;
}
}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, AddCommandFn add, bool remote) {
  table()[name] = {add, remote};
}

bool runs_remote(const std::string& name) {
  auto it = table().find(name);
  return it != table().end() && it->second.remote;
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

void register_commands(CLI::App& app) {
  for (const auto& [name, e] : table()) e.add(app);
}

}  // namespace galaxy::cli
