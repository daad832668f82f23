// libFuzzer target: decode_cp; a decoded CP re-encodes to the same 128 bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/cp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto c = decode_cp(in);
  if (!c.ok()) return 0;
  auto out = encode_cp(*c);
  if (!out.ok() || std::memcmp(out->data(), data, size) != 0) std::abort();
  return 0;
}
