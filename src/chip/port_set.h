// A set of output ports of one switch (a route table entry, docs/system.md 1.2): bit p = port p,
// for ports 0 .. kMaxSwitchPorts - 1. Two 64-bit words, so an entry of a 24- or 36-port switch
// costs the same single compare as before and a 128-port switch is no special case.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <compare>
#include <cstdint>
#include <ostream>
#include <string>

#include "base/radix.h"

namespace galaxy::chip {

class PortSet {
 public:
  static constexpr unsigned kWords = 2;
  static_assert(kMaxSwitchPorts <= 64 * kWords);

  constexpr PortSet() = default;
  // Ports 0-63 from one word, as TH-2's registers and older records carry them.
  constexpr PortSet(uint64_t low) : w_{low, 0} {}  // NOLINT: a word is a port set
  // The set of one port (`port` < kMaxSwitchPorts).
  static constexpr PortSet of(unsigned port) {
    // Both words written without indexing by the port, so a set built in a loop stays in
    // registers (route computation builds billions of them on large fabrics).
    const uint64_t bit = uint64_t{1} << (port % 64);
    return from_words(port < 64 ? bit : 0, port < 64 ? 0 : bit);
  }
  static constexpr PortSet from_words(uint64_t low, uint64_t high = 0) {
    PortSet s;
    s.w_[0] = low;
    s.w_[1] = high;
    return s;
  }
  // Ports 0 .. n - 1.
  static constexpr PortSet first(unsigned n) {
    PortSet s;
    for (unsigned i = 0; i < kWords; ++i) {
      const unsigned lo = 64 * i;
      s.w_[i] = n >= lo + 64 ? ~uint64_t{0} : n > lo ? (uint64_t{1} << (n - lo)) - 1 : 0;
    }
    return s;
  }

  constexpr uint64_t word(unsigned i) const { return w_[i]; }
  constexpr bool test(unsigned port) const {
    return port < 64 * kWords && (((port < 64 ? w_[0] : w_[1]) >> (port % 64)) & 1) != 0;
  }
  constexpr PortSet& set(unsigned port) { return *this |= of(port); }
  constexpr PortSet& reset(unsigned port) { return *this &= ~of(port); }
  constexpr bool any() const { return (w_[0] | w_[1]) != 0; }
  constexpr bool none() const { return !any(); }
  constexpr explicit operator bool() const { return any(); }
  constexpr int count() const { return std::popcount(w_[0]) + std::popcount(w_[1]); }
  // The lowest port in the set, -1 if empty.
  constexpr int lowest() const {
    if (w_[0]) return std::countr_zero(w_[0]);
    if (w_[1]) return 64 + std::countr_zero(w_[1]);
    return -1;
  }
  // The set without its lowest port.
  constexpr PortSet without_lowest() const {
    PortSet s = *this;
    if (s.w_[0])
      s.w_[0] &= s.w_[0] - 1;
    else
      s.w_[1] &= s.w_[1] - 1;
    return s;
  }
  // f(port) for every port in the set, lowest first.
  template <class F>
  constexpr void for_each(F&& f) const {
    for (unsigned i = 0; i < kWords; ++i)
      for (uint64_t m = w_[i]; m != 0; m &= m - 1)
        f(static_cast<unsigned>(64 * i + static_cast<unsigned>(std::countr_zero(m))));
  }
  // Any port at or above `n` (a set a switch of n ports cannot hold).
  constexpr bool beyond(unsigned n) const { return (*this & ~first(n)).any(); }

  constexpr PortSet operator~() const { return from_words(~w_[0], ~w_[1]); }
  constexpr PortSet& operator&=(const PortSet& o) {
    w_[0] &= o.w_[0];
    w_[1] &= o.w_[1];
    return *this;
  }
  constexpr PortSet& operator|=(const PortSet& o) {
    w_[0] |= o.w_[0];
    w_[1] |= o.w_[1];
    return *this;
  }
  constexpr PortSet& operator^=(const PortSet& o) {
    w_[0] ^= o.w_[0];
    w_[1] ^= o.w_[1];
    return *this;
  }
  friend constexpr PortSet operator&(PortSet a, const PortSet& b) { return a &= b; }
  friend constexpr PortSet operator|(PortSet a, const PortSet& b) { return a |= b; }
  friend constexpr PortSet operator^(PortSet a, const PortSet& b) { return a ^= b; }
  constexpr bool operator==(const PortSet&) const = default;
  constexpr auto operator<=>(const PortSet&) const = default;

 private:
  uint64_t w_[kWords] = {0, 0};
};

// "0x..." as one hexadecimal number, port 0 the lowest bit.
inline std::string to_hex(const PortSet& s) {
  return s.word(1) ? fmt::format("0x{:x}{:016x}", s.word(1), s.word(0))
                   : fmt::format("0x{:x}", s.word(0));
}

inline std::ostream& operator<<(std::ostream& os, const PortSet& s) {
  return os << to_hex(s);
}

}  // namespace galaxy::chip
