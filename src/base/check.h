// Invariants checked in every build, release included: a broken one is a bug in the caller (not
// bad input, which gets an error), and going on would corrupt state without a trace. The
// failure names the file, the line, the condition and why, then aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace galaxy {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition,
                                      const char* why) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s (%s)\n", file, line, why, condition);
  std::abort();
}

}  // namespace galaxy

#define GALAXY_CHECK(condition, why)                               \
  do {                                                             \
    if (__builtin_expect(!(condition), 0))                         \
      ::galaxy::check_failed(__FILE__, __LINE__, #condition, why); \
  } while (0)
