// Directed-route discovery of an InfiniBand subnet (docs/system.md 3, IBA 14.2.2): from the SM's
// own node, NodeInfo at every path; new switches are read whole (NodeDescription, SwitchInfo,
// PortInfo of every port) and every linked port's far side probed; a CA is entered through each
// of its linked ports. Requests are pipelined through IbRequester's window.
#pragma once

#include "base/status.h"
#include "nm/ib_requester.h"
#include "nm/ib_subnet.h"

namespace galaxy::nm {

// Errors only when the SM's own node does not answer; unreachable parts are `problems`.
Result<IbSubnet> discover_ib(IbRequester& requester);

}  // namespace galaxy::nm
