// IBA 14.4.1's SM election, written once for Galaxy's SM of an InfiniBand subnet (nm/ib_sm.h) and
// for the management servers of a Galaxy fabric (nm/galaxy_sm.h): whom an SM defers to, whom a
// master hands over to, and what an SMInfo Set's control does to an SM's state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "wire/ib_smp.h"

namespace galaxy::nm {

// An SM as another one sees it: what its SMInfo said, and whether to count it at all (it
// answered, with this subnet's SM_Key where both have one).
struct SmPeerView {
  uint64_t guid = 0;
  uint8_t priority = 0;
  wire::SmState state = wire::SmState::kNotActive;
  bool counts = true;
};

// `a` outranks `b`: a higher priority, or the same priority and a lower GUID (IBA 14.4.1).
inline bool sm_outranks(uint8_t priority_a, uint64_t guid_a, uint8_t priority_b, uint64_t guid_b) {
  return priority_a > priority_b || (priority_a == priority_b && guid_a < guid_b);
}

// The SM among `seen` that the SM (`priority`, `guid`) defers to when it discovers: a master,
// else the first discovering SM that outranks it; nullopt: it is to be master itself.
std::optional<size_t> sm_defer_to(std::span<const SmPeerView> seen, uint8_t priority,
                                  uint64_t guid);

// A standby SM among `seen` that outranks the master (`priority`, `guid`), which hands the
// subnet over to it; the highest-ranked one.
std::optional<size_t> sm_outranking_standby(std::span<const SmPeerView> seen, uint8_t priority,
                                            uint64_t guid);

// The state an SMInfo Set with `control` moves an SM in `state` to; nullopt: no transition of
// that state (the Set is refused). ACKNOWLEDGE is taken in any state (the old master's answer to
// a handover): the state stays.
std::optional<wire::SmState> sm_control_transition(wire::SmState state, wire::SmControl control);

}  // namespace galaxy::nm
