// --log-file and --log-level of the daemons (galaxy fabricd, galaxy nmd): base/log.h's logger.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"

namespace galaxy::cli {

struct LogCliOptions {
  std::string file;  // "" = stderr
  std::string level = "info";
};

void add_log_options(CLI::App* command, LogCliOptions& o);
// Configures the logger for `program` ("galaxy-fabricd"); an error names the bad option.
Status apply_log_options(const LogCliOptions& o, const char* program);

}  // namespace galaxy::cli
