#include "engine/live/forward.h"

#include "chip/data_vc.h"
#include "chip/forwarding.h"
#include "wire/mgmt.h"

namespace galaxy::live {

namespace {

// The live engine queues nothing at an output (same-host forwarding is synchronous, a link's
// frames wait in its window, not per port), so it measures no load: the choice falls to the
// destination's tie-break, which keeps one VP pair's packets on one path and in order.
bool port_up(Segment& seg, uint32_t chip, uint8_t p) {
  return seg.peer(chip, p).up.load(std::memory_order_relaxed) != 0;
}
uint64_t no_load(uint8_t) {
  return 0;
}

int choose_port(Segment& seg, uint32_t chip, chip::PortSet mask, uint32_t dest) {
  return chip::choose_data_output(
      mask, dest, [&](uint8_t p) { return port_up(seg, chip, p); }, no_load);
}

}  // namespace

void add_traffic(CounterLine& c, const wire::Traffic& t) {
  c.packets.fetch_add(t.packets, std::memory_order_relaxed);
  c.bytes.fetch_add(t.bytes, std::memory_order_relaxed);
  c.flits.fetch_add(t.flits, std::memory_order_relaxed);
}

void count_tx(Segment& seg, uint32_t chip, uint8_t port, const wire::Traffic& t,
              std::vector<CounterLine*>* record) {
  uint32_t local = seg.chip(chip).local;
  if (local == kNoLocal) return;
  CounterLine& c = seg.counters(local, port).tx;
  if (record)
    record->push_back(&c);
  else
    add_traffic(c, t);
}

void count_discard(Segment& seg, uint32_t chip, uint8_t in_port, const wire::Traffic& t) {
  seg.counters(seg.chip(chip).local, in_port)
      .rx.discards.fetch_add(t.packets, std::memory_order_relaxed);
}

void count_rx(Segment& seg, uint32_t chip, uint8_t port, const wire::Traffic& t,
              std::vector<CounterLine*>* record) {
  uint32_t local = seg.chip(chip).local;
  if (local == kNoLocal) return;
  CounterLine& c = seg.counters(local, port).rx;
  if (record)
    record->push_back(&c);
  else
    add_traffic(c, t);
}

Forwarded forward(Segment& seg, uint32_t chip, uint8_t out_port, uint32_t dest,
                  const wire::Traffic& t, std::vector<CounterLine*>* record) {
  Forwarded r;
  r.chip = chip;
  r.port = out_port;
  PeerInfo& link = seg.peer(chip, out_port);
  if (link.chip == kNoChip || !link.up.load(std::memory_order_relaxed)) {
    r.kind = Forwarded::Kind::kLinkDown;
    return r;
  }
  count_tx(seg, chip, out_port, t, record);
  if (link.crosses_hosts) {
    r.kind = Forwarded::Kind::kLeavesHost;
    return r;
  }
  return forward_arrived(seg, link.chip, link.port, dest, t, record);
}

namespace {

// NRC `chip` routes a packet that entered on `in_port` (chip/forwarding.h). The chosen port, or
// -1 with `r` saying why not; a packet it cannot route is discarded there and counted
// (DIRTY_DISCARDS; chip/refusal.h says who is told).
int route_at(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest, const wire::Traffic& t,
             bool counting, Forwarded& r) {
  r.chip = chip;
  r.port = in_port;
  const ChipInfo& info = seg.chip(chip);
  if (dest >= seg.num_chips() || info.local == kNoLocal) {
    r.kind = Forwarded::Kind::kNoRoute;
    return -1;
  }
  const chip::PortSet mask = seg.route_row(info.local, in_port)[dest].load();
  int out = choose_port(seg, chip, mask, dest);
  if (out < 0) {
    r.kind = out == chip::kNoDataRoute ? Forwarded::Kind::kNoRoute : Forwarded::Kind::kLinkDown;
    if (counting) count_discard(seg, chip, in_port, t);
  }
  return out;
}

}  // namespace

Forwarded forward_arrived(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                          const wire::Traffic& t, std::vector<CounterLine*>* record,
                          uint8_t hops_passed, uint8_t vc_class) {
  Forwarded r;
  r.vc_class = vc_class;
  for (unsigned hop = 0;; ++hop) {
    count_rx(seg, chip, in_port, t, record);
    r.chip = chip;
    r.port = in_port;
    r.hops = static_cast<uint8_t>(hop);
    r.hops_passed = static_cast<uint8_t>(hops_passed + hop);
    if (seg.chip(chip).type == static_cast<uint8_t>(wire::ChipType::kNic)) {
      r.kind = chip == dest ? Forwarded::Kind::kDelivered : Forwarded::Kind::kMisrouted;
      return r;
    }
    // The NRC's hop limit (chip/forwarding.h): a packet in a loop is discarded here.
    if (!chip::within_hop_limit(hops_passed + hop)) {
      r.kind = Forwarded::Kind::kHopLimit;
      if (record == nullptr) count_discard(seg, chip, in_port, t);
      return r;
    }
    const int out = route_at(seg, chip, in_port, dest, t, record == nullptr, r);
    if (out < 0) return r;
    PeerInfo& link = seg.peer(chip, static_cast<uint32_t>(out));
    r.vc_class = chip::next_vc_class(
        r.vc_class, seg.peer(chip, in_port).vc_rule.load(std::memory_order_relaxed),
        link.vc_rule.load(std::memory_order_relaxed));
    count_tx(seg, chip, static_cast<uint8_t>(out), t, record);
    if (link.crosses_hosts) {
      r.kind = Forwarded::Kind::kLeavesHost;
      r.port = static_cast<uint8_t>(out);
      r.hops_passed = static_cast<uint8_t>(hops_passed + hop + 1);
      return r;
    }
    chip = link.chip;
    in_port = link.port;
  }
}

Forwarded originate(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                    const wire::Traffic& t) {
  Forwarded r;
  r.chip = chip;
  r.port = in_port;
  const ChipInfo& info = seg.chip(chip);
  if (dest >= seg.num_chips() || info.local == kNoLocal) return r;  // kNoRoute
  const int out = chip::choose_own_output(
      info.num_ports, in_port, dest,
      [&](uint8_t p) { return seg.route_row(info.local, p)[dest].load(); },
      [&](uint8_t p) { return port_up(seg, chip, p); }, no_load,
      [&](uint8_t p) { return seg.peer(chip, p).chip == dest; });
  if (out < 0) {
    r.kind = out == chip::kNoDataRoute ? Forwarded::Kind::kNoRoute : Forwarded::Kind::kLinkDown;
    return r;
  }
  return forward(seg, chip, static_cast<uint8_t>(out), dest, t);
}

void PathTable::flush() {
  for (auto& [k, p] : paths_) p.flush();
}

PathCounters& ArrivalPaths::at(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                               uint8_t hops, uint8_t vc_class) {
  const uint64_t key = uint64_t{chip} << 40 | uint64_t{in_port} << 32 | uint64_t{dest} << 12 |
                       uint64_t{hops} << 4 | vc_class;
  return at_key(seg, key, [&](auto* lines) {
    return forward_arrived(seg, chip, in_port, dest, {}, lines, hops, vc_class);
  });
}

PathCounters& SendPaths::at(Segment& seg, uint32_t chip, uint8_t out_port, uint32_t dest) {
  const uint64_t key = uint64_t{chip} << 40 | uint64_t{out_port} << 32 | dest;
  return at_key(seg, key,
                [&](auto* lines) { return forward(seg, chip, out_port, dest, {}, lines); });
}

void set_vc_class(std::span<uint8_t> packet_bytes, uint8_t vc_class) {
  if (chip::vc_class_of(wire::flit_vc(packet_bytes)) == vc_class) return;
  if (auto head = chip::routable_head(packet_bytes))
    wire::set_flits_vc(packet_bytes, chip::data_vc(head->kind, vc_class));
}

}  // namespace galaxy::live
