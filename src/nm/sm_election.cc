#include "nm/sm_election.h"

namespace galaxy::nm {

std::optional<size_t> sm_defer_to(std::span<const SmPeerView> seen, uint8_t priority,
                                  uint64_t guid) {
  std::optional<size_t> best;
  for (size_t i = 0; i < seen.size(); ++i) {
    const SmPeerView& sm = seen[i];
    if (!sm.counts || sm.guid == guid) continue;
    if (sm.state == wire::SmState::kMaster) return i;
    if (sm.state == wire::SmState::kDiscovering &&
        sm_outranks(sm.priority, sm.guid, priority, guid) && !best)
      best = i;
  }
  return best;
}

std::optional<size_t> sm_outranking_standby(std::span<const SmPeerView> seen, uint8_t priority,
                                            uint64_t guid) {
  std::optional<size_t> best;
  for (size_t i = 0; i < seen.size(); ++i) {
    const SmPeerView& sm = seen[i];
    if (!sm.counts || sm.guid == guid || sm.state != wire::SmState::kStandby) continue;
    if (!sm_outranks(sm.priority, sm.guid, priority, guid)) continue;
    if (!best || sm_outranks(sm.priority, sm.guid, seen[*best].priority, seen[*best].guid))
      best = i;
  }
  return best;
}

std::optional<wire::SmState> sm_control_transition(wire::SmState state, wire::SmControl control) {
  using wire::SmControl;
  using wire::SmState;
  switch (control) {
    case SmControl::kAcknowledge:
      return state;
    case SmControl::kHandover:
      // The master hands the subnet over: master from now on, sweeping at once.
      if (state != SmState::kStandby) return std::nullopt;
      return SmState::kMaster;
    case SmControl::kDisable:
      // A standby told to stop: no polls, no sweeps, until STANDBY or DISCOVER.
      if (state != SmState::kStandby) return std::nullopt;
      return SmState::kNotActive;
    case SmControl::kStandby:
      if (state != SmState::kNotActive) return std::nullopt;
      return SmState::kStandby;
    case SmControl::kDiscover:
      // Sweep now, and take the role the sweep finds.
      if (state != SmState::kStandby && state != SmState::kNotActive) return std::nullopt;
      return SmState::kDiscovering;
  }
  return std::nullopt;
}

}  // namespace galaxy::nm
