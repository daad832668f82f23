// libglex on a `sim:` fabric run by a simulation server (`galaxy simd`, sim_server.h) in another
// process: the device forwards every call to it.
#pragma once

#include <memory>
#include <string>

#include "glex/device.h"

namespace galaxy::glex {

// Connects to the server of `fabric` (simwire::socket_path) and takes NIC `nic` (a chip id; -1:
// $GLEX_NIC, else the ($GLEX_RANK mod NICs)-th NIC).
Result<std::unique_ptr<glex_device>> open_sim_client(const std::string& fabric, int32_t nic);

}  // namespace galaxy::glex
