// Temperature and core voltage of a chip (docs/system.md 2.1: the monitor board reads both over
// I2C). A first-order model, stated rather than measured (the papers give no thermal data):
// a powered chip settles at ambient + an idle rise + a rise proportional to the share of its
// ports' link bandwidth it sends; it approaches that with one time constant; a chip switched
// off cools toward ambient. The regulator holds the nominal core voltage less a droop
// proportional to the same load, and reads 0 while off. The over-temperature fault fires when
// the temperature reaches TEMP_LIMIT and re-arms kOverTemperatureHysteresisMc below it.
#pragma once

#include <cmath>
#include <cstdint>

namespace galaxy::chip::thermal {

inline constexpr int64_t kAmbientMc = 25'000;       // machine-room inlet air, 25 °C
inline constexpr int64_t kIdleRiseMc = 20'000;      // a powered, idle chip: 45 °C
inline constexpr int64_t kLoadRiseMc = 35'000;      // every port sending at full rate: 80 °C
inline constexpr double kTimeConstantS = 5.0;       // heat sink and package
inline constexpr int64_t kDefaultLimitMc = 85'000;  // TEMP_LIMIT at power-on
inline constexpr int64_t kOverTemperatureHysteresisMc = 5'000;
inline constexpr uint64_t kNominalCoreMv = 900;
inline constexpr uint64_t kLoadDroopMv = 30;  // at full load

// The temperature a chip approaches, in milli-degrees: `load` in [0, 1].
inline int64_t settled_mc(bool powered, double load, int64_t ambient_mc) {
  if (!powered) return ambient_mc;
  return ambient_mc + kIdleRiseMc + static_cast<int64_t>(std::llround(load * kLoadRiseMc));
}

// The temperature after `seconds` spent approaching `target_mc` from `now_mc`.
inline int64_t step_mc(int64_t now_mc, int64_t target_mc, double seconds) {
  if (seconds <= 0) return now_mc;
  const double k = 1.0 - std::exp(-seconds / kTimeConstantS);
  return now_mc + static_cast<int64_t>(std::llround(static_cast<double>(target_mc - now_mc) * k));
}

inline uint64_t core_mv(bool powered, double load) {
  if (!powered) return 0;
  return kNominalCoreMv - static_cast<uint64_t>(std::llround(load * kLoadDroopMv));
}

}  // namespace galaxy::chip::thermal
