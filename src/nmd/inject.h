// Fault injection on a simulated fabric, the test aid for active fault reporting (docs/system.md
// 2.5.3): a link cut or mended, a whole chip's links cut, or a chip made to raise a fault code.
// One implementation for `galaxy inject` and the daemon's POST /api/inject: it changes the
// simulated world, lets `window_us` of simulated time pass (0: none; the daemon's own loop takes
// the reports) and answers which links changed state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "nmd/session.h"

namespace galaxy::nmd {

struct InjectRequest {
  std::string action;  // link-down, link-up, chip-down, fault
  uint32_t chip = 0;   // plan node (= chip id on every engine), reachable or not
  int port = -1;       // link-down, link-up, fault
  std::string code;    // fault: a fault name (crc_error_burst) or its number 0-7
  uint32_t window_us = 100;
};

// The actions and what each needs, for help texts and errors.
inline constexpr const char* kInjectActions = "link-down, link-up, chip-down or fault";

// E9231: `action` is none of kInjectActions.
Status check_inject_action(const std::string& action);

// E9231 an unknown action, E8219 a port the chip does not have, E8220 a port without a link,
// E9234 a fault code that is none; E9232 (in the answer's fault_status_error) when FAULT_STATUS
// could not be read back. Refused on a live fabric (require_simulated).
Result<nlohmann::json> inject_op(Session& s, const InjectRequest& r);

}  // namespace galaxy::nmd
