// libFuzzer target: decode_source_route at the bit offset given by the first byte; the route
// re-encodes to the same 105 bits (a long one, of more than 20 hops, with the extension
// allowed); with its 60-bit extension after it (wide or long), the same 165 bits.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "base/bits.h"
#include "wire/source_route.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  if (size < 1) return 0;
  size_t offset = data[0] % 16;
  auto buf = in.subspan(1);
  auto r = decode_source_route(buf, offset);
  if (!r.ok()) return 0;
  std::vector<uint8_t> out(buf.size(), 0);
  if (!encode_source_route(*r, out, offset, r->is_long()).ok()) std::abort();
  for (size_t bit = 0; bit < kSourceRouteBits; bit += 35) {
    if (galaxy::get_bits(out, offset + bit, 35) != galaxy::get_bits(buf, offset + bit, 35)) {
      std::abort();
    }
  }
  const size_t ext = offset + kSourceRouteBits;
  if (buf.size() * 8 < ext + kSourceRouteExtBits) return 0;
  SourceRoute wide = *r;
  if (!decode_source_route_ext(wide, buf, ext).ok()) return 0;
  std::fill(out.begin(), out.end(), 0);
  if (!encode_source_route(wide, out, offset, true).ok()) std::abort();
  encode_source_route_ext(wide, out, ext);
  for (size_t bit = 0; bit < kSourceRouteBits + kSourceRouteExtBits; bit += 33) {
    const unsigned n =
        static_cast<unsigned>(std::min<size_t>(33, kSourceRouteBits + kSourceRouteExtBits - bit));
    if (galaxy::get_bits(out, offset + bit, n) != galaxy::get_bits(buf, offset + bit, n))
      std::abort();
  }
  return 0;
}
