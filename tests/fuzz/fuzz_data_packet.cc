// libFuzzer target: a data packet as it arrives on a link (25-byte flits, decode_flit each) into
// decode_data_packet; a decoded packet re-encodes to the same flits and the same link bytes. The
// one-pass decoders (decode_clean_data_packet, decode_data_head_bytes) accept exactly what those
// accept, with the same packet.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/data_packet.h"
#include "wire/flit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  if (size > kFlitBytes * (kMaxDataPacketFlits + 2)) return 0;
  const std::span<const uint8_t> bytes(data, size);
  DataPacket fast;
  const bool clean = decode_clean_data_packet(bytes, &fast);
  if (size >= kFlitBytes) {  // the head alone, as an NRC reads it
    const std::optional<DataHead> head = decode_data_head_bytes(bytes);
    auto flit = decode_flit(bytes.first(kFlitBytes));
    auto slow = flit.ok() ? decode_data_head(*flit) : galaxy::Result<DataHead>(flit.error());
    if (head.has_value() != slow.ok() || (head && *head != *slow)) std::abort();
  }
  std::vector<Flit> flits;
  for (size_t off = 0; off + kFlitBytes <= size; off += kFlitBytes) {
    auto f = decode_flit(bytes.subspan(off, kFlitBytes));
    if (!f.ok()) {
      if (clean) std::abort();
      return 0;
    }
    flits.push_back(*f);
  }
  auto p = decode_data_packet(flits);
  if (!p.ok()) {
    (void)data_defect_name(data_defect_of(p.error()));
    if (clean) std::abort();
    return 0;
  }
  // Whole flits only count as the packet's bytes.
  if (clean != (size % kFlitBytes == 0)) std::abort();
  if (clean && (fast.head != p->head || fast.ext != p->ext || fast.payload != p->payload))
    std::abort();
  auto out = encode_data_packet(*p);
  if (!out.ok() || *out != flits) std::abort();
  std::vector<uint8_t> link(kMaxDataPacketLinkBytes);
  auto n = encode_data_packet_bytes(*p, link);
  if (!n.ok() || *n != flits.size() * kFlitBytes ||
      !std::equal(link.begin(), link.begin() + *n, data))
    std::abort();
  return 0;
}
