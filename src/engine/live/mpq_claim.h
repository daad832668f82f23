// Writing an MPQ of the shared segment: chip::mpq_admit over a VP (a cell is claimed only when
// the VP is open, and the owner's liveness, a read of /proc, is asked only when the ring is full),
// then the cell filled as the wire MP. Every live path that writes an MPQ (same-host sender,
// daemon delivering an MP or a management response) uses these two.
#pragma once

#include <algorithm>
#include <cstring>

#include "chip/mpq.h"
#include "engine/live/segment.h"
#include "wire/data_packet.h"

namespace galaxy::live {

// On kWrite, *cell is the claimed cell at *pos, to be filled and published; otherwise nullptr.
inline chip::MpqAdmit claim_mpq(VpSlot& vp, MpqCell** cell, uint64_t* pos) {
  const bool open = vp.open.load(std::memory_order_acquire);
  *cell = open ? vp.mpq.claim(pos) : nullptr;
  return chip::mpq_admit(open, *cell != nullptr,
                         [&] { return process_alive(vp.owner_pid.load()); });
}

// An MP's payload (at most 120 bytes) copied without a call for the short ones that decide
// latency: two overlapping moves cover 4-16 bytes.
template <class Word>
inline void copy_two_words(uint8_t* d, const uint8_t* s, uint32_t len) {
  Word a, b;
  std::memcpy(&a, s, sizeof a);
  std::memcpy(&b, s + len - sizeof b, sizeof b);
  std::memcpy(d, &a, sizeof a);
  std::memcpy(d + len - sizeof b, &b, sizeof b);
}
inline void copy_payload(void* dst, const void* src, uint32_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<const uint8_t*>(src);
  if (len > 16)
    std::memcpy(d, s, len);
  else if (len >= 8)
    copy_two_words<uint64_t>(d, s, len);
  else if (len >= 4)
    copy_two_words<uint32_t>(d, s, len);
  else
    for (uint32_t i = 0; i < len; ++i) d[i] = s[i];
}

// Fills a cell claimed by claim_mpq and publishes it: the payload (the header's length, at
// most 120 bytes), then the header word with the ring's lap (segment.h, MpqCell).
inline void fill_mpq(VpSlot& vp, MpqCell* cell, uint64_t pos, uint64_t header,
                     const void* payload) {
  copy_payload(cell->data, payload,
               std::min<uint32_t>(wire::mp_word::length(header), wire::kMpPayloadBytes));
  vp.mpq.publish(cell, pos, header);
}

// A data packet of kind MP (not part of a transfer) that reached its NIC, written into the target
// VP's MPQ as the NIC writes it: what every live receiver of such a packet does (the daemon, a
// process on its direct path). kWrite: delivered; otherwise nothing was written and the caller
// holds the packet (kWait) or refuses it.
inline chip::MpqAdmit deliver_mp_packet(VpSlot& vp, const wire::DataPacket& mp) {
  const wire::DataHead& h = mp.head;
  uint64_t pos;
  MpqCell* c;
  const chip::MpqAdmit a = claim_mpq(vp, &c, &pos);
  if (a != chip::MpqAdmit::kWrite) return a;
  fill_mpq(vp, c, pos,
           wire::mp_word::make(wire::MpKind::kUser,
                               (h.flags & wire::kDataFlagInterrupt) ? wire::kMpFlagInterrupt : 0,
                               h.dest_vp, h.src_vp, h.src_node, static_cast<uint8_t>(h.bytes), 0),
           mp.payload.data());
  vp.mps_received.fetch_add(1, std::memory_order_relaxed);
  return a;
}

}  // namespace galaxy::live
