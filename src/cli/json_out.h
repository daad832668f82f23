#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_text.h"
#include "base/status.h"
#include "cli/commands.h"

namespace galaxy::cli {

// Every command reports errors the same way: text on stderr, or a JSON object with the stable
// error id on stdout when --json was given; exit code 2 for bad input.
inline void report_error(const Error& e, bool json) {
  if (json) {
    nlohmann::json j{{"error",
                      {{"id", fmt::format("E{:04}", e.id)},
                       {"code", code_name(e.code)},
                       {"message", e.message}}}};
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    std::fprintf(stderr, "galaxy: %s\n", e.to_string().c_str());
  }
  set_exit_code(2);
}

}  // namespace galaxy::cli
