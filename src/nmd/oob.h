// The management server's side of the out-of-band path (docs/management.md "Out-of-band
// path"): one request to the monitor board of the chassis that holds a chip. On a simulated
// fabric the board answers on the simulator's clock; on a live fabric the board of the chip's
// host answers over TCP at the host's address and port. No discovery is needed: the board
// reaches a chip that is switched off or unreachable in band.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "nmd/session.h"
#include "wire/oob.h"

namespace galaxy::nmd {

// The operations by the names commands and the API use.
struct OobCommand {
  std::string_view name;
  wire::OobOp op;
  bool needs_register;  // read, write
  bool needs_value;     // write
  std::string_view help;
};
const std::vector<OobCommand>& oob_commands();
// E5724 an unknown name (the message lists the known ones).
Result<const OobCommand*> find_oob_command(std::string_view name);

// One request to the board of a live host over TCP (what oob_call does on a live fabric).
Result<wire::OobResponse> oob_tcp_call(const live::LiveHost& host, const wire::OobRequest& r);

// One request; *elapsed_ns: the round trip as the server saw it (simulated or wall clock).
// E5720-E5723, E5728-E5730 a live board that cannot be reached or answers wrongly; E5727 a
// chip the fabric does not have.
Result<wire::OobResponse> oob_call(Session& s, const wire::OobRequest& r, uint64_t* elapsed_ns);

// `command` on the chip named `chip` (plan names, ids, nic:<i>) as JSON: chip, name, operation,
// powered, the value read (temperature_c, voltage_mv, value), bus_us and elapsed_us. A board's
// refusal is an error with its id (chip/monitor_board.h).
Result<nlohmann::json> oob_op(Session& s, const std::string& chip, std::string_view command,
                              const std::string* address, const std::string* value);

}  // namespace galaxy::nmd
