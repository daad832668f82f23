// The management step of a chip (docs/system.md 2.4), written once and called by both engines:
// where a management packet that arrived on a port goes, the NMA serving a request the chip
// absorbed, and the NMA's packets leaving by the ports their routes name. The simulator charges
// time between serving and releasing a response (NmaWork says what the request cost); the live
// engine releases it at once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "chip/chip.h"
#include "chip/nma.h"

namespace galaxy::chip {

struct MgmtArrival {
  enum class Action : uint8_t {
    kForward,  // NRC: out of `out_port` (the head flit's hop count has been advanced)
    kToNma,    // a request for this chip's NMA: serve_nma
    kToHost,   // NIC: a response or fault report for a VP: DMA into its MPQ (Nic::receive_mgmt)
    kDrop,     // NRC: malformed, misrouted or the next port is down (counted as dirty)
  };
  Action action = Action::kDrop;
  uint8_t out_port = 0;
};

MgmtArrival accept_mgmt(Chip& c, uint8_t in_port, std::span<uint8_t> packet);

// Serves a request absorbed by `c` at `now_ps` (the engine's clock). nullopt: nothing to answer
// — not a management packet (a dirty packet, counted on port 0) or one the NMA drops (not for
// this chip, no way back) or a chip switched off.
std::optional<NmaOutcome> serve_nma(Chip& c, std::span<const uint8_t> packet, uint64_t now_ps);

// Hands the NMA's queued packets (responses before fault reports) to send(port, bytes).
template <class Send>
void drain_nma(Chip& c, Send&& send) {
  while (auto out = c.nma().pop_output()) send(out->port, out->bytes);
}

}  // namespace galaxy::chip
