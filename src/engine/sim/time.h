// Simulated time: picoseconds in an unsigned 64-bit integer (docs/simulation.md), which
// spans about 213 days, far beyond any run, and keeps event ordering exact (no float ties).
#pragma once

#include <cstdint>

#include "base/time_units.h"

namespace galaxy::sim {

using Time = uint64_t;

inline constexpr Time kPicosecond = units::kPicosecond;
inline constexpr Time kNanosecond = units::kNanosecond;
inline constexpr Time kMicrosecond = units::kMicrosecond;
inline constexpr Time kMillisecond = units::kMillisecond;
inline constexpr Time kSecond = units::kSecond;

// "No deadline": later than every event; run(kNever) runs until the queue is empty.
inline constexpr Time kNever = UINT64_MAX;

// Microseconds as a double: the unit of the timing calibration file and of reports.
constexpr double to_us(Time t) {
  return static_cast<double>(t) / static_cast<double>(kMicrosecond);
}

// Rounds to the nearest picosecond (halves away from zero). Negative and NaN inputs give 0;
// values beyond the range of Time saturate to kNever.
constexpr Time from_us(double us) {
  const double ps = us * static_cast<double>(kMicrosecond);
  if (!(ps > 0.0)) return 0;
  if (ps >= 18446744073709551616.0) return kNever;  // 2^64
  // From 2^52 on every double is an integer and adding 0.5 could round up spuriously.
  if (ps >= 4503599627370496.0) return static_cast<Time>(ps);
  return static_cast<Time>(ps + 0.5);
}

}  // namespace galaxy::sim
