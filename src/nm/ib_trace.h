// Path trace on an InfiniBand subnet (docs/system.md 2.5.4 on IBA's tables; what infiniband-diags'
// ibtracert does): from the switch the source port is cabled to, read at every hop the
// LinearForwardingTable block that holds the destination LID and the PortInfo of the port it
// names, by directed route (so the trace does not depend on the tables it reads), and follow the
// cabling discovery found until the destination port, or stop where a packet would be lost, with
// the reason. The same failures as a trace on Galaxy's fabrics (nm/trace.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "nm/ib_requester.h"
#include "nm/ib_subnet.h"
#include "nm/trace.h"

namespace galaxy::nm {

// IBA limits a directed route to 64 hops; a LID-routed packet has no limit, a loop-free route
// through a subnet no longer than that.
inline constexpr unsigned kMaxIbTraceHops = 64;

struct IbTraceHop {
  uint32_t node = kNoIbNode;  // a switch
  uint8_t in_port = 0;        // 0: the trace starts at this switch
  uint8_t out_port = 0;       // the LFT's entry (wire::kLftNoPort: none)
  uint8_t out_state = 0;      // the output port's IBA state (0: not read)
};

struct IbTrace {
  IbEndpoint src, dst;
  uint16_t dlid = 0;
  bool reachable = false;
  std::vector<IbTraceHop> hops;  // switches in path order; the failing one last
  TraceFailure failure = TraceFailure::kNone;
  int failed_hop = -1;  // index into hops
  std::string reason;
  uint64_t requests = 0;  // SMPs sent, retries included
};

// Errors only for bad endpoints (the same port twice, a port without a cable or a LID); an
// unreachable destination is an IbTrace with reachable = false.
Result<IbTrace> trace_ib(IbRequester& requester, const IbSubnet& subnet, IbEndpoint src,
                         IbEndpoint dst);

}  // namespace galaxy::nm
