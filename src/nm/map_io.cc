#include "nm/map_io.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "fabric/io.h"
#include "wire/mgmt.h"

namespace galaxy::nm {

std::string write_map(const FabricMap& map) {
  nlohmann::json head{{"format", "galaxy-map"},
                      {"version", kMapFormatVersion},
                      {"server_node", map.server_node},
                      {"exact_ranges", map.exact_ranges},
                      {"chip_id", map.chip_id}};
  return head.dump() + "\n" + fabric::write_json(map.topology);
}

Result<FabricMap> read_map(std::string_view text, std::string_view source) {
  auto bad = [&](int id, const std::string& what) {
    return make_error(Code::kInvalidArgument, id,
                      fmt::format("{}: not a fabric map: {}", excerpt(source), what));
  };
  const size_t eol = text.find('\n');
  if (text.empty() || eol == std::string_view::npos)
    return bad(5700,
               "a map is a line of JSON followed by the topology (galaxy discover "
               "--save-map writes one)");
  const nlohmann::json head = nlohmann::json::parse(text.substr(0, eol), nullptr, false);
  // Every field read by find and its type checked: a field of another type is an error, never
  // an exception.
  auto field = [&head](const char* name) -> const nlohmann::json& {
    static const nlohmann::json kAbsent;
    const auto it = head.find(name);
    return it == head.end() ? kAbsent : *it;
  };
  if (head.is_discarded() || !head.is_object() || field("format") != "galaxy-map")
    return bad(5701, "the first line is not {\"format\": \"galaxy-map\", ...}");
  if (field("version") != kMapFormatVersion)
    return bad(5702, fmt::format("version = {}; this galaxy reads version {}",
                                 excerpt(json_text(field("version"))), kMapFormatVersion));
  auto topology = fabric::read_json(text.substr(eol + 1), source);
  if (!topology.ok()) return topology.error();
  FabricMap m;
  m.topology = std::move(*topology);
  const uint32_t n = m.topology.num_nodes();
  const nlohmann::json& ids = field("chip_id");
  if (!ids.is_array() || ids.size() != n)
    return bad(5703, fmt::format("chip_id must list one chip id per node ({} nodes)", n));
  const nlohmann::json& server = field("server_node");
  if (!server.is_number_unsigned() || server.get<uint64_t>() >= n ||
      !m.topology.is_nic(static_cast<uint32_t>(server.get<uint64_t>())))
    return bad(5704, fmt::format("server_node = {} is not a NIC of the map's {} nodes",
                                 excerpt(json_text(server)), n));
  m.server_node = static_cast<uint32_t>(server.get<uint64_t>());
  const nlohmann::json& exact = field("exact_ranges");
  if (!exact.is_null() && !exact.is_boolean())
    return bad(5707,
               fmt::format("exact_ranges = {} is not true or false", excerpt(json_text(exact))));
  m.exact_ranges = exact.is_boolean() && exact.get<bool>();
  m.chip_id.resize(n);
  m.target.resize(n);
  m.hops.assign(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    const nlohmann::json& id = ids[v];
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= wire::kUnconfiguredId)
      return bad(5705, fmt::format("chip_id[{}] = {} is not a chip id (0-{})", v,
                                   excerpt(json_text(id)), wire::kUnconfiguredId - 1));
    const auto chip = static_cast<wire::ChipId>(id.get<uint64_t>());
    if (!m.node_of.emplace(chip, v).second)
      return bad(5706,
                 fmt::format("chip id {} is given to nodes {} and {}", chip, m.node_of[chip], v));
    m.chip_id[v] = chip;
    m.target[v].chip_id = chip;
    m.target[v].type = m.topology.is_nic(v) ? wire::ChipType::kNic : wire::ChipType::kNrc;
  }
  m.target[m.server_node] = MgmtTarget{m.chip_id[m.server_node], wire::ChipType::kNic, {}, {}};
  recompute_routes(m);
  return m;
}

Status check_map_against(const FabricMap& map, const fabric::Topology& plan) {
  auto differs = [](const std::string& what) {
    return make_error(Code::kInvalidArgument, 5708,
                      fmt::format("the map is not of this fabric: {}; run galaxy discover "
                                  "--save-map again",
                                  what));
  };
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    const uint32_t chip = map.chip_id[v];
    if (chip >= plan.num_nodes())
      return differs(fmt::format("chip id {} (map node {}) is not a chip of the fabric's {}", chip,
                                 v, plan.num_nodes()));
    if (plan.kind(chip) != map.topology.kind(v) ||
        plan.num_ports(chip) != map.topology.num_ports(v))
      return differs(
          fmt::format("chip {} is a {} with {} ports in the fabric, a {} with {} in "
                      "the map",
                      chip, fabric::node_kind_name(plan.kind(chip)), plan.num_ports(chip),
                      fabric::node_kind_name(map.topology.kind(v)), map.topology.num_ports(v)));
    for (uint8_t p = 0; p < map.topology.num_ports(v); ++p) {
      const auto peer = map.topology.peer({v, p});
      if (!peer) continue;
      const auto planned = plan.peer({chip, p});
      const uint32_t peer_chip = map.chip_id[peer->node];
      if (!planned || planned->node != peer_chip || planned->port != peer->port)
        return differs(
            fmt::format("chip {} port {} leads to chip {} port {} in the map, {} in "
                        "the fabric",
                        chip, p, peer_chip, peer->port,
                        planned ? fmt::format("chip {} port {}", planned->node, planned->port)
                                : std::string("nowhere")));
    }
  }
  return {};
}

}  // namespace galaxy::nm
