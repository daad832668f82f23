#include "nmd/session.h"

#include <fmt/format.h>

#include "base/spec.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"
#include "engine/sim/fabric_spec.h"
#include "engine/sim/load.h"
#include "fabric/io.h"
#include "glex/live_device.h"
#include "nm/map_io.h"

namespace galaxy::nmd {

nm::RequesterOptions requester_options(bool serial) {
  nm::RequesterOptions r;
  if (!serial) {
    r.global_window = 256;
    r.per_chip_window = 6;
  }
  return r;
}

Result<Session> open_live_session(const SessionOptions& o) {
  auto f = live::parse_live_fabric(o.fabric);
  if (!f.ok()) return f.error();
  std::string host = o.host;
  if (host.empty()) {
    for (const live::LiveHost& h : f->hosts)
      if (live::Segment::attach(f->name, h.name).ok()) {
        host = h.name;
        break;
      }
    if (host.empty())
      return make_error(Code::kNotFound, 9013,
                        fmt::format("no host of live fabric '{}' runs a daemon here; start them "
                                    "with `galaxy fabric up --fabric {}`",
                                    f->name, o.fabric));
  }
  int hi = f->host_index(host);
  if (hi < 0)
    return make_error(Code::kNotFound, 9014,
                      fmt::format("--host {} is not a host of the fabric", host));
  if (o.server_nic >= f->topology.num_nics())
    return make_error(
        Code::kOutOfRange, 9015,
        fmt::format("--server-nic = {} exceeds the {} NICs", o.server_nic, f->topology.num_nics()));
  uint32_t nic = f->topology.nic_node(o.server_nic);
  if (f->host_of[nic] != hi) {  // the default NIC 0 may live elsewhere: the host's first NIC
    for (uint32_t i = 0; i < f->topology.num_nics(); ++i)
      if (f->host_of[f->topology.nic_node(i)] == hi) {
        nic = f->topology.nic_node(i);
        break;
      }
  }
  auto dev = glex::open_live_device(f->name, host, static_cast<int32_t>(nic));
  if (!dev.ok()) return dev.error();
  Session s;
  s.live_plan = std::make_unique<fabric::Topology>(std::move(f->topology));
  s.live_hosts = f->hosts;
  s.live_host_of = f->host_of;
  s.device = std::move(*dev);
  auto port = nm::GlexMgmtPort::open(s.device.get());
  if (!port.ok()) return port.error();
  s.port = std::move(*port);
  nm::RequesterOptions ro = requester_options(o.serial);
  ro.timeout = 200 * nm::kMs;  // real time: a lost answer is retried after 200 ms
  s.requester = std::make_unique<nm::Requester>(*s.port, ro);
  return s;
}

std::optional<nm::LoadedCheck> check_held_tables(const Session& s, const nm::FabricMap& map,
                                                 const nm::RouteSet& routes) {
  if (!s.fabric) return std::nullopt;
  sim::SimFabric& f = *s.fabric;
  const fabric::Topology& t = f.topology();
  // The simulated engine's chip id is its node.
  auto nrc_port = [&](uint32_t v, uint8_t p) {
    const uint32_t node = map.chip_id[v];
    return node < t.num_nodes() && !t.is_nic(node) && p < t.num_ports(node);
  };
  return nm::check_loaded_tables(
      map, routes,
      [&](uint32_t v, uint8_t p) -> const chip::RouteTable* {
        return nrc_port(v, p) ? &f.nrc(map.chip_id[v]).route_table(p) : nullptr;
      },
      [&](uint32_t v, uint8_t p) -> uint8_t {
        return nrc_port(v, p) ? f.nrc(map.chip_id[v]).vc_rule(p)
                              : 0xFF;  // no such port: never a rule the routes give
      });
}

Status require_simulated(const Session& s, const char* what) {
  if (s.fabric) return {};
  return make_error(Code::kUnsupported, 9016,
                    fmt::format("{} acts on the simulated world; on a live fabric use the link "
                                "daemons' --impair option",
                                what));
}

// A server on a simulated fabric another owner shares (SessionOptions::Shared).
Result<Session> open_shared_session(const SessionOptions& o) {
  const fabric::Topology& topo = o.shared.fabric->topology();
  if (o.server_nic >= topo.num_nics())
    return make_error(
        Code::kOutOfRange, 9017,
        fmt::format("--server-nic = {} exceeds the {} NICs", o.server_nic, topo.num_nics()));
  Session s;
  s.fabric = o.shared.fabric;
  s.device = glex::open_sim_device(*s.fabric, topo.nic_node(o.server_nic));
  auto port = nm::GlexMgmtPort::open(s.device.get());
  if (!port.ok()) return port.error();
  s.port = std::move(*port);
  s.cooperative =
      std::make_unique<nm::CooperativePort>(*s.port, o.shared.slice_ps, o.shared.serve_others);
  s.requester = std::make_unique<nm::Requester>(*s.cooperative, requester_options(o.serial));
  return s;
}

Result<Session> open_session(const SessionOptions& o) {
  if (o.shared.fabric) return open_shared_session(o);
  if (live::is_live_spec(o.fabric)) return open_live_session(o);
  auto topo = sim::resolve_topology(o.fabric);
  if (!topo.ok()) return topo.error();
  if (o.server_nic >= topo->num_nics())
    return make_error(
        Code::kOutOfRange, 9010,
        fmt::format("--server-nic = {} exceeds the {} NICs", o.server_nic, topo->num_nics()));
  auto timing = o.timing.empty() ? sim::default_timing() : sim::load_timing(o.timing);
  if (!timing.ok()) return timing.error();
  sim::SimOptions so;
  so.seed = o.seed;
  auto f = sim::SimFabric::create(*topo, *timing, so);
  if (!f.ok()) return f.error();
  Session s;
  s.fabric = std::move(*f);
  auto load = sim::apply_load(*s.fabric, o.load);
  if (!load.ok()) return load.error();
  s.device = glex::open_sim_device(*s.fabric, s.fabric->topology().nic_node(o.server_nic));
  auto port = nm::GlexMgmtPort::open(s.device.get());
  if (!port.ok()) return port.error();
  s.port = std::move(*port);
  s.requester = std::make_unique<nm::Requester>(*s.port, requester_options(o.serial));
  return s;
}

namespace {

Status use_saved_map(Session& s, const SessionOptions& o) {
  auto text = fabric::read_fabric_file(o.map_file, "map file");
  if (!text.ok()) return text.error();
  auto m = nm::read_map(*text, o.map_file);
  if (!m.ok()) return m.error();
  GALAXY_TRY(nm::check_map_against(*m, s.plan()));
  const wire::ChipId server = s.device->chip_id(), saved = m->chip_id[m->server_node];
  if (server != saved)
    return make_error(Code::kInvalidArgument, 5709,
                      fmt::format("map file '{}' was saved from chip {}'s view, this server is "
                                  "chip {}; give the --server-nic it was saved with",
                                  o.map_file, saved, server));
  s.discovery = nm::DiscoveryResult{};
  s.discovery.map = std::move(*m);
  s.discovered = true;
  s.requester->set_options(requester_options(o.serial));
  return {};
}

}  // namespace

Status discover(Session& s, const SessionOptions& o) {
  if (!o.map_file.empty()) return use_saved_map(s, o);
  nm::DiscoveryOptions d;
  d.pipelined = !o.serial;
  auto r = nm::discover(*s.requester, d);
  if (!r.ok()) return r.error();
  s.discovery = std::move(*r);
  s.discovered = true;
  s.requester->set_options(requester_options(o.serial));
  return {};
}

Result<Session> open_discovered_session(const SessionOptions& o) {
  auto s = open_session(o);
  if (!s.ok()) return s.error();
  SessionOptions pipelined = o;
  pipelined.serial = false;
  GALAXY_TRY(discover(*s, pipelined));
  s->requester->set_options(requester_options(o.serial));
  return s;
}

Result<uint32_t> find_node(const Session& s, const std::string& text) {
  const nm::FabricMap& m = s.discovery.map;
  // The described fabric names the chip (chip id = plan node on every engine; nic:<index> in the
  // file's order; names, descriptions, GUIDs); the map then says where discovery found it.
  auto planned = s.plan().resolve(text);
  if (planned.ok()) {
    auto it = m.node_of.find(static_cast<wire::ChipId>(*planned));
    if (it == m.node_of.end())
      return make_error(Code::kNotFound, 9011,
                        fmt::format("chip {} ({}) was not discovered", *planned,
                                    excerpt(s.plan().name(*planned))));
    return it->second;
  }
  // Names only discovery gives ("nrc12").
  if (auto n = m.topology.find_node(text)) return *n;
  return planned.error();
}

}  // namespace galaxy::nmd
