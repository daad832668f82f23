// Whether an MP may be written into a VP's MPQ (docs/system.md 1.1), decided once for both engines
// and every path: the simulated NIC (Nic::receive_mp / receive_mgmt), a live sender writing a
// same-host peer's MPQ itself, and the live daemon delivering what came over a link or from an
// NMA.
//
// The one full-queue semantic: an MPQ is never overwritten and an MP is never dropped for want
// of room. A full MPQ back-pressures: the MP waits where it is, in order, and goes in when the
// owner drains the queue — in the receiving NIC's input (the simulator; the live daemon, which
// holds a link's items and an NMA's responses), or, for a live sender that writes the MPQ
// itself and cannot wait inside the fabric, at the sender: glex_send_mp returns GLEX_BUSY and
// nothing was sent. Only a VP that is not open, or whose owner died, refuses an MP; the
// sender's descriptor then completes with that error.
#pragma once

#include <cstdint>

namespace galaxy::chip {

enum class MpqAdmit : uint8_t {
  kWrite,      // there is room: write the cell
  kWait,       // full: the MP waits (see above) and is retried when the queue drains
  kNotOpen,    // refused: no endpoint owns the VP (GLEX_UNREACHABLE)
  kOwnerGone,  // refused: the VP's owner died, nobody will drain it (GLEX_PEER_DEAD)
};

// `owner_alive()` is asked only when the queue is full (on a live host it costs a syscall).
template <class OwnerAlive>
MpqAdmit mpq_admit(bool open, bool has_room, OwnerAlive&& owner_alive) {
  if (!open) return MpqAdmit::kNotOpen;
  if (has_room) return MpqAdmit::kWrite;
  return owner_alive() ? MpqAdmit::kWait : MpqAdmit::kOwnerGone;
}

}  // namespace galaxy::chip
