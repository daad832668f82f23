// libglex on the live engine: the NIC inside the application process (docs/live.md).
// Operations whose path stays on this host run here, in the caller's thread: the route tables
// and port counters of the shared segment, the target's MPQ written directly, RDMA as one copy
// (a memcpy into shared registered memory, else cross-memory attach). Operations that leave the
// host and management descriptors go to the host's fabric daemon through the egress ring.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "glex/device.h"

namespace galaxy::glex {

// fabric: a fabric name or a live: spec ("" = $GLEX_FABRIC or "galaxy"); host: "" = $GLEX_HOST
// or the only host of that fabric with a segment here; nic: chip id, -1 = $GLEX_NIC or the
// local NIC number ($GLEX_RANK mod local NICs).
Result<std::unique_ptr<glex_device>> open_live_device(const std::string& fabric,
                                                      const std::string& host, int32_t nic);

}  // namespace galaxy::glex
