// libFuzzer target: decode_mp; a decoded MP re-encodes to the same 128 bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/mp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto m = decode_mp(in);
  if (!m.ok()) return 0;
  auto out = encode_mp(*m);
  if (!out.ok() || std::memcmp(out->data(), data, size) != 0) std::abort();
  return 0;
}
