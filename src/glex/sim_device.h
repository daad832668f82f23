// libglex on the simulated engine. The host program is sequential and runs beside the event
// loop: each call costs calibrated host time (host_send, host_receive; host_wakeup when it had
// to wait on an empty MPQ), and waiting runs the simulator until a packet lands or time is up.
#pragma once

#include <memory>

#include "engine/sim/sim_fabric.h"
#include "glex/device.h"

namespace galaxy::glex {

std::unique_ptr<glex_device> open_sim_device(sim::SimFabric& fabric, uint32_t nic_node);

}  // namespace galaxy::glex
