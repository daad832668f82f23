// The largest switch radix any layer handles (docs/system.md 6, "Any radix and size": switches of
// 2-128 ports; today's InfiniBand switches have 36, 40 or 64, NDR ones 128 when split). Topologies,
// route tables, registers and management packets are sized by it, so it is defined once here.
#pragma once

#include <cstdint>

namespace galaxy {

inline constexpr uint32_t kMaxSwitchPorts = 128;

}  // namespace galaxy
