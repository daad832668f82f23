// A chain of NRCs with one NIC each, for hop-count tests: the NIC on NRC0 reaches NRC i with
// i NRCs between (h = i). n <= 32 keeps the far end within the 31 hops of a source route
// (docs/system.md 2.2; beyond 20 the long variant, docs/protocol.md).
#include <fmt/format.h>

#include "fabric/builder_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {

Result<Topology> build_line(const Spec& spec) {
  GALAXY_TRY(spec.check_known({"n"}));
  if (!spec.positional.empty())
    return make_error(
        Code::kInvalidArgument, 3600,
        fmt::format("line: unexpected positional parameter '{}'", spec.positional.front()));
  auto n_r = spec.get_int("n", 4, 1, 32);
  GALAXY_TRY(n_r);
  const uint32_t n = static_cast<uint32_t>(*n_r);
  // NRC ports: 0 = its NIC, 1 = towards NRC i-1, 2 = towards NRC i+1.
  detail::TopologyWriter w(2 * n, 4 * n);
  uint32_t previous = kNoNode;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t nrc = w.node(NodeKind::kNrc, 3, fmt::format("nrc{:02}", i),
                          Location{-1, -1, static_cast<int32_t>(i), -1, "router"}, 1);
    uint32_t nic = w.node(NodeKind::kNic, 1, fmt::format("nic{:02}", i),
                          Location{-1, -1, static_cast<int32_t>(i), -1, "nic"}, 0);
    w.link(nrc, 0, nic, 0);
    if (previous != kNoNode) w.link(previous, 2, nrc, 1);
    previous = nrc;
  }
  return w.finish();
}

}  // namespace galaxy::fabric
