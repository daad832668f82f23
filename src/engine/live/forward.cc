#include "engine/live/forward.h"

#include <bit>

#include "wire/mgmt.h"

namespace galaxy::live {

namespace {

constexpr uint8_t kMaxHops = 64;

uint64_t flits_for(uint64_t packets, uint64_t bytes) {
  return packets + (bytes * 8 + 197) / 198;  // a head flit each, payload in 198-bit flits
}

// The output an NRC picks among the allowed ones: a fixed choice per destination (spread over
// the allowed set) so that the packets of one VP pair stay in order; a down link is skipped.
int choose_port(Segment& seg, uint32_t chip, uint32_t mask, uint32_t dest) {
  const int n = std::popcount(mask);
  if (n == 0) return -1;
  int skip = static_cast<int>(dest % static_cast<uint32_t>(n));
  for (int tries = 0; tries < n; ++tries) {
    uint32_t m = mask;
    for (int i = 0; i < (skip + tries) % n; ++i) m &= m - 1;
    int port = std::countr_zero(m);
    if (seg.peer(chip, static_cast<uint32_t>(port)).up.load(std::memory_order_relaxed)) return port;
  }
  return -2;
}

}  // namespace

void add_traffic(CounterLine& c, uint64_t packets, uint64_t bytes) {
  c.packets.fetch_add(packets, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
  c.flits.fetch_add(flits_for(packets, bytes), std::memory_order_relaxed);
}

void count_tx(Segment& seg, uint32_t chip, uint8_t port, uint64_t packets, uint64_t bytes,
              std::vector<CounterLine*>* record) {
  uint32_t local = seg.chip(chip).local;
  if (local == kNoLocal) return;
  CounterLine& c = seg.counters(local, port).tx;
  if (record)
    record->push_back(&c);
  else
    add_traffic(c, packets, bytes);
}

void count_rx(Segment& seg, uint32_t chip, uint8_t port, uint64_t packets, uint64_t bytes,
              std::vector<CounterLine*>* record) {
  uint32_t local = seg.chip(chip).local;
  if (local == kNoLocal) return;
  CounterLine& c = seg.counters(local, port).rx;
  if (record)
    record->push_back(&c);
  else
    add_traffic(c, packets, bytes);
}

Forwarded forward(Segment& seg, uint32_t chip, uint8_t out_port, uint32_t dest, uint64_t packets,
                  uint64_t bytes, std::vector<CounterLine*>* record) {
  Forwarded r;
  r.chip = chip;
  r.port = out_port;
  PeerInfo& link = seg.peer(chip, out_port);
  if (link.chip == kNoChip || !link.up.load(std::memory_order_relaxed)) {
    r.kind = Forwarded::Kind::kLinkDown;
    return r;
  }
  count_tx(seg, chip, out_port, packets, bytes, record);
  if (link.crosses_hosts) {
    r.kind = Forwarded::Kind::kLeavesHost;
    return r;
  }
  return forward_arrived(seg, link.chip, link.port, dest, packets, bytes, record);
}

Forwarded forward_arrived(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                          uint64_t packets, uint64_t bytes, std::vector<CounterLine*>* record) {
  Forwarded r;
  for (uint8_t hop = 0; hop < kMaxHops; ++hop) {
    count_rx(seg, chip, in_port, packets, bytes, record);
    r.chip = chip;
    r.port = in_port;
    r.hops = hop;
    const ChipInfo& info = seg.chip(chip);
    if (info.type == static_cast<uint8_t>(wire::ChipType::kNic)) {
      r.kind = chip == dest ? Forwarded::Kind::kDelivered : Forwarded::Kind::kMisrouted;
      return r;
    }
    if (dest >= seg.num_chips() || info.local == kNoLocal) {
      r.kind = Forwarded::Kind::kNoRoute;
      return r;
    }
    uint32_t mask = seg.route_row(info.local, in_port)[dest].load(std::memory_order_relaxed);
    int out = choose_port(seg, chip, mask, dest);
    if (out < 0) {
      r.kind = out == -1 ? Forwarded::Kind::kNoRoute : Forwarded::Kind::kLinkDown;
      if (!record)  // the NRC discards what it cannot route (DIRTY_DISCARDS)
        seg.counters(info.local, in_port).rx.discards.fetch_add(packets, std::memory_order_relaxed);
      return r;
    }
    PeerInfo& link = seg.peer(chip, static_cast<uint32_t>(out));
    count_tx(seg, chip, static_cast<uint8_t>(out), packets, bytes, record);
    if (link.crosses_hosts) {
      r.kind = Forwarded::Kind::kLeavesHost;
      r.port = static_cast<uint8_t>(out);
      return r;
    }
    chip = link.chip;
    in_port = link.port;
  }
  r.kind = Forwarded::Kind::kMisrouted;
  return r;
}

}  // namespace galaxy::live
