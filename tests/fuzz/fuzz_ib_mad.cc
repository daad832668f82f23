// libFuzzer target: decode_mad; a decoded MAD re-encodes to the same 256 bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/ib_mad.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto m = decode_mad(in);
  if (!m.ok()) return 0;
  auto out = encode_mad(*m);
  if (!out.ok() || std::memcmp(out->data(), data, size) != 0) std::abort();
  return 0;
}
