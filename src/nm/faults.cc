#include "nm/faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "base/bits.h"
#include "chip/chip.h"
#include "chip/registers.h"

namespace galaxy::nm {

namespace {
std::string chip_name(const FabricMap& map, wire::ChipId chip) {
  auto it = map.node_of.find(chip);
  return it == map.node_of.end() ? fmt::format("chip{}", chip) : map.topology.name(it->second);
}
}  // namespace

Result<ReportingSetup> enable_fault_reporting(Requester& req, const FabricMap& map,
                                              uint64_t fault_mask,
                                              const std::function<bool(uint32_t node)>& include) {
  ReportingSetup out;
  Picoseconds start = req.port().now();
  const uint64_t dest = fault_dest_of(req.port());
  auto count = [&out](const MgmtReply& r) {
    if (!r.status.ok()) ++out.failed;
  };
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node || (include && !include(v))) continue;
    const MgmtTarget& t = map.target[v];
    // The report travels the chip's backward route: 105 bits in two registers, and its
    // extension (the high bits of ports above 31, or hops beyond 20) in a third.
    std::array<uint8_t, 22> bits{};
    if (!wire::encode_source_route(t.backward, bits, 0, true).ok()) continue;
    wire::encode_source_route_ext(t.backward, bits, wire::kSourceRouteBits);
    uint64_t lo = get_bits(bits, 0, 64), hi = get_bits(bits, 64, 41);
    uint64_t ext = get_bits(bits, wire::kSourceRouteBits, wire::kSourceRouteExtBits);
    req.submit(MgmtRequest::write2(t, chip::reg::kFaultRouteLo, lo, chip::reg::kFaultRouteHi, hi),
               count);
    req.submit(
        MgmtRequest::write2(t, chip::reg::kFaultDest, dest, chip::reg::kFaultMask, fault_mask),
        count);
    req.submit(MgmtRequest::write2(t, chip::reg::kFaultRouteExt, ext, chip::reg::kFaultEnable, 1),
               count);
    out.requests += 3;
    ++out.chips;
  }
  req.run();
  out.elapsed = req.port().now() - start;
  return out;
}

FaultRecord decode_fault(const wire::MgmtPacket& p, const FabricMap& map, Picoseconds now) {
  FaultRecord f;
  f.time = now;
  f.chip = p.src_id;
  f.port = p.data.fault_port;
  f.location = fmt::format("{}:{}", chip_name(map, p.src_id), p.data.fault_port);
  f.code = p.data.fault_code;
  f.cause = p.data.fault_code < chip::kFaultCodeCount
                ? std::string(chip::fault_name(static_cast<chip::FaultCode>(p.data.fault_code)))
                : fmt::format("code{}", p.data.fault_code);
  f.severity =
      p.data.fault_severity <= 3
          ? std::string(chip::severity_name(static_cast<chip::Severity>(p.data.fault_severity)))
          : "unknown";
  f.detail = p.data.fault_detail;
  f.sequence = p.transaction_id;
  return f;
}

Result<std::vector<PortLink>> read_port_links(Requester& req, const FabricMap& map, uint32_t node) {
  if (node >= map.num_nodes())
    return make_error(Code::kNotFound, 5040, fmt::format("no node {} in the map", node));
  const uint8_t ports = static_cast<uint8_t>(map.topology.num_ports(node));
  std::vector<PortLink> out(ports);
  Status failed;
  for (uint8_t p = 0; p < ports; ++p) {
    const uint16_t base = static_cast<uint16_t>(chip::reg::kPortBase + p * chip::reg::kPortStride);
    req.submit(MgmtRequest::read2(map.target[node], base + chip::reg::port::kLinkState,
                                  base + chip::reg::port::kHandshakes),
               [&out, &failed, p](const MgmtReply& r) {
                 if (!r.status.ok()) {
                   if (failed.ok()) failed = r.status;
                   return;
                 }
                 out[p].port = p;
                 out[p].up =
                     (r.response.data.value[0] & 3) == static_cast<uint64_t>(chip::LinkState::kUp);
                 out[p].handshakes = r.response.data.value[1];
               });
  }
  req.run();
  if (!failed.ok()) return failed.error();
  return out;
}

std::vector<FaultAuditRead> read_fault_audit(Requester& req, const FabricMap& map,
                                             const std::vector<uint32_t>& nodes) {
  std::vector<FaultAuditRead> out;
  for (uint32_t v : nodes) {
    if (v >= map.num_nodes()) continue;
    req.submit(MgmtRequest::read2(map.target[v], chip::reg::kFaultsReported, chip::reg::kFaultDest),
               [&out, v](const MgmtReply& r) {
                 if (r.status.ok())
                   out.push_back({v, r.response.data.value[0], r.response.data.value[1]});
               });
  }
  req.run();
  return out;
}

uint64_t fault_dest_of(const MgmtPort& port) {
  return chip::reg::encode_fault_dest(port.server_chip_id(), port.server_vp());
}

FabricMap without_links(const FabricMap& map, const std::vector<fabric::PortRef>& ends) {
  FabricMap out;
  const auto& t = map.topology;
  std::set<std::pair<uint32_t, uint8_t>> gone;
  for (fabric::PortRef e : ends) {
    gone.insert({e.node, e.port});
    if (e.node < t.num_nodes() && e.port < t.num_ports(e.node))
      if (auto peer = t.peer(e)) gone.insert({peer->node, peer->port});
  }
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    (void)out.topology.add_node(t.kind(v), t.num_ports(v), t.name(v), t.location(v), t.level(v));
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (!peer || peer->node < v || (peer->node == v && peer->port < p)) continue;
      if (!gone.count({v, p})) (void)out.topology.connect({v, p}, *peer);
    }
  out.chip_id = map.chip_id;
  out.node_of = map.node_of;
  out.target = map.target;
  out.hops = map.hops;
  out.server_node = map.server_node;
  return out;
}

Result<RegionUpdate> rediscover_region(Requester& req, FabricMap& map, wire::ChipId chip,
                                       uint8_t port) {
  return rediscover_region(req, map, std::vector<std::pair<wire::ChipId, uint8_t>>{{chip, port}});
}

Result<RegionUpdate> rediscover_region(
    Requester& req, FabricMap& map, const std::vector<std::pair<wire::ChipId, uint8_t>>& reported) {
  RegionUpdate out;
  const std::vector<MgmtTarget> before = map.target;
  // The reported links are down even if neither end can be read: out of the map first, so that
  // the reads below go by routes around them.
  std::vector<fabric::PortRef> reported_ends;
  std::vector<uint32_t> region;
  for (auto [chip, port] : reported) {
    auto it = map.node_of.find(chip);
    if (it == map.node_of.end()) continue;
    const uint32_t node = it->second;
    region.push_back(node);
    if (port < map.topology.num_ports(node))
      if (auto peer = map.topology.peer({node, port})) {
        region.push_back(peer->node);
        reported_ends.push_back({node, port});
        out.links_down.push_back({chip, port});
      }
  }
  if (region.empty())
    return make_error(Code::kNotFound, 5600,
                      fmt::format("fault from unknown chip {}",
                                  reported.empty() ? 0u : unsigned{reported[0].first}));
  std::sort(region.begin(), region.end());
  region.erase(std::unique(region.begin(), region.end()), region.end());
  if (!reported_ends.empty()) {
    map = without_links(map, reported_ends);
    recompute_routes(map);
  }
  // Re-read the peer identities of the chips at the ends (those still reachable), over their
  // routes as they now are.
  std::vector<std::pair<uint32_t, uint8_t>> down;
  std::vector<uint32_t> asked;
  std::set<uint32_t> answered;
  for (uint32_t v : region) {
    if (map.topology.is_nic(v) || map.hops[v] == UINT8_MAX) continue;
    asked.push_back(v);
    unsigned words = (map.topology.num_ports(v) + 1) / 2;
    for (unsigned w = 0; w < words; w += 2) {
      auto a0 = static_cast<uint16_t>(chip::reg::kPeerSummaryWide + w);
      MgmtRequest r = w + 1 < words
                          ? MgmtRequest::read2(map.target[v], a0, static_cast<uint16_t>(a0 + 1))
                          : MgmtRequest::read(map.target[v], a0);
      ++out.requests;
      req.submit(r, [&, v, w](const MgmtReply& reply) {
        if (!reply.status.ok()) return;
        answered.insert(v);
        for (uint8_t i = 0; i < reply.response.data.count; ++i)
          for (int half = 0; half < 2; ++half) {
            auto p = static_cast<uint8_t>(2 * (w + i) + half);
            if (p >= map.topology.num_ports(v)) continue;
            auto word = static_cast<uint32_t>(reply.response.data.value[i] >> (32 * half));
            bool up = chip::reg::decode_wide_peer(word).linked;
            if (!up && map.topology.peer({v, p})) down.push_back({v, p});
          }
      });
    }
  }
  req.run();
  // A chip that answers none of its reads over a route around the reported links is gone (it
  // died, or every way to it did): all of its links leave the map. A sweep may find it again.
  for (uint32_t v : asked) {
    if (answered.count(v)) continue;
    out.silent.push_back(map.chip_id[v]);
    for (uint8_t p = 0; p < map.topology.num_ports(v); ++p)
      if (map.topology.peer({v, p})) down.push_back({v, p});
  }
  std::vector<fabric::PortRef> found;
  std::set<std::pair<uint32_t, uint8_t>> listed;
  for (auto [v, p] : down) {
    auto peer = map.topology.peer({v, p});
    if (!peer || listed.count({v, p})) continue;
    listed.insert({v, p});
    listed.insert({peer->node, peer->port});
    found.push_back({v, p});
    out.links_down.push_back({map.chip_id[v], p});
  }
  if (!found.empty()) {
    map = without_links(map, found);
    recompute_routes(map);
  }
  // Links among chips the server no longer reaches leave the map too, as a sweep would not find
  // them: the server cannot vouch for them, and routes must not join NICs through them.
  std::vector<fabric::PortRef> beyond;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (map.hops[v] == UINT8_MAX)
      for (uint8_t p = 0; p < map.topology.num_ports(v); ++p)
        if (map.topology.peer({v, p})) beyond.push_back({v, p});
  if (!beyond.empty()) map = without_links(map, beyond);
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (map.hops[v] == UINT8_MAX)
      ++out.unreachable;
    else if (!(map.target[v].forward == before[v].forward &&
               map.target[v].backward == before[v].backward))
      ++out.routes_changed;
  }
  return out;
}

}  // namespace galaxy::nm
