#pragma once

#include <cctype>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../integration/live_fixture.h"
#include "chip/registers.h"
#include "chip/rt_select.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "glex/live_device.h"
#include "glex/sim_device.h"
#include "nm/fabric_map.h"
#include "nm/glex_port.h"
#include "nm/requester.h"
#include "nm/route_load.h"
#include "nm/trace.h"

namespace galaxy::nm::testing {

// A simulated fabric with a management server on NIC index 0, as tests need it.
struct SimServer {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> device;
  std::unique_ptr<GlexMgmtPort> port;
  uint32_t server_node = 0;

  static SimServer make(const std::string& spec, uint64_t seed = 1) {
    sim::SimOptions o;
    o.seed = seed;
    return make_with(spec, o);
  }
  static SimServer make_with(const std::string& spec, const sim::SimOptions& options) {
    SimServer s;
    auto topo = fabric::build_topology(spec).value();
    s.fabric =
        std::move(sim::SimFabric::create(topo, sim::default_timing().value(), options).value());
    s.server_node = s.fabric->topology().nic_node(0);
    s.device = glex::open_sim_device(*s.fabric, s.server_node);
    s.port = std::move(GlexMgmtPort::open(s.device.get()).value());
    return s;
  }
  FabricMap oracle() const { return map_from_topology(fabric->topology(), server_node).value(); }
};

// One MP between every ordered pair of NICs, each from an endpoint of its own device, carrying
// (source, destination) chip ids. `sent` counts the sends the devices accepted; `delivered` the
// MPs that arrived at the right NIC with their sender; `wrong` any other arrival.
struct AllPairs {
  uint64_t pairs = 0, sent = 0, delivered = 0, wrong = 0;
  // MPs whose senders were told they did not arrive (an error CQ entry, chip/refusal.h) and
  // the error id and text of the first.
  uint64_t refused = 0;
  uint16_t refusal_id = 0;
  std::string refusal;
};

// A management server on NIC 0 of a fabric of either back end, so that one test runs over both
// (as tests/integration/nmd_backends_test.cc does for the daemon): "sim", the simulator in this
// process; "live", a live fabric of two hosts (forked fabric daemons, UDP links on loopback)
// reached through the live libglex device on host h1.
struct Backend {
  std::string kind;
  std::unique_ptr<sim::SimFabric> sim_fabric;
  std::unique_ptr<live::testing::LiveFabricUnderTest> live;
  fabric::Topology plan;
  std::unique_ptr<glex_device> device;
  std::unique_ptr<GlexMgmtPort> port;
  uint32_t server_node = 0;

  // live: `daemon` are the options of every host's daemon (an impaired link, say).
  static std::unique_ptr<Backend> make(const std::string& kind, const std::string& spec,
                                       const live::DaemonOptions& daemon = {}) {
    auto b = std::make_unique<Backend>();
    b->kind = kind;
    if (kind == "live") {
      b->live = std::make_unique<live::testing::LiveFabricUnderTest>(2, spec, daemon);
      if (!b->live->wait_up()) return nullptr;
      b->plan = b->live->fabric().topology;
      b->server_node = b->plan.nic_node(0);
      auto d = glex::open_live_device(b->live->fabric().name, "h1",
                                      static_cast<int32_t>(b->server_node));
      if (!d.ok()) return nullptr;
      b->device = std::move(*d);
    } else {
      b->plan = fabric::build_topology(spec).value();
      b->sim_fabric = std::move(
          sim::SimFabric::create(b->plan, sim::default_timing().value(), {1, true}).value());
      b->server_node = b->plan.nic_node(0);
      b->device = glex::open_sim_device(*b->sim_fabric, b->server_node);
    }
    auto port = GlexMgmtPort::open(b->device.get());
    if (!port.ok()) return nullptr;
    b->port = std::move(*port);
    return b;
  }
  const fabric::Topology& topology() const { return plan; }
  FabricMap oracle() const { return map_from_topology(plan, server_node).value(); }
  bool live_fabric() const { return kind == "live"; }
  // A device on NIC `node` (a plan node) of this fabric, as an application on its host opens it.
  std::unique_ptr<glex_device> open_nic(uint32_t node) const {
    if (!live_fabric()) return glex::open_sim_device(*sim_fabric, node);
    const live::LiveFabric& f = live->fabric();
    auto d = glex::open_live_device(f.name, f.hosts[static_cast<size_t>(f.host_of[node])].name,
                                    static_cast<int32_t>(node));
    return d.ok() ? std::move(*d) : nullptr;
  }
  AllPairs all_pairs_mp() const;
  // A request timeout or a wait for fault reports: the simulator's figure, or the live fabric's
  // (real processes and sockets, on a loaded 2-core machine under ctest -j).
  Picoseconds wait(Picoseconds simulated) const { return live_fabric() ? 100 * kMs : simulated; }
};

// Takes the link at `end` (map node and port) down, or lets it train again, as an operator
// would: PORT_CTRL "force link down" written through management, at whichever end answers over
// a route that does not cross the link (an NRC whose route back to the server leaves by
// another port). Both ends go down, in either back end.
inline Status force_link_down(Requester& req, const FabricMap& map, fabric::PortRef end,
                              bool down = true) {
  const wire::SourceRoute& back = map.target[end.node].backward;
  if (map.topology.is_nic(end.node) || (back.hop_num != 0 && back.hops[0] == end.port))
    end = *map.topology.peer(end);
  Status st = make_error(Code::kTimeout, 1, "no answer");
  req.submit(MgmtRequest::write(map.target[end.node],
                                chip::reg::port_register(end.port, chip::reg::port::kPortCtrl),
                                down ? 3 : 1),
             [&](const MgmtReply& r) { st = r.status; });
  req.run();
  return st;
}

// The allowed output ports of NRC `v` for input port `in` and destination `dst` (map nodes),
// read through management (nm::read_route_entry); nullopt if the chip does not answer.
inline std::optional<chip::PortSet> read_route(Requester& req, const FabricMap& map, uint32_t v,
                                               uint8_t in, uint32_t dst) {
  RouteEntryRead r =
      read_route_entry(req, map.target[v], map.topology.num_ports(v), in, map.chip_id[dst]);
  if (r.failed) return std::nullopt;
  return r.ports;
}

inline const char* const kBackends[] = {"sim", "live"};

// A test name from a parameter: letters and digits kept, everything else '_'.
inline std::string param_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

inline AllPairs Backend::all_pairs_mp() const {
  AllPairs r;
  const fabric::Topology& t = plan;
  const uint32_t n = t.num_nics();
  std::vector<std::unique_ptr<glex_device>> dev(n);
  std::vector<glex_ep_handle_t> ep(n, nullptr);
  std::vector<glex_ep_addr_t> addr(n);
  std::vector<uint64_t> expected(n, 0);
  r.pairs = uint64_t{n} * (n - 1);
  auto close_all = [&] {
    for (glex_ep_handle_t e : ep)
      if (e) glex_destroy_ep(e);
  };
  for (uint32_t i = 0; i < n; ++i) {
    dev[i] = open_nic(t.nic_node(i));
    if (!dev[i] || glex_create_ep(dev[i].get(), nullptr, &ep[i]) != GLEX_SUCCESS) {
      close_all();
      return r;  // nothing sent
    }
    addr[i] = glex_ep_addr(ep[i]);
  }
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const uint32_t data[2] = {t.nic_node(a), t.nic_node(b)};
      if (glex_send_mp(ep[a], addr[b], data, sizeof data, 0) != GLEX_SUCCESS) continue;
      ++r.sent;
      ++expected[b];
    }
  // A NIC waits until what was sent to it arrived, or its queue stays empty for the wait; then
  // anything more is counted too.
  const int32_t wait_ms = live_fabric() ? 200 : 10;
  for (uint32_t b = 0; b < n; ++b) {
    glex_mp mp{};
    for (uint64_t got = 0;
         glex_recv_mp(ep[b], got < expected[b] ? wait_ms : 0, &mp) == GLEX_SUCCESS; ++got) {
      uint32_t data[2] = {0, 0};
      std::memcpy(data, mp.data, sizeof data);
      if (mp.len == sizeof data && data[1] == t.nic_node(b) && (mp.src >> 8) == data[0])
        ++r.delivered;
      else
        ++r.wrong;
    }
  }
  // Every MP that did not arrive is refused to its sender; refusals come back after the MPs
  // that were delivered, so a sender waits for them while some are still unaccounted for.
  for (uint32_t a = 0; a < n; ++a) {
    glex_cq_entry e{};
    while (glex_wait_cq(ep[a], r.delivered + r.refused < r.sent ? wait_ms : 0, &e) ==
           GLEX_SUCCESS) {
      if (e.op != GLEX_OP_MP || e.status != GLEX_UNREACHABLE) {
        ++r.wrong;
        continue;
      }
      if (r.refused++ == 0) {
        r.refusal_id = e.error_id;
        r.refusal = e.reason;
      }
    }
  }
  close_all();
  return r;
}

}  // namespace galaxy::nm::testing

// Runs every TEST_P of `suite` (a ::testing::TestWithParam<const char*>) over each back end,
// the back end's name ending the test's name.
#define GALAXY_OVER_BACKENDS(suite)                                           \
  INSTANTIATE_TEST_SUITE_P(                                                   \
      Backends, suite, ::testing::ValuesIn(::galaxy::nm::testing::kBackends), \
      [](const auto& i) { return ::galaxy::nm::testing::param_name(i.param); })
