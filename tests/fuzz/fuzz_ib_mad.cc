// libFuzzer target: decode_mad; a decoded MAD re-encodes to the same 256 bytes. Its data as a
// PerfMgt PortCounters answer (what a scan takes from any port's agent) decodes, or is refused,
// and re-encodes to the same counters.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/ib_mad.h"
#include "wire/ib_perf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto m = decode_mad(in);
  if (!m.ok()) return 0;
  auto out = encode_mad(*m);
  if (!out.ok() || std::memcmp(out->data(), data, size) != 0) std::abort();
  Mad as_answer = *m;
  as_answer.mgmt_class = MgmtClass::kPerformance;
  as_answer.method = MadMethod::kGetResp;
  as_answer.attribute_id = kPerfPortCounters;
  if (auto c = decode_port_counters(as_answer); c.ok()) {
    Mad again = as_answer;
    encode_port_counters(*c, again);
    auto back = decode_port_counters(again);
    if (!back.ok() || !(*back == *c)) std::abort();
  } else {
    std::abort();  // any 232 data bytes are some counters
  }
  return 0;
}
