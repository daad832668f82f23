#include "nmd/inject.h"

#include <fmt/format.h>

#include "chip/chip.h"
#include "chip/register_names.h"
#include "chip/registers.h"

namespace galaxy::nmd {

namespace {

std::vector<chip::LinkState> link_states(sim::SimFabric& f) {
  std::vector<chip::LinkState> out;
  const auto& t = f.topology();
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint8_t p = 0; p < t.num_ports(v); ++p) out.push_back(f.chip(v).port(p).link);
  return out;
}

const char* link_state_name(chip::LinkState s) {
  switch (s) {
    case chip::LinkState::kDown:
      return "down";
    case chip::LinkState::kTraining:
      return "training";
    case chip::LinkState::kUp:
      return "up";
  }
  return "?";
}

Result<chip::FaultCode> fault_code(const std::string& text) {
  for (uint8_t c = 0; c < chip::kFaultCodeCount; ++c)
    if (text == chip::fault_name(static_cast<chip::FaultCode>(c)))
      return static_cast<chip::FaultCode>(c);
  auto n = chip::parse_u64("fault code", text, chip::kFaultCodeCount - 1);
  if (!n.ok())
    return make_error(Code::kInvalidArgument, 9234,
                      fmt::format("fault code = '{}' is neither a fault name (link_down, "
                                  "crc_error_burst, ...) nor a number 0-{}",
                                  text, chip::kFaultCodeCount - 1));
  return static_cast<chip::FaultCode>(*n);
}

// One entry per link that changed: from its lower end, or from the end that changed alone.
nlohmann::json changed_links(const fabric::Topology& topo, const std::vector<chip::LinkState>& a,
                             const std::vector<chip::LinkState>& b) {
  std::vector<size_t> first_slot(topo.num_nodes() + 1, 0);
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    first_slot[v + 1] = first_slot[v] + topo.num_ports(v);
  nlohmann::json changed = nlohmann::json::array();
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    for (uint8_t p = 0; p < topo.num_ports(v); ++p) {
      const size_t slot = first_slot[v] + p;
      if (a[slot] == b[slot]) continue;
      auto peer = topo.peer({v, p});
      if (peer) {
        const size_t other = first_slot[peer->node] + peer->port;
        if (a[other] != b[other] && peer->node < v) continue;
      }
      changed.push_back(
          {{"a", fmt::format("{}:{}", topo.name(v), p)},
           {"b", peer ? fmt::format("{}:{}", topo.name(peer->node), peer->port) : "-"},
           {"before", link_state_name(a[slot])},
           {"after", link_state_name(b[slot])}});
    }
  return changed;
}

}  // namespace

Status check_inject_action(const std::string& action) {
  if (action == "link-down" || action == "link-up" || action == "chip-down" || action == "fault")
    return {};
  return make_error(Code::kInvalidArgument, 9231,
                    fmt::format("action = '{}' is not {}", action, kInjectActions));
}

Result<nlohmann::json> inject_op(Session& s, const InjectRequest& r) {
  GALAXY_TRY(check_inject_action(r.action));
  const bool link = r.action == "link-down" || r.action == "link-up";
  GALAXY_TRY(require_simulated(s, "fault injection"));
  sim::SimFabric& f = *s.fabric;
  const fabric::Topology& topo = f.topology();
  if (r.chip >= topo.num_nodes())
    return make_error(
        Code::kNotFound, 9235,
        fmt::format("chip = {} is not a chip of the fabric ({} chips)", r.chip, topo.num_nodes()));
  if (link || r.action == "fault") {
    if (r.port < 0 || static_cast<uint32_t>(r.port) >= topo.num_ports(r.chip))
      return make_error(Code::kOutOfRange, 8219,
                        fmt::format("port = {} is not a port of {} (0-{})", r.port,
                                    topo.name(r.chip), topo.num_ports(r.chip) - 1));
    if (link && !topo.peer({r.chip, static_cast<uint8_t>(r.port)}))
      return make_error(Code::kInvalidArgument, 8220,
                        fmt::format("port = {} of {} has no link", r.port, topo.name(r.chip)));
  }
  std::optional<chip::FaultCode> code;
  if (r.action == "fault") {
    auto c = fault_code(r.code);
    if (!c.ok()) return c.error();
    code = *c;
  }
  const auto before = link_states(f);
  const nm::Picoseconds t0 = s.port->now();
  nlohmann::json j{{"action", r.action},
                   {"chip", r.chip},
                   {"name", topo.name(r.chip)},
                   {"window_us", r.window_us}};
  if (r.port >= 0) j["port"] = r.port;
  if (link) {
    GALAXY_TRY(f.set_link({r.chip, static_cast<uint8_t>(r.port)}, r.action == "link-up"));
  } else if (r.action == "chip-down") {
    for (uint8_t p = 0; p < topo.num_ports(r.chip); ++p)
      if (topo.peer({r.chip, p})) (void)f.set_link({r.chip, p}, false);
  } else {
    f.chip(r.chip).raise_fault(*code, static_cast<uint8_t>(r.port), 0);
    j["fault"] = chip::fault_name(*code);
  }
  if (r.window_us > 0) s.requester->drain_faults(nm::Picoseconds{r.window_us} * nm::kUs);
  if (code && s.discovered) {
    // FAULT_STATUS read in band shows the latched fault (and lets the chip's NMA send the report
    // when reporting is enabled).
    const nm::FabricMap& m = s.discovery.map;
    auto it = m.node_of.find(static_cast<wire::ChipId>(r.chip));
    Result<uint64_t> status =
        make_error(Code::kNotFound, 9232, fmt::format("chip {} was not discovered", r.chip));
    if (it != m.node_of.end() && it->second == m.server_node) {
      status = s.port->read_local_register(chip::reg::kFaultStatus);
    } else if (it != m.node_of.end()) {
      nm::MgmtReply got;
      s.requester->submit(nm::MgmtRequest::read(m.target[it->second], chip::reg::kFaultStatus),
                          [&](const nm::MgmtReply& x) { got = x; });
      s.requester->run();
      status = got.status.ok() ? Result<uint64_t>(got.response.data.value[0])
                               : Result<uint64_t>(got.status.error());
    }
    if (status.ok())
      j["fault_status"] = fmt::format("0x{:02x}", *status);
    else
      j["fault_status_error"] = status.error().to_string();
  }
  j["links_changed"] = changed_links(topo, before, link_states(f));
  j["sim_time_us"] = static_cast<double>(s.port->now() - t0) / nm::kUs;
  return j;
}

}  // namespace galaxy::nmd
