#include "base/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <unordered_map>

namespace galaxy::log {

namespace {

struct RateState {
  std::chrono::steady_clock::time_point window_start{};
  unsigned written = 0;
  uint64_t suppressed = 0;
};

struct Logger {
  std::mutex mu;
  Options options;
  FILE* out = stderr;
  std::function<void(std::string_view)> sink;
  std::unordered_map<uint16_t, RateState> rates;
};

Logger& logger() {
  static Logger* l = new Logger;  // never destroyed: daemons log until their last moment
  return *l;
}

std::string stamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms);
}

// mu held.
void emit(Logger& l, Level level, uint16_t id, std::string_view text) {
  std::string out = fmt::format("{}[{}] {} {} {}{}\n", l.options.program, ::getpid(), stamp(),
                                level == Level::kDebug  ? "DEBUG"
                                : level == Level::kInfo ? "INFO"
                                : level == Level::kWarn ? "WARN"
                                                        : "ERROR",
                                id ? fmt::format("E{} ", id) : std::string(), text);
  if (l.sink) {
    out.pop_back();
    l.sink(out);
    return;
  }
  std::fwrite(out.data(), 1, out.size(), l.out);
  std::fflush(l.out);
}

}  // namespace

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "?";
}

Result<Level> parse_level(std::string_view text) {
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError})
    if (text == level_name(l)) return l;
  return make_error(Code::kInvalidArgument, 17,
                    fmt::format("--log-level = '{}': expected debug, info, warn or error", text));
}

Status configure(const Options& o) {
  FILE* f = stderr;
  if (!o.file.empty()) {
    f = std::fopen(o.file.c_str(), "a");
    if (!f)
      return make_error(Code::kIoError, 18,
                        fmt::format("--log-file = '{}' cannot be opened for appending", o.file));
  }
  Logger& l = logger();
  std::lock_guard lock(l.mu);
  if (l.out != stderr) std::fclose(l.out);
  l.out = f;
  l.options = o;
  l.rates.clear();
  return {};
}

void set_sink(std::function<void(std::string_view line)> sink) {
  Logger& l = logger();
  std::lock_guard lock(l.mu);
  l.sink = std::move(sink);
  l.rates.clear();
}

bool admit(Level level, uint16_t id) {
  Logger& l = logger();
  std::lock_guard lock(l.mu);
  if (level < l.options.level) return false;
  if (id == 0) return true;
  RateState& r = l.rates[id];
  const auto now = std::chrono::steady_clock::now();
  if (now - r.window_start >= std::chrono::duration<double>(l.options.window_s)) {
    if (r.suppressed)
      emit(l, level, id,
           fmt::format("{} more lines like the last were suppressed in {} s", r.suppressed,
                       l.options.window_s));
    r = {now, 0, 0};
  }
  if (r.written >= l.options.burst) {
    ++r.suppressed;
    return false;
  }
  ++r.written;
  return true;
}

void write(Level level, uint16_t id, std::string_view text) {
  Logger& l = logger();
  std::lock_guard lock(l.mu);
  emit(l, level, id, text);
}

}  // namespace galaxy::log
