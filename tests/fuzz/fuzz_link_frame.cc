// libFuzzer target: decode_link_frame, and a Link fed hostile datagrams.
// 1. The input as one datagram: a decoded frame re-encodes to the same bytes.
// 2. The input as records (u16 big-endian length, then that many bytes, CRC rewritten so the
//    state machine rather than the CRC check is exercised) fed to a Link that is Up with a peer
//    whose legitimate traffic is interleaved: the Link never crashes and keeps its bounds.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "engine/live/link.h"
#include "wire/crc16.h"

namespace {

using galaxy::live::Link;
using galaxy::live::LinkConfig;

LinkConfig config(uint64_t epoch) {
  LinkConfig c;
  c.link_id = 7;
  c.epoch = epoch;
  c.window = 16;
  c.rx_credits = 16;
  c.max_payload = 64;
  c.dead_after_ns = 50'000'000;
  c.handshake_interval_ns = 1'000'000;
  return c;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::live;
  std::span<const uint8_t> in(data, size);
  auto f = decode_link_frame(in);
  if (f.ok()) {
    std::vector<uint8_t> out;
    encode_link_frame(*f, &out);
    check(out.size() == size && std::memcmp(out.data(), data, size) == 0);
  }

  // The peer (epoch 100) and the Link under attack (epoch 200), brought Up.
  Link peer(config(100)), link(config(200));
  uint64_t now = 1'000'000'000;
  std::vector<uint8_t> d;
  auto pump = [&] {
    while (peer.pop_outgoing(&d)) link.on_datagram(d, now);
    while (link.pop_outgoing(&d)) peer.on_datagram(d, now);
  };
  peer.on_timer(now);
  link.on_timer(now);
  for (int i = 0; i < 4; ++i) pump();
  check(link.state() == LinkState::kUp);

  std::vector<uint8_t> record;
  uint8_t payload[3] = {1, 2, 3};
  size_t pos = 0;
  while (pos + 2 <= size) {
    size_t n = std::min<size_t>((size_t{data[pos]} << 8) | data[pos + 1], size - pos - 2);
    record.assign(data + pos + 2, data + pos + 2 + n);
    pos += 2 + n;
    if (record.size() >= 2) {
      uint16_t crc = galaxy::wire::crc16(std::span<const uint8_t>(record.data(), n - 2));
      record[n - 2] = static_cast<uint8_t>(crc >> 8);
      record[n - 1] = static_cast<uint8_t>(crc);
    }
    link.on_datagram(record, now);
    if (peer.can_send()) check(peer.send(payload, now).ok());
    if (link.can_send()) check(link.send(payload, now).ok());
    now += 100'000;
    if (link.next_deadline_ns() <= now) link.on_timer(now);
    if (peer.next_deadline_ns() <= now) peer.on_timer(now);
    pump();
    while (link.pop_delivered(&d)) check(d.size() <= kMaxLinkPayload);
    check(link.in_flight() <= link.config().window);
    check(link.delivered_pending() <= link.config().rx_credits);
    check(link.next_deadline_ns() > 0);
  }
  return 0;
}
