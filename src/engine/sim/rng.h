// Deterministic pseudo-random numbers for the simulator: xoshiro256** (Blackman & Vigna 2018)
// seeded through splitmix64, so a seed gives the same integer sequence on every platform and
// compiler (std::mt19937 is portable too, but std::*_distribution are not and it is slower).
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>

namespace galaxy::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { this->seed(seed); }

  // Every seed, including 0, gives a valid (non-zero) state.
  void seed(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& word : s_) word = splitmix64(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // [0, 1) with 53 random bits: every value is a multiple of 2^-53.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n) without modulo bias (Lemire 2019, multiply-and-reject). n must be > 0.
  uint64_t below(uint64_t n) {
    assert(n > 0);
    u128 m = static_cast<u128>(next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
      while (low < threshold) {
        m = static_cast<u128>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  bool bernoulli(double p) { return uniform() < p; }

  // How many of n independent trials of probability p succeed (a binomial draw), by skipping
  // from one success to the next with geometric gaps: O(successes), for the rare events of a
  // link's bit errors (for p > 1/2, the failures are counted instead).
  uint64_t binomial(uint64_t n, double p) {
    if (!(p > 0) || n == 0) return 0;
    if (p >= 1) return n;
    if (p > 0.5) return n - binomial(n, 1 - p);
    const double log_q = std::log1p(-p);
    uint64_t hits = 0;
    for (double at = 0;;) {
      at += std::floor(std::log(1.0 - uniform()) / log_q) + 1;  // the next success's trial
      if (at > static_cast<double>(n)) return hits;
      ++hits;
    }
  }

  // Exponentially distributed with the given mean (inverse transform; 1 - u is in (0, 1] so the
  // logarithm is finite). Integer draws are bit-identical everywhere; this one goes through
  // std::log, whose last bit may differ between C libraries.
  double exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

 private:
  __extension__ typedef unsigned __int128 u128;

  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t s_[4];
};

}  // namespace galaxy::sim
