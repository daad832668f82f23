// galaxy env — the environment variables Galaxy and libglex read (base/env.h: one table with
// type, default, range and help), with the value each has in this environment and whether it
// is valid.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/env.h"
#include "base/json_text.h"
#include "cli/commands.h"

namespace galaxy::cli {
namespace {

void run_env(bool json) {
  nlohmann::json all = nlohmann::json::array();
  for (const EnvVar& v : env_table()) {
    const std::string name(v.name);
    auto value = env_string(name);
    std::string problem;
    if (v.type == EnvType::kInt)
      if (auto x = env_int(name); !x.ok()) problem = x.error().to_string();
    if (!problem.empty()) set_exit_code(1);
    if (json) {
      nlohmann::json j{{"name", name},
                       {"type", v.type == EnvType::kInt ? "int" : "string"},
                       {"default", std::string(v.default_value)},
                       {"help", std::string(v.help)},
                       {"value", value ? nlohmann::json(*value) : nlohmann::json()}};
      if (v.type == EnvType::kInt) j["range"] = {v.min, v.max};
      if (!problem.empty()) j["error"] = problem;
      all.push_back(j);
      continue;
    }
    std::printf("%-26s %s\n", name.c_str(), value ? value->c_str() : "(unset)");
    if (!problem.empty()) std::printf("  %s\n", problem.c_str());
  }
  if (json)
    std::printf("%s\n", json_text(nlohmann::json{{"variables", all}}, 2).c_str());
  else
    std::printf("\n%s", describe_env().c_str());
}

void add_env_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* c = app.add_subcommand(
      "env", "The environment variables Galaxy and libglex read: values here, defaults, ranges");
  c->add_flag("--json", *json, "machine-readable output");
  c->callback([json]() { run_env(*json); });
}

const CommandRegistrar kEnvRegistrar("env", add_env_command);

}  // namespace
}  // namespace galaxy::cli
