// Virtual channels, DAMQ input buffers and credits (docs/system.md 1.2, 1.3), written once and used
// by both ends of every link: the receiver holds its input buffer's occupancy, the sender a mirror
// of it (its credits). Header-only and allocation-free, as the engines' per-packet paths need.
//
// The buffer: every input port has one buffer of kDamqFlits flits shared by its six VCs
// (dynamically allocated multi-queue); each VC owns kDamqReservedFlits of it, enough for the
// largest packet, so that a VC whose packets cannot move never takes the last room of another
// (a blocked data VC cannot stop management on VC3, nor read responses behind writes). The rest
// is shared: a VC past its own share takes from the common part while it lasts.
//
// Credits: a sender may start a packet of n flits on VC v only while its mirror of the peer's
// buffer says the packet fits there whole (virtual cut-through moves whole packets); it takes
// the room as it starts, and the receiver gives it back (a credit, over the link) when the
// packet has left its buffer. The mirror is never below the receiver's own count, so the
// receiver never has to refuse a flit: the link loses nothing for want of room.
#pragma once

#include <array>
#include <cstdint>

#include "wire/data_packet.h"
#include "wire/flit.h"

namespace galaxy::chip {

using wire::kMgmtVc;
using wire::kNumVcs;

// Flits of one input port's buffer. A credit's round trip on TH-2's optical links is about
// 2 x 331 ns of link plus 100 ns of input pipeline, 432 flit times at 112 Gbit/s (198-bit
// flits): 512 flits keep one VC streaming at the full link rate over such a link.
inline constexpr uint16_t kDamqFlits = 512;
// Each VC's own share: the largest packet (a full data packet; a management packet is 4 flits).
inline constexpr uint16_t kDamqReservedFlits = wire::kMaxDataPacketFlits;
inline constexpr uint16_t kDamqSharedFlits = kDamqFlits - kNumVcs * kDamqReservedFlits;

// Occupancy of one input buffer, per VC: the receiver's own count, or a sender's mirror of it.
class Damq {
 public:
  // Whether a packet of `flits` on `vc` fits whole: within the VC's own share, or the common
  // part has room for what goes beyond it.
  constexpr bool fits(uint8_t vc, unsigned flits) const {
    if (vc >= kNumVcs || flits > kDamqFlits) return false;
    const unsigned after = used_[vc] + flits;
    const unsigned over_before = over(used_[vc]);
    const unsigned over_after = over(after);
    return shared_used_ - over_before + over_after <= kDamqSharedFlits;
  }
  // Takes room for a packet; false (and nothing taken) if it does not fit: the caller counts
  // that as a credit violation, which a correct sender never causes.
  constexpr bool take(uint8_t vc, unsigned flits) {
    if (!fits(vc, flits)) return false;
    shared_used_ += over(used_[vc] + flits) - over(used_[vc]);
    used_[vc] = static_cast<uint16_t>(used_[vc] + flits);
    return true;
  }
  // Gives back room a packet held; false (nothing given) if the VC holds less than that.
  constexpr bool give(uint8_t vc, unsigned flits) {
    if (vc >= kNumVcs || used_[vc] < flits) return false;
    shared_used_ -= over(used_[vc]) - over(used_[vc] - flits);
    used_[vc] = static_cast<uint16_t>(used_[vc] - flits);
    return true;
  }
  constexpr unsigned used(uint8_t vc) const { return vc < kNumVcs ? used_[vc] : 0; }
  constexpr unsigned total() const {
    unsigned t = 0;
    for (uint16_t u : used_) t += u;
    return t;
  }
  // The most flits `vc` could still take (its share's rest and the common part's).
  constexpr unsigned room(uint8_t vc) const {
    if (vc >= kNumVcs) return 0;
    const unsigned own = used_[vc] < kDamqReservedFlits ? kDamqReservedFlits - used_[vc] : 0;
    return own + (kDamqSharedFlits - shared_used_);
  }
  // Six 10-bit fields, VC v in bits [10v + 9 : 10v] (the VC_BUFFERED / VC_CREDITS registers).
  template <class PerVc>
  static constexpr uint64_t pack(PerVc&& value_of) {
    uint64_t w = 0;
    for (uint8_t v = 0; v < kNumVcs; ++v)
      w |= uint64_t{static_cast<unsigned>(value_of(v)) & 0x3FFu} << (10 * v);
    return w;
  }
  constexpr bool operator==(const Damq&) const = default;

 private:
  static constexpr unsigned over(unsigned used) {
    return used > kDamqReservedFlits ? used - kDamqReservedFlits : 0;
  }
  std::array<uint16_t, kNumVcs> used_{};
  uint16_t shared_used_ = 0;
};
static_assert(kDamqFlits < 1024, "VC_BUFFERED / VC_CREDITS hold 10 bits per VC");

// The VC a data packet crosses a link on: the one its head flit names. A head naming VC3
// (management's) or no VC at all is malformed; such a packet crosses on VC0, never taking
// management's room, and the chip that reads its head discards it.
constexpr uint8_t data_link_vc(uint8_t head_flit_vc) {
  return head_flit_vc < kNumVcs && head_flit_vc != kMgmtVc ? head_flit_vc : 0;
}

// Which VC an output serves next (docs/system.md 1.2): management (VC3) whenever it may go, then
// the data VCs in turn from the one after `last`. `ready(v)`: VC v has something to send that the
// peer has room for. Returns the VC, or -1 when none may go. The simulator's outputs serve
// packets by it (VcState::arbitrate), the live links their per-VC frames.
template <class Ready>
int next_vc(uint8_t last, Ready&& ready) {
  if (ready(kMgmtVc)) return kMgmtVc;
  for (uint8_t i = 1; i <= kNumVcs; ++i) {
    const auto v = static_cast<uint8_t>((last + i) % kNumVcs);
    if (v != kMgmtVc && ready(v)) return v;
  }
  return -1;
}

// The link state of one port for VCs and credits: what its input buffer holds, what the peer's
// input buffer holds as this port counts it (its credits), and the per-VC counters.
struct VcState {
  Damq buffered;  // this port's input buffer
  Damq credits;   // the mirror of the peer's input buffer
  std::array<uint64_t, kNumVcs> tx_packets{};
  uint64_t credit_stalls = 0;  // times packets waited here with none fitting the peer's room

  // The output's arbitration (next_vc): a VC may go when its first packet fits the peer's
  // buffer whole. `head_flits(v)`: the flits of VC v's first waiting packet, 0 when none.
  // Returns the VC to send, or -1 when nothing may start.
  template <class HeadFlits>
  int arbitrate(uint8_t last, HeadFlits&& head_flits) const {
    return next_vc(last, [&](uint8_t v) {
      const unsigned f = head_flits(v);
      return f != 0 && credits.fits(v, f);
    });
  }
};

}  // namespace galaxy::chip
