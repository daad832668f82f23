#include "nm/trace.h"

#include <fmt/format.h>

#include <deque>

#include "chip/network_port.h"
#include "chip/registers.h"
#include "chip/rt_select.h"

namespace galaxy::nm {

namespace {

namespace reg = chip::reg;

uint16_t link_state_addr(uint8_t port) {
  return reg::port_register(port, reg::port::kLinkState);
}

}  // namespace

RouteEntryRead read_route_entry(Requester& requester, const MgmtTarget& nrc, unsigned num_ports,
                                uint8_t in_port, wire::ChipId dest_chip) {
  RouteEntryRead out;
  for (unsigned h = 0; h < chip::rt_halves(num_ports); ++h) {
    MgmtReply sel =
        call(requester,
             MgmtRequest::write(nrc, reg::kRtSelect, chip::rt_select_entry(in_port, dest_chip, h)));
    if (!sel.status.ok()) {
      out.failed = sel;
      return out;
    }
    MgmtReply data = call(requester, MgmtRequest::read(nrc, reg::kRtData));
    if (!data.status.ok()) {
      out.failed = data;
      return out;
    }
    out.ports |= chip::rt_data_ports(h, data.response.data.value[0]);
  }
  return out;
}

const char* trace_failure_name(TraceFailure f) {
  switch (f) {
    case TraceFailure::kNone:
      return "none";
    case TraceFailure::kNoRoute:
      return "no_route";
    case TraceFailure::kLinkDown:
      return "link_down";
    case TraceFailure::kLoop:
      return "loop";
    case TraceFailure::kTooLong:
      return "too_long";
    case TraceFailure::kNoAnswer:
      return "no_answer";
    case TraceFailure::kMisrouted:
      return "misrouted";
  }
  return "?";
}

Result<Trace> trace(Requester& requester, const FabricMap& map, uint32_t src, uint32_t dst) {
  const fabric::Topology& t = map.topology;
  if (src >= map.num_nodes() || dst >= map.num_nodes() || !t.is_nic(src) || !t.is_nic(dst))
    return make_error(
        Code::kInvalidArgument, 5400,
        fmt::format("trace endpoints {} -> {}: both must be NICs of the map", src, dst));
  if (src == dst)
    return make_error(Code::kInvalidArgument, 5401,
                      fmt::format("trace source and destination are the same NIC (node {})", src));
  const auto out = chip::planned_network_port(t, src);
  if (!out)
    return make_error(
        Code::kNotFound, 5402,
        fmt::format("source NIC {} ({}) is not attached to an NRC in the map", src, t.name(src)));

  Trace tr;
  tr.src_node = src;
  tr.dst_node = dst;
  tr.dst_chip = map.chip_id[dst];
  const uint64_t sent0 = requester.stats().sent;
  const Picoseconds t0 = requester.port().now();
  auto finish = [&](TraceFailure f, std::string reason) {
    tr.failure = f;
    tr.reason = std::move(reason);
    tr.reachable = f == TraceFailure::kNone;
    if (!tr.reachable && tr.failed_hop < 0) tr.failed_hop = static_cast<int>(tr.hops.size()) - 1;
    tr.requests = requester.stats().sent - sent0;
    tr.elapsed = requester.port().now() - t0;
    return tr;
  };
  auto no_answer = [&](uint32_t node, const MgmtReply& r) {
    tr.failed_hop = static_cast<int>(tr.hops.size());
    return finish(TraceFailure::kNoAnswer,
                  fmt::format("chip {} ({}) at hop {} does not answer: {}", map.chip_id[node],
                              t.name(node), tr.hops.size(), r.status.error().message));
  };

  std::vector<bool> visited(map.num_nodes(), false);
  fabric::PortRef at = *t.peer({src, *out});
  while (true) {
    const uint32_t v = at.node;
    const size_t k = tr.hops.size();
    if (visited[v]) {
      tr.failed_hop = static_cast<int>(k) - 1;
      return finish(TraceFailure::kLoop, fmt::format("loop: chip {} ({}) revisited at hop {}",
                                                     map.chip_id[v], t.name(v), k));
    }
    if (k >= kMaxTraceHops)
      return finish(
          TraceFailure::kTooLong,
          fmt::format("more than {} hops without reaching the destination", kMaxTraceHops));
    visited[v] = true;
    const MgmtTarget& target = map.target[v];
    TraceHop hop;
    hop.node = v;
    hop.chip_id = map.chip_id[v];
    hop.name = t.name(v);
    hop.in_port = at.port;
    RouteEntryRead entry =
        read_route_entry(requester, target, t.num_ports(v), at.port, tr.dst_chip);
    if (entry.failed) return no_answer(v, *entry.failed);
    hop.allowed = entry.ports;
    std::vector<uint8_t> ports{at.port};
    hop.allowed.for_each([&](unsigned p) { ports.push_back(static_cast<uint8_t>(p)); });
    std::vector<uint64_t> states(ports.size(), 0);
    for (size_t i = 0; i < ports.size(); i += 2) {
      MgmtRequest q = i + 1 < ports.size() ? MgmtRequest::read2(target, link_state_addr(ports[i]),
                                                                link_state_addr(ports[i + 1]))
                                           : MgmtRequest::read(target, link_state_addr(ports[i]));
      MgmtReply r = call(requester, q);
      if (!r.status.ok()) return no_answer(v, r);
      states[i] = r.response.data.value[0];
      if (i + 1 < ports.size()) states[i + 1] = r.response.data.value[1];
    }
    hop.in_link = {ports[0], states[0]};
    for (size_t i = 1; i < ports.size(); ++i) {
      hop.out_links.push_back({ports[i], states[i]});
      if (hop.out_links.back().up()) hop.usable.set(ports[i]);
    }
    hop.chosen = hop.usable.lowest();
    tr.hops.push_back(hop);

    if (hop.allowed.none())
      return finish(TraceFailure::kNoRoute,
                    fmt::format("no route to chip {} at hop {}: chip {} ({}) input port {} has an "
                                "empty port set",
                                tr.dst_chip, k, hop.chip_id, hop.name, hop.in_port));
    if (hop.usable.none()) {
      std::string list;
      for (const auto& l : hop.out_links)
        list += fmt::format("{}{}", list.empty() ? "" : ",", l.port);
      return finish(TraceFailure::kLinkDown,
                    fmt::format("link down on port {} of chip {} ({}) at hop {}: every allowed "
                                "port is down",
                                list, hop.chip_id, hop.name, k));
    }
    auto next = t.peer({v, static_cast<uint8_t>(hop.chosen)});
    if (!next)
      return finish(TraceFailure::kMisrouted,
                    fmt::format("port {} of chip {} ({}) at hop {} has no link in the map",
                                hop.chosen, hop.chip_id, hop.name, k));
    if (next->node == dst) return finish(TraceFailure::kNone, "");
    if (t.is_nic(next->node))
      return finish(TraceFailure::kMisrouted,
                    fmt::format("port {} of chip {} ({}) at hop {} leads to NIC {} ({}), not the "
                                "destination",
                                hop.chosen, hop.chip_id, hop.name, k, map.chip_id[next->node],
                                t.name(next->node)));
    at = *next;
  }
}

std::vector<chip::PortSet> minhop_port_sets(const FabricMap& map, uint32_t dst) {
  const fabric::Topology& t = map.topology;
  const uint32_t n = map.num_nodes();
  std::vector<uint32_t> dist(n, UINT32_MAX);
  std::vector<chip::PortSet> sets(n);
  if (dst >= n) return sets;
  // Link-count BFS from the destination; paths never pass through another NIC.
  std::deque<uint32_t> queue{dst};
  dist[dst] = 0;
  while (!queue.empty()) {
    uint32_t v = queue.front();
    queue.pop_front();
    if (t.is_nic(v) && v != dst) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (!peer || dist[peer->node] != UINT32_MAX) continue;
      dist[peer->node] = dist[v] + 1;
      queue.push_back(peer->node);
    }
  }
  for (uint32_t v = 0; v < n; ++v) {
    if (t.is_nic(v) || dist[v] == UINT32_MAX) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (peer && dist[peer->node] + 1 == dist[v] && (!t.is_nic(peer->node) || peer->node == dst))
        sets[v].set(p);
    }
  }
  return sets;
}

Status load_minhop_for(Requester& requester, const FabricMap& map, uint32_t dst) {
  const fabric::Topology& t = map.topology;
  if (dst >= map.num_nodes() || !t.is_nic(dst))
    return make_error(Code::kInvalidArgument, 5403,
                      fmt::format("min-hop destination node {} is not a NIC of the map", dst));
  std::vector<chip::PortSet> sets = minhop_port_sets(map, dst);
  unsigned failed = 0;
  std::string first_error;
  Code first_code = Code::kTimeout;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v) || sets[v].none()) continue;
    // Linked input ports only: the map may give an NRC more ports than the chip has (discovery
    // assumes the full radix), and the NMA refuses a mask naming absent ports.
    chip::PortSet inputs;
    for (uint8_t p = 0; p < t.num_ports(v); ++p)
      if (t.peer({v, p})) inputs.set(p);
    for (const chip::RtWrite& w :
         chip::rt_writes(inputs, map.chip_id[dst], 1, sets[v], t.num_ports(v)))
      requester.submit(
          MgmtRequest::write2(map.target[v], reg::kRtSelect, w.select, reg::kRtData, w.data),
          [&, v](const MgmtReply& r) {
            if (r.status.ok()) return;
            if (failed++ != 0) return;
            first_code = r.status.error().code;
            first_error = fmt::format("chip {} ({}): {}", map.chip_id[v], t.name(v),
                                      r.status.error().message);
          });
  }
  requester.run();
  if (failed)
    return make_error(first_code, 5404,
                      fmt::format("min-hop tables for chip {}: {} NRCs not programmed; first: {}",
                                  map.chip_id[dst], failed, first_error));
  return {};
}

}  // namespace galaxy::nm
