// Counters scan of an InfiniBand subnet (docs/system.md 2.5.2 on IBA's performance management, what
// perfquery reads one port at a time): the PortCounters of every linked switch port and every
// CA port with a LID, LID-routed to the node's performance management agent through the SM's
// window, with each port's state as discovery read it. A port whose agent does not answer is
// reported with the reason; the scan goes on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "nm/ib_requester.h"
#include "nm/ib_subnet.h"
#include "wire/ib_perf.h"

namespace galaxy::nm {

struct IbPortScan {
  IbEndpoint port;
  uint16_t lid = 0;   // the LID the request went to (a switch's port 0)
  uint8_t state = 0;  // IBA port state, from discovery
  bool read = false;  // counters answered
  std::string error;  // why not
  wire::PortCounters counters;
  // The error counters, added: a port worth a look when non-zero.
  uint64_t errors() const;
};

struct IbScan {
  std::vector<IbPortScan> ports;  // node order, then port
  uint64_t read = 0, failed = 0;
  uint64_t requests = 0;  // GMPs sent, retries included
};

// Errors only when the transport fails; ports without a LID (a subnet no SM brought up) are
// reported as not read. `only_node`: that node's ports alone.
Result<IbScan> scan_ib(IbRequester& requester, const IbSubnet& subnet,
                       uint32_t only_node = kNoIbNode);

}  // namespace galaxy::nm
