// libFuzzer target: a data packet as it arrives on a link (25-byte flits, decode_flit each) into
// decode_data_packet; a decoded packet re-encodes to the same flits.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/data_packet.h"
#include "wire/flit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  if (size > kFlitBytes * (kMaxDataPacketFlits + 2)) return 0;
  std::vector<Flit> flits;
  for (size_t off = 0; off + kFlitBytes <= size; off += kFlitBytes) {
    auto f = decode_flit(std::span<const uint8_t>(data + off, kFlitBytes));
    if (!f.ok()) return 0;
    flits.push_back(*f);
  }
  auto p = decode_data_packet(flits);
  if (!p.ok()) {
    (void)data_defect_name(data_defect_of(p.error()));
    return 0;
  }
  auto out = encode_data_packet(*p);
  if (!out.ok() || *out != flits) std::abort();
  return 0;
}
