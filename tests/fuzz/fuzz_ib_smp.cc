// libFuzzer target: decode_smp and the SM's attribute decoders (answers from any SMA on a
// subnet are untrusted). A decoded directed-route SMP re-encodes to the same 256 bytes; a
// LID-routed one keeps its header, M_Key and data (its reserved bytes are not kept).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/ib_smp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  auto s = decode_smp(std::span<const uint8_t>(data, size));
  if (!s.ok()) return 0;
  auto out = encode_smp(*s);
  if (!out.ok()) std::abort();
  // Bytes 36-63 of a directed-route SMP are reserved and not kept.
  if (s->directed) {
    if (std::memcmp(out->data(), data, 36) != 0 ||
        std::memcmp(out->data() + 64, data + 64, 192) != 0)
      std::abort();
  } else if (std::memcmp(out->data(), data, 32) != 0 ||
             std::memcmp(out->data() + 64, data + 64, 64) != 0) {
    std::abort();
  }
  // Every attribute decoder on the data, whatever the attribute says.
  // NodeInfo's fields fill its first 40 bytes.
  if (auto n = decode_node_info(s->data);
      n.ok() && std::memcmp(encode_node_info(*n).data(), s->data.data(), 40) != 0)
    std::abort();
  (void)decode_node_description(s->data);
  PortInfo p{s->data};
  PortInfo q = p.for_set();
  if (q.lid() != p.lid() || q.port_state() != 0) std::abort();
  if (encode_sm_info(decode_sm_info(s->data))[20] != s->data[20]) std::abort();
  (void)sm_state_name(decode_sm_info(s->data).sm_state);
  (void)smp_status_text(s->status);
  return 0;
}
