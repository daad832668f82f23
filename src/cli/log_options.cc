#include "cli/log_options.h"

#include "base/log.h"

namespace galaxy::cli {

void add_log_options(CLI::App* command, LogCliOptions& o) {
  command->add_option("--log-file", o.file,
                      "append the log here instead of stderr (lines with E<id> report drops, "
                      "refusals and failures, rate-limited per id)");
  command->add_option("--log-level", o.level, "debug, info, warn or error")->capture_default_str();
}

Status apply_log_options(const LogCliOptions& o, const char* program) {
  auto level = log::parse_level(o.level);
  if (!level.ok()) return level.error();
  log::Options lo;
  lo.level = *level;
  lo.file = o.file;
  lo.program = program;
  return log::configure(lo);
}

}  // namespace galaxy::cli
