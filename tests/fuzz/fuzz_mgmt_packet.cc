// libFuzzer target: decode_mgmt_packet and peek_mgmt_head; a decoded packet re-encodes to the same
// bytes, peek agrees with it, and a hop-count rewrite keeps it valid.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/mgmt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto head = peek_mgmt_head(in);
  auto p = decode_mgmt_packet(in);
  if (!p.ok()) return 0;
  auto out = encode_mgmt_packet(*p);
  if (!out.ok() || std::memcmp(out->data(), data, size) != 0) std::abort();
  if (!head.ok() || head->hop_count != p->hop_count || head->nmp_type != p->nmp_type ||
      head->route_hop_num != p->active_route().hop_num) {
    std::abort();
  }
  if (head->hop_count < head->route_hop_num &&
      head->next_port != p->active_route().hops[head->hop_count]) {
    std::abort();
  }
  MgmtPacketBytes rewritten = *out;
  set_mgmt_hop_count(rewritten, 0);
  auto again = decode_mgmt_packet(rewritten);
  if (!again.ok() || again->hop_count != 0) std::abort();
  return 0;
}
