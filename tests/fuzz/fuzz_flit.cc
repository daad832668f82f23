// libFuzzer target: decode_flit; a decoded flit re-encodes to the same 25 bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/flit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto f = decode_flit(in);
  if (!f.ok()) return 0;
  FlitBytes out = encode_flit(*f);
  if (std::memcmp(out.data(), data, kFlitBytes) != 0) std::abort();
  return 0;
}
