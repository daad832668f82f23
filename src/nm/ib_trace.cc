#include "nm/ib_trace.h"

#include <fmt/format.h>

#include <optional>

namespace galaxy::nm {
namespace {

using wire::MadMethod;
using wire::SmpAttr;

// One Get by directed route, waited for: a trace goes hop by hop.
Result<wire::SmpData> get(IbRequester& rq, SmpAttr attr, uint32_t modifier,
                          const std::vector<uint8_t>& path) {
  auto smp = wire::Smp::directed_request(MadMethod::kGet, attr, modifier, path);
  if (!smp) return smp.error();
  std::optional<Result<wire::SmpData>> answer;
  rq.submit(*smp, wire::kPermissiveLid, [&answer](const Status& s, const wire::Smp& a) {
    if (s)
      answer.emplace(a.data);
    else
      answer.emplace(s.error());
  });
  GALAXY_TRY(rq.run());
  if (!answer) return make_error(Code::kTimeout, 7144, "trace: a request ended without an answer");
  return std::move(*answer);
}

}  // namespace

Result<IbTrace> trace_ib(IbRequester& rq, const IbSubnet& net, IbEndpoint src, IbEndpoint dst) {
  for (const IbEndpoint& e : {src, dst})
    if (e.node >= net.nodes.size() || e.port >= net.nodes[e.node].ports.size())
      return make_error(Code::kInvalidArgument, 7145, "trace: an endpoint outside the subnet");
  if (src == dst)
    return make_error(Code::kInvalidArgument, 7146,
                      fmt::format("trace: {} is both ends", net.name(src.node)));
  IbTrace tr;
  tr.src = src;
  tr.dst = dst;
  tr.dlid = net.held_lid(dst);
  if (tr.dlid == 0)
    return make_error(
        Code::kInvalidArgument, 7147,
        fmt::format("trace: {} port {} holds no LID (has an SM brought the subnet up?)",
                    net.name(dst.node), dst.port));
  const uint64_t sent_before = rq.stats().sent;
  auto finish = [&](TraceFailure f, std::string reason) {
    tr.failure = f;
    tr.reachable = f == TraceFailure::kNone;
    if (!tr.reachable) {
      tr.failed_hop = static_cast<int>(tr.hops.size()) - 1;
      tr.reason = std::move(reason);
    }
    tr.requests = rq.stats().sent - sent_before;
    return tr;
  };
  // Where a packet from the source enters the first switch.
  uint32_t at = src.node;
  uint8_t in_port = 0;
  if (!net.nodes[src.node].is_switch()) {
    const IbPort& p = net.nodes[src.node].ports[src.port];
    if (!p.linked())
      return make_error(
          Code::kInvalidArgument, 7148,
          fmt::format("trace: {} port {} has no cable", net.name(src.node), src.port));
    at = p.peer_node;
    in_port = p.peer_port;
    if (!net.nodes[at].is_switch()) {  // two CAs cabled to each other
      if (IbEndpoint{at, in_port} == dst) return finish(TraceFailure::kNone, "");
      return finish(TraceFailure::kMisrouted,
                    fmt::format("the cable leads to {}, not the destination", net.name(at)));
    }
  }
  std::vector<bool> visited(net.nodes.size(), false);
  while (true) {
    if (tr.hops.size() == kMaxIbTraceHops)
      return finish(TraceFailure::kTooLong, fmt::format("more than {} switches", kMaxIbTraceHops));
    if (visited[at]) {
      tr.hops.push_back({at, in_port});
      return finish(TraceFailure::kLoop, fmt::format("{} again: the route loops", net.name(at)));
    }
    visited[at] = true;
    tr.hops.push_back({at, in_port});
    IbTraceHop& hop = tr.hops.back();
    const IbNode& sw = net.nodes[at];
    auto block = get(rq, SmpAttr::kLinearForwardingTable, tr.dlid / wire::kLftBlockLids, sw.path);
    if (!block)
      return finish(TraceFailure::kNoAnswer,
                    fmt::format("LinearForwardingTable: {}", block.error().message));
    hop.out_port = (*block)[tr.dlid % wire::kLftBlockLids];
    if (hop.out_port == wire::kLftNoPort)
      return finish(TraceFailure::kNoRoute, fmt::format("no entry for LID {}", tr.dlid));
    if (hop.out_port == 0) {
      if (at == dst.node) return finish(TraceFailure::kNone, "");
      return finish(TraceFailure::kMisrouted,
                    fmt::format("LID {} is this switch's own, not the destination's", tr.dlid));
    }
    if (hop.out_port >= sw.ports.size())
      return finish(TraceFailure::kNoRoute,
                    fmt::format("the entry for LID {} is port {} of {}", tr.dlid, hop.out_port,
                                sw.ports.size() - 1));
    auto info = get(rq, SmpAttr::kPortInfo, hop.out_port, sw.path);
    if (!info)
      return finish(TraceFailure::kNoAnswer,
                    fmt::format("PortInfo of port {}: {}", hop.out_port, info.error().message));
    hop.out_state = wire::PortInfo{*info}.port_state();
    if (hop.out_state != static_cast<uint8_t>(wire::IbPortState::kActive))
      return finish(TraceFailure::kLinkDown, fmt::format("port {} is {}", hop.out_port,
                                                         wire::ib_port_state_name(hop.out_state)));
    const IbPort& out = sw.ports[hop.out_port];
    if (!out.linked())
      return finish(
          TraceFailure::kLinkDown,
          fmt::format("port {} had no cable when the subnet was discovered", hop.out_port));
    if (!net.nodes[out.peer_node].is_switch()) {
      if (IbEndpoint{out.peer_node, out.peer_port} == dst) return finish(TraceFailure::kNone, "");
      return finish(TraceFailure::kMisrouted,
                    fmt::format("port {} leads to {} port {}", hop.out_port,
                                net.name(out.peer_node), out.peer_port));
    }
    at = out.peer_node;
    in_port = out.peer_port;
  }
}

}  // namespace galaxy::nm
