// Management operations whose answer is the same JSON in the standalone CLI, in the daemon's API
// and through the CLI's --server client: one implementation, three ways to reach it. Each runs
// on a discovered session (the caller holds it to itself).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chip/port_set.h"
#include "nm/bist.h"
#include "nmd/session.h"

namespace galaxy::nmd {

// Path trace between two NICs (docs/system.md 2.5.4), hop by hop; `locate` adds each hop's physical
// location and level from the described fabric. Unreachable is an answer (reachable = false).
Result<nlohmann::json> trace_op(Session& s, uint32_t src_node, uint32_t dst_node, bool load_minhop);

// One register read (value empty) or write; an NMA's refusal is an error whose message names
// the NMA's reason.
Result<nlohmann::json> register_op(Session& s, uint32_t node, const std::string& addr,
                                   const std::string* value);

// EEPROM read of `count` bytes at `addr`, or write of `bytes` (docs/system.md 2.2: six per packet).
Result<nlohmann::json> eeprom_op(Session& s, uint32_t node, uint64_t addr, size_t count,
                                 const std::vector<uint8_t>* bytes);

// Bulk register writes from a configuration text ({"writes": [{chip, addr, value}]}, nm/config.h)
// -> applied, failures per entry. Chips "all-nrc" / "all-nic" expand to every such chip.
Result<nlohmann::json> config_apply_op(Session& s, std::string_view text);

// The chip's configuration registers written into its EEPROM as boot image, read back and
// compared (nm/config.h write_eeprom_defaults).
Result<nlohmann::json> eeprom_defaults_op(Session& s, uint32_t node);

// Link BIST on the given ports (nm/bist.h) -> per link flits, errors, BER, verdict.
Result<nlohmann::json> bist_op(Session& s, const std::vector<nm::BistPort>& ports,
                               const nm::BistOptions& options);

// The ports of a 32-bit port set, ascending (route-table entries, trace hops).
std::vector<unsigned> ports_of(const chip::PortSet& set);

// "node is the management server's own NIC" check shared by the in-band operations.
Status require_remote(const Session& s, uint32_t node, const std::string& text);

}  // namespace galaxy::nmd
