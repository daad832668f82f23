// libFuzzer target: decode_flit + decode_data_head; a decoded head re-encodes to the same flit.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/data_packet.h"
#include "wire/flit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto f = decode_flit(in);
  if (!f.ok()) return 0;
  auto h = decode_data_head(*f);
  if (!h.ok()) return 0;
  auto out = encode_data_head(*h, f->kind == FlitKind::kHeadTail);
  if (!out.ok() || !(*out == *f)) std::abort();
  FlitBytes bytes = encode_flit(*out);
  if (std::memcmp(bytes.data(), data, kFlitBytes) != 0) std::abort();
  return 0;
}
