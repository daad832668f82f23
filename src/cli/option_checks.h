// Numeric options of every subcommand are checked by one of these CLI11 validators before the
// command runs: the value must be a finite number (no nan, no inf, no overflow, no negative
// number wrapped into an unsigned one) inside the option's documented range. A bad value stops
// the command with a non-zero exit and names the option, the value and the range:
//   --reps: E9701 out_of_range: -3 is outside [1, 1000]
// The range also shows in --help ("INT:[1, 1000]"). Usage:
//   c->add_option("--reps", o->reps, "...")->check(integer_in(1, 1000));
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace galaxy::cli {

// Which ends of a real range are included.
enum class Bounds : uint8_t {
  kClosed,     // [lo, hi]
  kAboveLow,   // (lo, hi]: e.g. a time or a load that must be positive
  kBelowHigh,  // [lo, hi): e.g. a probability that must stay below 1
};

// A real number (decimal or exponent notation) in the range.
CLI::Validator real_in(double lo, double hi, Bounds bounds = Bounds::kClosed);

// An integer, decimal or 0x hex, in [lo, hi]. A decimal with a leading 0 is refused: CLI11 would
// read it as octal.
CLI::Validator integer_in(int64_t lo, uint64_t hi);

// Any value of a uint64_t option (seeds, masks): refuses a sign and values beyond 2^64 - 1
// rather than letting them wrap or saturate.
CLI::Validator any_uint64();

// A --peers list (cli/peers.h parse_peer_list): ucx, libfabric, openmpi, or none.
CLI::Validator peer_list();

}  // namespace galaxy::cli
