#include "nm/fault_ledger.h"

#include <algorithm>

namespace galaxy::nm {

FaultLedger::End FaultLedger::link_of(uint32_t chip, uint8_t port) const {
  if (chip < plan_->num_nodes() && port < plan_->num_ports(chip))
    if (auto peer = plan_->peer({chip, port}))
      return std::min(End{chip, port}, End{peer->node, peer->port});
  return {chip, port};
}

std::vector<LinkChange> FaultLedger::advance(int64_t& known, int64_t to, uint32_t chip,
                                             uint8_t port, bool reported) {
  std::vector<LinkChange> out;
  // Changes between the known one and `to`, oldest first; a long run keeps its last ones.
  const int64_t first =
      std::max(known + 1, to - static_cast<int64_t>(kMaxInferredChanges) + (reported ? 0 : 1));
  for (int64_t i = first; i <= to; ++i) {
    LinkChange c;
    c.chip = chip;
    c.port = port;
    c.up = i % 2 == 0;
    c.handshakes = static_cast<uint64_t>(i / 2);
    c.inferred = !(reported && i == to);
    inferred_ += c.inferred;
    out.push_back(c);
  }
  known = to;
  return out;
}

int64_t FaultLedger::link_index(uint32_t chip, uint8_t port, int64_t local, int64_t known) {
  EndState& e = ends_[{chip, port}];
  // Even offsets keep an index's parity, which is the link's state (up even, down odd).
  auto even_at_least = [](int64_t v) { return v + (v % 2 != 0 ? 1 : 0); };
  if (known >= 0) {
    if (e.last < 0 && local + e.offset < known) {
      // First seen behind the link: its chip counts from a later power-on. Numbered at the
      // link's last change, or one behind it when the read is older than that change.
      e.offset = even_at_least(known - local) - ((known - local) % 2 != 0 ? 2 : 0);
    } else if (e.last >= 0 && local < e.last) {
      // Its count went back: the chip restarted. Now at the link's state, or one change on.
      e.offset = even_at_least(known - local);
    }
  }
  e.last = local;
  return local + e.offset;
}

std::vector<LinkChange> FaultLedger::take(uint32_t chip, uint8_t port, bool up, uint64_t handshakes,
                                          bool reported) {
  const End link = link_of(chip, port);
  auto it = links_.find(link);
  const int64_t at =
      link_index(chip, port, index(up, handshakes), it == links_.end() ? -1 : it->second);
  if (it == links_.end()) {
    // The first word of a link: a report is its change; a read sets what is known, and is a
    // change when discovery had found the link otherwise (observe_state).
    links_[link] = at;
    auto found = states_.find(link);
    const std::optional<bool> was =
        found == states_.end() ? std::nullopt : std::optional<bool>(found->second);
    if (found != states_.end()) states_.erase(found);
    if (reported) return {LinkChange{chip, port, up, handshakes, false}};
    if (!was || *was == up) return {};
    ++inferred_;
    return {LinkChange{chip, port, up, handshakes, true}};
  }
  if (at <= it->second) {
    // A report: the other end's of this change, or one a read already proved. A read: older
    // than a report already taken. Nothing to add either way.
    merged_ += reported;
    return {};
  }
  return advance(it->second, at, chip, port, reported);
}

std::vector<LinkChange> FaultLedger::report(uint32_t chip, uint8_t port, bool up,
                                            uint64_t handshakes) {
  return take(chip, port, up, handshakes, true);
}

std::vector<LinkChange> FaultLedger::observe(uint32_t chip, uint8_t port, bool up,
                                             uint64_t handshakes) {
  return take(chip, port, up, handshakes, false);
}

std::vector<LinkChange> FaultLedger::observe_state(uint32_t chip, uint8_t port, bool up) {
  const End link = link_of(chip, port);
  auto it = links_.find(link);
  if (it == links_.end()) {
    // No report or read of the link yet: what discovery found is all that is known of it.
    auto [state, fresh] = states_.try_emplace(link, up);
    if (fresh || state->second == up) return {};
    state->second = up;
    ++inferred_;
    return {LinkChange{chip, port, up, 0, true}};
  }
  if ((it->second % 2 == 0) == up) return {};
  return advance(it->second, it->second + 1, chip, port, false);
}

bool FaultLedger::sequence_gap(uint32_t chip, uint16_t sequence) {
  auto [it, fresh] = expected_.try_emplace(chip, static_cast<uint16_t>(sequence + 1));
  if (fresh) return false;
  const uint16_t ahead = static_cast<uint16_t>(sequence - it->second);
  if (ahead >= 0x8000) return false;  // late: sent before ones already counted
  it->second = static_cast<uint16_t>(sequence + 1);
  return ahead != 0;
}

bool FaultLedger::missing_reports(uint32_t chip, uint64_t reported) {
  const auto next = static_cast<uint16_t>(reported);
  auto [it, fresh] = expected_.try_emplace(chip, next);
  if (fresh) return false;
  const uint16_t ahead = static_cast<uint16_t>(next - it->second);
  if (ahead == 0 || ahead >= 0x8000) return false;
  it->second = next;
  return true;
}

std::optional<bool> FaultLedger::believed_up(uint32_t chip, uint8_t port) const {
  const End link = link_of(chip, port);
  if (auto it = links_.find(link); it != links_.end()) return it->second % 2 == 0;
  if (auto it = states_.find(link); it != states_.end()) return it->second;
  return std::nullopt;
}

}  // namespace galaxy::nm
