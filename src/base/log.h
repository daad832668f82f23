// One logger for the daemons, like OpenSM's log with its "ERR 3304" lines: a level, a stable id
// on every line that reports a drop, a refusal or a failure (the same id the error or counter
// has in the code base), to stderr or a file. Lines are rate-limited per id, so a storm of drops
// writes a few lines and then one line saying how many more there were.
//
//   galaxy-fabricd[4711] 2026-11-26T03:40:00.123Z WARN E4801 dropped: a datagram for no link of
//   this host from 127.0.0.1:17471
//
// Safe from any thread. Call sites test admit() before formatting, so a suppressed line costs a
// lookup and no formatting.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace galaxy::log {

enum class Level : uint8_t { kDebug, kInfo, kWarn, kError };

std::string_view level_name(Level l);  // "debug", "info", "warn", "error"
// "debug", "info", "warn" or "error".
Result<Level> parse_level(std::string_view text);

struct Options {
  Level level = Level::kInfo;
  std::string file;  // "" = stderr; otherwise appended to
  std::string program = "galaxy";
  unsigned burst = 10;   // lines per id per window
  double window_s = 10;  // beyond the burst, counted and summarised once the window ends
};

// Opens the file (an error names it) and sets the options for every later line.
Status configure(const Options& o);
// Tests: every line goes to `sink` instead of the stream (empty: back to the stream).
void set_sink(std::function<void(std::string_view line)> sink);

// Whether a line of this level and id would be written now (counts it as suppressed if not).
bool admit(Level level, uint16_t id);
// Writes a line that admit() let through.
void write(Level level, uint16_t id, std::string_view text);

template <class... A>
void line(Level level, uint16_t id, fmt::format_string<A...> f, A&&... args) {
  if (admit(level, id)) write(level, id, fmt::format(f, std::forward<A>(args)...));
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... args) {
  line(Level::kInfo, 0, f, std::forward<A>(args)...);
}
template <class... A>
void warn(uint16_t id, fmt::format_string<A...> f, A&&... args) {
  line(Level::kWarn, id, f, std::forward<A>(args)...);
}
template <class... A>
void error(uint16_t id, fmt::format_string<A...> f, A&&... args) {
  line(Level::kError, id, f, std::forward<A>(args)...);
}

}  // namespace galaxy::log
