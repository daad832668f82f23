// The net file ibsim (ibsim-utils) simulates an InfiniBand subnet from:
//
//   Switch  36 "l1/sw00000"
//   [1]     "nic00000"[1]
//
//   Hca     1 "nic00000"
//   [1]     "l1/sw00000"[1]
//
// NRCs become switches and NICs HCAs, with the topology's names as node ids; IB numbers ports
// from 1, so our port k is IB port k+1 (as the ibnetdiscover reader maps them back).
#pragma once

#include <string>

#include "fabric/topology.h"

namespace galaxy::fabric {

std::string write_ibsim_net(const Topology& topology);

}  // namespace galaxy::fabric
