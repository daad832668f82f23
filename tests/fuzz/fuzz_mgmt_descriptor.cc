// libFuzzer target: decode_mgmt_descriptor; a decoded descriptor re-encodes to the same 64 (or,
// the wide variant, 128) bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/mgmt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto d = decode_mgmt_descriptor(in);
  if (!d.ok()) return 0;
  auto out = encode_mgmt_descriptor(*d);
  if (!out.ok() || out->size() != size || std::memcmp(out->data(), data, size) != 0) std::abort();
  return 0;
}
