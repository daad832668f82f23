#include "wire/crc16.h"

#include <array>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr uint16_t kPolynomial = 0x1021;

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) {
      c = static_cast<uint16_t>((c & 0x8000) ? (c << 1) ^ kPolynomial : c << 1);
    }
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kTable = make_table();

uint16_t feed_byte(uint16_t crc, uint8_t byte) {
  return static_cast<uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ byte) & 0xFF]);
}

}  // namespace

namespace {
// Slicing by 16: kSlices[k][x] is the CRC (from 0) of byte x followed by k zero bytes, so sixteen
// bytes fold in with sixteen independent lookups instead of sixteen dependent steps.
constexpr size_t kSliceCount = 16;
constexpr std::array<std::array<uint16_t, 256>, kSliceCount> make_slices() {
  std::array<std::array<uint16_t, 256>, kSliceCount> t{};
  t[0] = make_table();
  for (size_t k = 1; k < kSliceCount; ++k)
    for (unsigned x = 0; x < 256; ++x) {
      const uint16_t prev = t[k - 1][x];
      t[k][x] = static_cast<uint16_t>((prev << 8) ^ t[0][prev >> 8]);
    }
  return t;
}
constexpr std::array<std::array<uint16_t, 256>, kSliceCount> kSlices = make_slices();
}  // namespace

namespace {
// Sixteen bytes a step by the tables, then eight, then one.
uint16_t crc16_tables(const uint8_t* p, size_t n, uint16_t crc) {
  for (; n >= 16; n -= 16, p += 16) {
    uint16_t c = static_cast<uint16_t>(kSlices[15][(p[0] ^ (crc >> 8)) & 0xFF] ^
                                       kSlices[14][(p[1] ^ crc) & 0xFF]);
    for (size_t i = 2; i < 16; ++i) c ^= kSlices[15 - i][p[i]];
    crc = c;
  }
  for (; n >= 8; n -= 8, p += 8) {
    crc = static_cast<uint16_t>(kSlices[7][(p[0] ^ (crc >> 8)) & 0xFF] ^
                                kSlices[6][(p[1] ^ crc) & 0xFF] ^ kSlices[5][p[2]] ^
                                kSlices[4][p[3]] ^ kSlices[3][p[4]] ^ kSlices[2][p[5]] ^
                                kSlices[1][p[6]] ^ kSlices[0][p[7]]);
  }
  for (; n > 0; --n, ++p) crc = feed_byte(crc, *p);
  return crc;
}
}  // namespace

#if defined(__x86_64__)
namespace {
// x^k mod P (P = x^16 + x^12 + x^5 + 1), as a polynomial of degree < 16.
constexpr uint64_t x_pow_mod(unsigned k) {
  uint32_t r = 1;
  for (unsigned i = 0; i < k; ++i) {
    r <<= 1;
    if (r & 0x10000) r ^= 0x11021;
  }
  return r;
}

#define GALAXY_CLMUL __attribute__((target("pclmul,ssse3")))

// 16 bytes as a polynomial, most significant byte first.
GALAXY_CLMUL __m128i load_reversed(const uint8_t* at) {
  const __m128i reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)), reverse);
}

// X folded forward over `bits` more bits and added to D: X_hi (x^(bits+64) mod P) +
// X_lo (x^bits mod P) + D, with `by` = constants<bits>().
GALAXY_CLMUL __m128i fold(__m128i x, __m128i by, __m128i d) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, by, 0x11), _mm_clmulepi64_si128(x, by, 0x00)), d);
}

template <unsigned kBits>
GALAXY_CLMUL __m128i constants() {
  constexpr uint64_t kHi = x_pow_mod(kBits + 64);  // at compile time
  constexpr uint64_t kLo = x_pow_mod(kBits);
  return _mm_set_epi64x(static_cast<long long>(kHi), static_cast<long long>(kLo));
}

// Carry-less multiplication folds 16 bytes a step: with the data read most significant byte
// first, the state X = X_hi x^64 + X_lo followed by 16 more bytes D is congruent to
// X_hi (x^192 mod P) + X_lo (x^128 mod P) + D (fold). From 128 bytes on, four states fold
// 64-byte blocks side by side. What is left, 16 bytes, goes through the table.
GALAXY_CLMUL uint16_t crc16_folded(const uint8_t* p, size_t n, uint16_t crc) {
  const __m128i k128 = constants<128>();
  const __m128i seed = _mm_set_epi64x(static_cast<long long>(uint64_t{crc} << 48), 0);
  __m128i x;
  if (n >= 128) {
    // Four independent states over 64-byte blocks (the multiplier's latency overlaps), each
    // folded 512 bits a step, then folded into one.
    __m128i s[4] = {_mm_xor_si128(load_reversed(p), seed), load_reversed(p + 16),
                    load_reversed(p + 32), load_reversed(p + 48)};
    p += 64;
    n -= 64;
    const __m128i k512 = constants<512>();
    for (; n >= 64; n -= 64, p += 64)
      for (int i = 0; i < 4; ++i) s[i] = fold(s[i], k512, load_reversed(p + 16 * i));
    x = fold(s[0], constants<384>(), fold(s[1], constants<256>(), fold(s[2], k128, s[3])));
  } else {
    x = _mm_xor_si128(load_reversed(p), seed);
    p += 16;
    n -= 16;
  }
  for (; n >= 16; n -= 16, p += 16) x = fold(x, k128, load_reversed(p));
  const __m128i reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  alignas(16) uint8_t rest[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(rest), _mm_shuffle_epi8(x, reverse));
  return crc16_tables(p, n, crc16_tables(rest, sizeof rest, 0));
}

// The same four states side by side in one 512-bit register (lane i: the block at 16 i), and
// two such registers over 128-byte blocks, folded 1,024 bits a step: where the CPU multiplies
// four pairs in one instruction (VPCLMULQDQ), a 32 KiB link frame costs a quarter as much.
// (The zero-masked broadcasts and extracts: GCC 12's plain ones read an undefined register.)
#define GALAXY_VCLMUL __attribute__((target("vpclmulqdq,avx512f,avx512bw,pclmul,ssse3")))

GALAXY_VCLMUL __m512i load_reversed512(const uint8_t* at) {
  const __m512i reverse = _mm512_maskz_broadcast_i32x4(
      0xFFFF, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_shuffle_epi8(_mm512_loadu_si512(at), reverse);
}

template <unsigned kBits>
GALAXY_VCLMUL __m512i constants512() {
  return _mm512_maskz_broadcast_i32x4(0xFFFF, constants<kBits>());
}

GALAXY_VCLMUL __m512i fold512(__m512i x, __m512i by, __m512i d) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, by, 0x11),
                                   _mm512_clmulepi64_epi128(x, by, 0x00), d, 0x96);  // a^b^c
}

// From 256 bytes on.
GALAXY_VCLMUL uint16_t crc16_folded512(const uint8_t* p, size_t n, uint16_t crc) {
  const __m128i seed = _mm_set_epi64x(static_cast<long long>(uint64_t{crc} << 48), 0);
  __m512i a =
      _mm512_xor_si512(load_reversed512(p), _mm512_inserti32x4(_mm512_setzero_si512(), seed, 0));
  __m512i b = load_reversed512(p + 64);
  p += 128;
  n -= 128;
  const __m512i k1024 = constants512<1024>();
  for (; n >= 128; n -= 128, p += 128) {
    a = fold512(a, k1024, load_reversed512(p));
    b = fold512(b, k1024, load_reversed512(p + 64));
  }
  a = fold512(a, constants512<512>(), b);
  __m128i x = fold(_mm512_maskz_extracti32x4_epi32(0xF, a, 0), constants<384>(),
                   fold(_mm512_maskz_extracti32x4_epi32(0xF, a, 1), constants<256>(),
                        fold(_mm512_maskz_extracti32x4_epi32(0xF, a, 2), constants<128>(),
                             _mm512_maskz_extracti32x4_epi32(0xF, a, 3))));
  const __m128i k128 = constants<128>();
  for (; n >= 16; n -= 16, p += 16) x = fold(x, k128, load_reversed(p));
  const __m128i reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  alignas(16) uint8_t rest[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(rest), _mm_shuffle_epi8(x, reverse));
  return crc16_tables(p, n, crc16_tables(rest, sizeof rest, 0));
}

bool has_vclmul() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

bool has_clmul() {
  static const bool has = [] {
    __builtin_cpu_init();  // may run before the CPU model is known (a static initializer)
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
  }();
  return has;
}
}  // namespace
#endif

uint16_t crc16(std::span<const uint8_t> data, uint16_t crc) {
#if defined(__x86_64__)
  if (data.size() >= 256 && has_vclmul()) return crc16_folded512(data.data(), data.size(), crc);
  if (data.size() >= 48 && has_clmul()) return crc16_folded(data.data(), data.size(), crc);
#endif
  return crc16_tables(data.data(), data.size(), crc);
}

// The range is read as consecutive 8-bit values (get_bits, the last one possibly shorter),
// each fed most significant bit first; on whole bytes this equals crc16().
uint16_t crc16_bits(std::span<const uint8_t> data, size_t offset, size_t width, uint16_t crc) {
  if (offset + width > data.size() * 8) return crc;  // callers check bounds; never read past
  size_t end = offset + width;
  // Whole 8-bit values go through the tables, sixteen at a time: straight from the buffer when
  // they are its bytes, else gathered first (a management packet's first flit starts its CRC
  // at bit 10).
  if (offset % 8 == 0) {
    const size_t bytes = width / 8;
    crc = crc16_tables(data.data() + offset / 8, bytes, crc);
    offset += bytes * 8;
  } else {
    uint8_t gathered[64];
    while (offset + 8 <= end) {
      size_t n = 0;
      for (; n < sizeof gathered && offset + 8 <= end; ++n, offset += 8)
        gathered[n] = static_cast<uint8_t>(get_bits(data, offset, 8));
      crc = crc16_tables(gathered, n, crc);
    }
  }
  unsigned rest = static_cast<unsigned>(end - offset);
  if (rest > 0) {
    uint64_t v = get_bits(data, offset, rest);
    for (unsigned i = rest; i-- > 0;) {
      bool in = (v >> i) & 1;
      bool top = crc & 0x8000;
      crc = static_cast<uint16_t>(crc << 1);
      if (in != top) crc ^= kPolynomial;
    }
  }
  return crc;
}

}  // namespace galaxy::wire
