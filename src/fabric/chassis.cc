#include "fabric/chassis.h"

#include <map>
#include <utility>

namespace galaxy::fabric {

std::vector<std::vector<uint32_t>> monitor_boards(const Topology& t, uint32_t channels) {
  std::map<std::pair<int32_t, int32_t>, std::vector<uint32_t>> located;
  std::vector<std::vector<uint32_t>> boards;
  std::vector<uint32_t> loose;
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    const Location& l = t.location(v);
    if (l.cabinet >= 0 && l.chassis >= 0)
      located[{l.cabinet, l.chassis}].push_back(v);
    else
      loose.push_back(v);
  }
  auto box = [&](const std::vector<uint32_t>& chips, uint32_t per_board) {
    for (size_t i = 0; i < chips.size(); i += per_board)
      boards.emplace_back(
          chips.begin() + static_cast<std::ptrdiff_t>(i),
          chips.begin() + static_cast<std::ptrdiff_t>(std::min(chips.size(), i + per_board)));
  };
  for (const auto& [where, chips] : located) box(chips, channels);
  box(loose, std::min(channels, kChipsPerUnlocatedChassis));
  return boards;
}

}  // namespace galaxy::fabric
