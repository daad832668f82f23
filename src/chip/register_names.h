// Symbolic register names (docs/registers.md) shared by the subcommands that take an address:
// common registers by name ("SCRATCH"), per-port ones as "PORT<n>.<NAME>", or a number.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace galaxy::chip {

// Decimal or 0x-prefixed hexadecimal, at most `max`; `field` names the input in errors.
Result<uint64_t> parse_u64(const std::string& field, const std::string& text, uint64_t max);
// A register address from a name, PORT<n>.<NAME> or a number below the NRC address space.
Result<uint16_t> parse_register(const std::string& text, const std::string& field = "--addr");
// The name of an address ("PORT3.LINK_STATE"), or "" when it has none.
std::string register_name(uint16_t addr);

}  // namespace galaxy::chip
