#include "nm/ib_scan.h"

#include <fmt/format.h>

namespace galaxy::nm {

uint64_t IbPortScan::errors() const {
  return wire::port_counter_errors(counters);
}

Result<IbScan> scan_ib(IbRequester& rq, const IbSubnet& net, uint32_t only_node) {
  IbScan scan;
  for (uint32_t n = 0; n < net.nodes.size(); ++n) {
    if (only_node != kNoIbNode && n != only_node) continue;
    const IbNode& node = net.nodes[n];
    for (uint32_t p = 1; p < node.ports.size(); ++p) {
      const IbPort& port = node.ports[p];
      if (node.is_switch() ? !port.linked() : !port.entered) continue;
      IbPortScan s;
      s.port = {n, static_cast<uint8_t>(p)};
      s.lid = net.held_lid(node.is_switch() ? IbEndpoint{n, 0} : s.port);
      s.state = port.known ? port.info.port_state() : 0;
      scan.ports.push_back(std::move(s));
    }
  }
  const uint64_t sent_before = rq.stats().sent;
  for (size_t i = 0; i < scan.ports.size(); ++i) {
    IbPortScan& s = scan.ports[i];
    if (s.lid == 0) {
      s.error = "no LID (has an SM brought the subnet up?)";
      continue;
    }
    rq.submit_gmp(wire::port_counters_get(s.port.port), s.lid,
                  [&s](const Status& st, const wire::Mad& answer) {
                    if (!st) {
                      s.error = st.error().message;
                      return;
                    }
                    auto c = wire::decode_port_counters(answer);
                    if (!c) {
                      s.error = c.error().message;
                      return;
                    }
                    s.counters = *c;
                    s.read = true;
                  });
  }
  GALAXY_TRY(rq.run());
  for (const IbPortScan& s : scan.ports) (s.read ? scan.read : scan.failed) += 1;
  scan.requests = rq.stats().sent - sent_before;
  return scan;
}

}  // namespace galaxy::nm
