#include "chip/mgmt_step.h"

#include "chip/nrc.h"

namespace galaxy::chip {

MgmtArrival accept_mgmt(Chip& c, uint8_t in_port, std::span<uint8_t> packet) {
  // A chip switched off takes nothing (what was on its links when they went down is lost).
  if (!c.powered()) return {MgmtArrival::Action::kDrop, 0};
  if (c.type() == wire::ChipType::kNrc) {
    MgmtRouting r = static_cast<Nrc&>(c).route_mgmt(in_port, packet);
    switch (r.action) {
      case MgmtRouting::Action::kForward:
        return {MgmtArrival::Action::kForward, r.out_port};
      case MgmtRouting::Action::kAbsorb:
        return {MgmtArrival::Action::kToNma, 0};
      case MgmtRouting::Action::kDrop:
        break;
    }
    return {MgmtArrival::Action::kDrop, 0};
  }
  // A NIC: requests to its NMA (request FIFO, flow 2), everything else up to the host (flow 4),
  // where Nic::receive_mgmt checks it and discards a dirty one into the error buffer.
  auto head = wire::peek_mgmt_head(packet);
  if (head.ok() && wire::is_request(head->nmp_type)) return {MgmtArrival::Action::kToNma, 0};
  return {MgmtArrival::Action::kToHost, 0};
}

std::optional<NmaOutcome> serve_nma(Chip& c, std::span<const uint8_t> packet, uint64_t now_ps) {
  if (!c.powered()) return std::nullopt;
  c.advance_thermal(now_ps);  // TEMPERATURE and VOLTAGE read as of now
  auto outcome = c.nma().process(packet, now_ps);
  if (!outcome.ok()) {
    c.count_dirty(0);
    return std::nullopt;
  }
  if (outcome->dropped) return std::nullopt;
  return *outcome;
}

}  // namespace galaxy::chip
