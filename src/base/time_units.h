// The clock unit every layer counts in (docs/simulation.md): picoseconds in an
// unsigned 64-bit integer, simulated time and the live engines' monotonic clock alike. The
// simulator (sim::Time), the management server (nm::Picoseconds) and the chips' timers (the
// M_Key lease) all count in it.
#pragma once

#include <cstdint>

namespace galaxy::units {

inline constexpr uint64_t kPicosecond = 1;
inline constexpr uint64_t kNanosecond = 1000 * kPicosecond;
inline constexpr uint64_t kMicrosecond = 1000 * kNanosecond;
inline constexpr uint64_t kMillisecond = 1000 * kMicrosecond;
inline constexpr uint64_t kSecond = 1000 * kMillisecond;

}  // namespace galaxy::units
