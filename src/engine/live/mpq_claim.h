// chip::mpq_admit over a VP of the shared segment: a cell is claimed only when the VP is open,
// and the owner's liveness (a syscall) is asked only when the ring is full. Every live path
// that writes an MPQ (same-host sender, daemon delivering an MP or a management response) uses
// this one check.
#pragma once

#include "chip/mpq.h"
#include "engine/live/segment.h"

namespace galaxy::live {

// On kWrite, *cell is the claimed cell at *pos, to be filled and published; otherwise nullptr.
inline chip::MpqAdmit claim_mpq(VpSlot& vp, MpqCell** cell, uint64_t* pos) {
  const bool open = vp.open.load(std::memory_order_acquire);
  *cell = open ? vp.mpq.claim(pos) : nullptr;
  return chip::mpq_admit(open, *cell != nullptr,
                         [&] { return process_alive(vp.owner_pid.load()); });
}

}  // namespace galaxy::live
