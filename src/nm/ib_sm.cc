#include "nm/ib_sm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "nm/routing.h"

namespace galaxy::nm {
namespace {

using wire::IbPortState;
using wire::MadMethod;
using wire::SmpAttr;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A directed-route Set; the SMA's answer (the attribute as it now stands) goes to `done`. `what`
// names the target in a problem, made only when there is one.
void set(IbRequester& rq, IbSweepReport& report, std::function<std::string()> what, SmpAttr attr,
         uint32_t modifier, const std::vector<uint8_t>& path, const wire::SmpData& data,
         std::function<void(const wire::Smp&)> done) {
  auto smp = wire::Smp::directed_request(MadMethod::kSet, attr, modifier, path);
  if (!smp) {
    report.problems.push_back(smp.error().to_string());
    return;
  }
  smp->data = data;
  rq.submit(*smp, wire::kPermissiveLid,
            [&report, what = std::move(what), done = std::move(done)](const Status& s,
                                                                      const wire::Smp& a) {
              if (!s) {
                if (report.problems.size() < 64)
                  report.problems.push_back(fmt::format("{}: {}", what(), s.error().message));
                return;
              }
              done(a);
            });
}

// Queues the requests of `count` steps as the window opens (IbRequester::feed): step(i) submits
// the i-th step's. A sweep of TH-2's size has millions of Sets; made all at once they would hold
// gigabytes.
void feed_steps(IbRequester& rq, size_t count, std::function<void(size_t)> step) {
  rq.feed([count, step = std::move(step), i = size_t{0}]() mutable {
    if (i >= count) return false;
    step(i++);
    return true;
  });
}

// Every port of node `n` with a link to bring up: (port number, port, the directed route to use).
template <class F>
void for_each_link_port_of(IbSubnet& net, uint32_t n, F&& f) {
  IbNode& node = net.nodes[n];
  for (uint32_t p = 1; p < node.ports.size(); ++p) {
    IbPort& port = node.ports[p];
    if (!port.linked() || !port.known) continue;
    if (node.is_switch())
      f(p, port, node.path);
    else if (port.entered)
      f(p, port, port.path);
  }
}

}  // namespace

Status IbSubnetManager::discover(IbRequester& rq, IbSweepReport& report) {
  auto found = discover_ib(rq);
  if (!found) return found.error();
  subnet_ = std::move(*found);
  report.problems = subnet_.problems;
  report.switches = subnet_.num_switches();
  report.ca_ports = subnet_.num_ca_ports();
  report.links = subnet_.num_links();
  report.sms = subnet_.sms;
  for (const IbSmSeen& sm : subnet_.sms)
    if (!sm.answered)
      report.problems.push_back(fmt::format("{} port {} says IsSM but its SMInfo: {}",
                                            subnet_.name(sm.port.node), sm.port.port, sm.error));
  return {};
}

std::vector<SmPeerView> IbSubnetManager::peer_views() const {
  std::vector<SmPeerView> v;
  v.reserve(subnet_.sms.size());
  for (const IbSmSeen& sm : subnet_.sms)
    // An SM of another key manages another subnet's worth of trust: ignored, as OpenSM does.
    v.push_back({sm.info.guid, sm.info.priority, static_cast<wire::SmState>(sm.info.sm_state),
                 sm.answered && (options_.sm_key == 0 || sm.info.sm_key == options_.sm_key)});
  return v;
}

std::optional<IbSmSeen> IbSubnetManager::defer_to() const {
  const auto i = sm_defer_to(peer_views(), options_.priority, port_.local().port_guid);
  if (!i) return std::nullopt;
  return subnet_.sms[*i];
}

wire::SmInfo IbSubnetManager::sm_info() const {
  wire::SmInfo i;
  i.guid = port_.local().port_guid;
  i.sm_key = options_.sm_key;
  i.act_count = act_count_;
  i.priority = options_.priority;
  i.sm_state = static_cast<uint8_t>(state_);
  return i;
}

Status IbSubnetManager::serve_sm_info() {
  // Subnet administration (class 0x03, version 2) on the same port; a port that carries no
  // general management requests leaves the SM without it.
  if (Status s = port_.serve_class(wire::MgmtClass::kSubnAdm, wire::kSaClassVersion,
                                   [this](const wire::Mad& req, const ib::GmpSource& from) {
                                     return sa_.handle(req, from);
                                   });
      !s && s.error().code != Code::kUnsupported)
    return s;
  return port_.serve_sm([this](const wire::Smp& req) -> std::optional<wire::Smp> {
    if (req.method == MadMethod::kTrap &&
        req.attribute_id == static_cast<uint16_t>(SmpAttr::kNotice)) {
      // A port changed state, a capability (IsSM: another SM) appeared ...: the next light
      // sweep is a heavy one, unless the port is noisy; the SA forwards it to its subscribers
      // as Reports. The sender is told it was heard (TrapRepress, IBA 13.4.9).
      ++traps_;
      IbTrapOutcome out = sa_.on_trap(wire::decode_notice(req.data));
      if (!out.noisy) trap_seen_ = true;
      for (const IbTrapOutcome::Report& r : out.reports) (void)port_.send_gmp(r.mad, r.dlid);
      wire::Smp a;
      a.method = MadMethod::kTrapRepress;
      a.data = req.data;
      return a;
    }
    if (req.attribute_id != static_cast<uint16_t>(SmpAttr::kSmInfo)) return std::nullopt;
    ++act_count_;
    wire::Smp a;
    a.method = MadMethod::kGetResp;
    if (req.method == MadMethod::kSet && wire::decode_sm_info(req.data).sm_key != options_.sm_key) {
      // A state request from an SM that does not know this subnet's SM_Key is not trusted
      // (IBA 14.4.5): refused as an invalid value, and counted.
      ++refused_sets_;
      a.status = 0x1C;
    } else if (req.method == MadMethod::kSet) {
      const auto control = static_cast<wire::SmControl>(req.attribute_modifier);
      if (!control_sm(control, wire::decode_sm_info(req.data)))
        a.status = wire::kMadStatusBadValue;  // not a transition of this state (as OpenSM)
    }
    // With its SM_Key: the key is kept from requesters M_Key protection does not authenticate
    // (IBA 14.4.5), and this SM sets no M_Key.
    a.data = wire::encode_sm_info(sm_info());
    return a;
  });
}

bool IbSubnetManager::control_sm(wire::SmControl control, const wire::SmInfo& from) {
  const auto next = sm_control_transition(state_, control);
  if (!next) return false;
  if (control == wire::SmControl::kHandover) handover_from_ = from.guid;
  state_ = *next;
  return true;
}

Result<wire::SmInfo> IbSubnetManager::sm_info_request(const IbSmSeen& sm, MadMethod method,
                                                      wire::SmControl control) {
  if (sm.port.node >= subnet_.nodes.size())
    return make_error(Code::kNotFound, 7154, "the SM is not in the discovered subnet");
  const IbNode& node = subnet_.nodes[sm.port.node];
  const std::vector<uint8_t>& path = node.is_switch() ? node.path : node.ports[sm.port.port].path;
  const uint32_t modifier = method == MadMethod::kSet ? static_cast<uint32_t>(control) : 0;
  auto smp = wire::Smp::directed_request(method, SmpAttr::kSmInfo, modifier, path);
  if (!smp) return smp.error();
  smp->data = wire::encode_sm_info(sm_info());
  IbRequester rq(port_, options_.requests);
  Result<wire::SmInfo> out = make_error(
      Code::kTimeout, 7155, fmt::format("{}: no SMInfo answer", subnet_.name(sm.port.node)));
  rq.submit(*smp, wire::kPermissiveLid, [&out](const Status& s, const wire::Smp& a) {
    if (!s)
      out = s.error();
    else
      out = wire::decode_sm_info(a.data);
  });
  GALAXY_TRY(rq.run());
  return out;
}

Result<bool> IbSubnetManager::light_sweep() {
  if (subnet_.nodes.empty()) return true;
  if (trap_seen_) {
    trap_seen_ = false;
    return true;
  }
  IbRequester rq(port_, options_.requests);
  bool changed = false;
  for (const IbNode& node : subnet_.nodes) {
    if (!node.is_switch()) continue;
    auto smp = wire::Smp::directed_request(MadMethod::kGet, SmpAttr::kSwitchInfo, 0, node.path);
    if (!smp) return smp.error();
    rq.submit(*smp, wire::kPermissiveLid, [&changed](const Status& s, const wire::Smp& a) {
      wire::SwitchInfo si;
      si.raw = a.data;
      if (!s || si.port_state_change()) changed = true;
    });
  }
  GALAXY_TRY(rq.run());
  return changed;
}

Result<wire::SmInfo> IbSubnetManager::poll(const IbSmSeen& master) {
  return sm_info_request(master, MadMethod::kGet, wire::SmControl::kHandover);
}

std::optional<IbSmSeen> IbSubnetManager::outranking_standby() const {
  const auto i = sm_outranking_standby(peer_views(), options_.priority, port_.local().port_guid);
  if (!i) return std::nullopt;
  return subnet_.sms[*i];
}

void IbSubnetManager::count_served(IbSweepReport& report) const {
  report.malformed_requests = port_.malformed_requests();
  report.sa = sa_.stats();
  report.subscriptions = sa_.subscriptions().size();
}

void IbSubnetManager::count_active(IbSweepReport& report) {
  for (uint32_t n = 0; n < subnet_.nodes.size(); ++n)
    for_each_link_port_of(subnet_, n, [&](uint32_t, IbPort& port, const std::vector<uint8_t>&) {
      if (port.info.port_state() == static_cast<uint8_t>(IbPortState::kActive))
        report.ports_active += 1;
      else
        report.ports_not_active += 1;
    });
  // A switch checks M_Keys at its port 0, a CA at each port.
  for (const IbNode& node : subnet_.nodes)
    for (uint32_t p = node.is_switch() ? 0 : 1; p < (node.is_switch() ? 1u : node.ports.size());
         ++p)
      if (node.ports[p].known) report.mkey_violations += node.ports[p].info.m_key_violations();
}

Result<IbSweepReport> IbSubnetManager::sweep() {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  IbSweepReport report;
  // An engine that does not exist is the caller's mistake, found before any SMP; one that fails
  // on this subnet falls back (fall_back).
  auto spec = Spec::parse(options_.routing);
  if (!spec) return spec.error();
  if (auto engine = routing_engines().find(spec->name); !engine) return engine.error();
  IbRequester rq(port_, options_.requests);

  if (state_ != wire::SmState::kMaster) state_ = wire::SmState::kDiscovering;
  if (Status s = discover(rq, report); !s) return s.error();
  report.discover_s = seconds_since(t0);
  std::optional<IbSmSeen> m;
  if (handover_from_) {
    // Master by handover: the old master (still saying so) is told, and stands by.
    const uint64_t from = *handover_from_;
    handover_from_.reset();
    report.handed_over_by = from;
    for (const IbSmSeen& sm : subnet_.sms)
      if (sm.answered && sm.info.guid == from)
        if (auto ack = sm_info_request(sm, MadMethod::kSet, wire::SmControl::kAcknowledge);
            !ack && ack.error().code != Code::kUnsupported)
          // An answer with a status still arrived, and the old master stands by on it (OpenSM
          // 3.3 answers with class-specific status bits); no answer is a problem.
          report.problems.push_back(
              fmt::format("ACKNOWLEDGE to the SM that handed over: {}", ack.error().message));
  } else {
    m = defer_to();
  }
  if (!m) {
    // A standby that outranks this master gets the subnet (IBA 14.4.1): HANDOVER, and this SM
    // stands by under it.
    if (auto up = outranking_standby()) {
      auto handed = sm_info_request(*up, MadMethod::kSet, wire::SmControl::kHandover);
      if (handed) {
        report.handed_over_to = up->info.guid;
        m = up;
      } else {
        report.problems.push_back(
            fmt::format("HANDOVER to the SM that outranks this one: {}", handed.error().message));
      }
    }
  }
  if (m) {
    // Another SM runs the subnet (or is about to): nothing is written, and its SA answers.
    state_ = wire::SmState::kStandby;
    sa_.withdraw();
    report.role = "standby";
    report.master = std::move(m);
    report.smps = rq.stats();
    report.window = rq.window();
    report.total_s = seconds_since(t0);
    count_served(report);
    return report;
  }

  state_ = wire::SmState::kMaster;
  auto lids = assign_lids(subnet_);
  if (!lids) return lids.error();
  report.lids = *lids;
  report.sm_lid = subnet_.sm_lid();

  // The routes are computed while the LIDs and the first state change go out: route_ib reads
  // what discovery found (nodes, links, LIDs), the answers below write only the ports' PortInfo
  // and the switches' SwitchInfo.
  const auto t1 = Clock::now();
  auto routing = std::async(std::launch::async, [this, t1] {
    auto r = route_ib(subnet_, options_.routing, /*check=*/false);
    return std::pair{std::move(r), seconds_since(t1)};
  });
  program_lids_and_arm(rq, report);
  const Status sent = rq.run();
  auto [routes, route_s] = routing.get();
  if (!sent) return sent.error();
  report.route_s = route_s;
  if (!routes) {
    // The engine refused the subnet (a torus engine on a fat tree): minimum hop instead, as
    // OpenSM falls back when its routing engine fails.
    GALAXY_TRY(fall_back(report, routes.error().to_string()));
  } else {
    routes_ = std::move(*routes);
  }
  report.engine = routes_.engine;

  // Every route is followed while the tables go out: the check reads them as the Sets do, and
  // writes only its counts.
  auto checking = std::async(std::launch::async, [this] { check_ib_routes(subnet_, routes_); });
  program_tables(rq, report, nullptr);
  const Status programmed = rq.run();
  checking.get();
  if (!programmed) return programmed.error();
  if (routes_.unreachable > 0 && report.fallback_from.empty()) {
    // Tables the engine got wrong on this subnet: minimum hop, written where it differs.
    IbRoutes wrong = std::move(routes_);
    GALAXY_TRY(fall_back(
        report, fmt::format("{} (switch, LID) routes do not arrive ({})", wrong.unreachable,
                            wrong.problems.empty() ? "" : wrong.problems[0])));
    report.engine = routes_.engine;
    program_tables(rq, report, &wrong);
    if (Status s = rq.run(); !s) return s.error();
  }
  report.program_s = seconds_since(t1);
  report.unreachable = routes_.unreachable;
  report.max_paths_per_port = routes_.max_paths_per_port;
  report.max_lids_per_port = routes_.max_lids_per_port;
  for (const auto& p : routes_.problems) report.problems.push_back(p);

  // ARMED -> ACTIVE once every table is in place: a port goes ACTIVE only when its neighbour is
  // at least ARMED (IBA 7.2), which the first pass made every linked port.
  const auto t3 = Clock::now();
  feed_steps(rq, subnet_.nodes.size(), [this, &rq, &report](size_t n) {
    change_state(rq, report, static_cast<uint32_t>(n), IbPortState::kArmed, IbPortState::kActive);
  });
  if (Status s = rq.run(); !s) return s.error();
  count_active(report);
  report.activate_s = seconds_since(t3);
  sa_.publish(subnet_, routes_);
  count_served(report);
  report.smps = rq.stats();
  report.window = rq.window();
  report.total_s = seconds_since(t0);
  // Another SM's SMInfo that did not come (a process gone behind an IsSM port) is that SM's
  // matter, not a failure to bring this subnet up: each such read is one failed or refused SMP.
  uint64_t sm_reads_failed = 0;
  for (const IbSmSeen& sm : subnet_.sms) sm_reads_failed += !sm.answered;
  report.subnet_up = report.ports_not_active == 0 && report.unreachable == 0 &&
                     report.smps.failed + report.smps.error_status == sm_reads_failed;
  return report;
}

void IbSubnetManager::program_lids_and_arm(IbRequester& rq, IbSweepReport& report) {
  const uint16_t top = report.lids.max_lid;
  feed_steps(rq, subnet_.nodes.size(), [this, &rq, &report, top](size_t i) {
    const auto n = static_cast<uint32_t>(i);
    IbNode& node = subnet_.nodes[n];
    if (node.is_switch()) {
      if (node.switch_info.linear_fdb_cap() != 0 && node.switch_info.linear_fdb_cap() <= top) {
        report.problems.push_back(
            fmt::format("{}: its forwarding table holds {} LIDs, the "
                        "subnet needs {}",
                        subnet_.name(n), node.switch_info.linear_fdb_cap(), top + 1));
      }
      wire::SwitchInfo si = node.switch_info;
      si.set_linear_fdb_top(top);
      si.set_port_state_change(true);  // writing 1 clears it
      set(
          rq, report, [this, n] { return subnet_.name(n); }, SmpAttr::kSwitchInfo, 0, node.path,
          si.raw, [&node](const wire::Smp& a) { node.switch_info.raw = a.data; });
    }
    for (uint32_t p = 0; p < node.ports.size(); ++p) {
      IbPort& port = node.ports[p];
      if (port.lid == 0 || !port.known) continue;
      wire::PortInfo pi = port.info.for_set();
      pi.set_lid(port.lid);
      pi.set_master_sm_lid(report.sm_lid);
      pi.set_lmc(0);
      if (options_.m_key != 0) {
        pi.set_m_key(options_.m_key);
        pi.set_m_key_protect_bits(options_.m_key_protect);
        pi.set_m_key_lease_period(options_.m_key_lease_s);
      }
      // A CA port in INIT is armed by the same Set (INIT -> ARMED needs nothing of the
      // neighbour, IBA 7.2): one SMP fewer per host. A switch's port 0 has no link to arm.
      if (!node.is_switch() && port.linked() &&
          port.info.port_state() == static_cast<uint8_t>(IbPortState::kInit))
        pi.set_port_state(IbPortState::kArmed);
      set(
          rq, report, [this, n, p] { return fmt::format("{} port {}", subnet_.name(n), p); },
          SmpAttr::kPortInfo, p, node.is_switch() ? node.path : port.path, pi.raw,
          [&port](const wire::Smp& a) { port.info.raw = a.data; });
      report.port_sets += 1;
    }
    // The linked ports the Sets above do not arm: a switch's.
    if (node.is_switch()) change_state(rq, report, n, IbPortState::kInit, IbPortState::kArmed);
  });
}

Status IbSubnetManager::fall_back(IbSweepReport& report, std::string why) {
  report.fallback_from = options_.routing;
  report.problems.push_back(fmt::format("routing {}: {}; routed by {} instead", options_.routing,
                                        why, kIbFallbackRouting));
  report.fallback_reason = std::move(why);
  auto routes = route_ib(subnet_, kIbFallbackRouting, /*check=*/true);
  if (!routes) return routes.error();
  routes_ = std::move(*routes);
  return {};
}

void IbSubnetManager::program_tables(IbRequester& rq, IbSweepReport& report,
                                     const IbRoutes* written) {
  const uint32_t blocks = routes_.max_lid / wire::kLftBlockLids + 1u;
  auto switches = std::make_shared<std::vector<uint32_t>>();
  for (uint32_t n = 0; n < subnet_.nodes.size(); ++n)
    if (subnet_.nodes[n].is_switch()) switches->push_back(n);
  feed_steps(
      rq, switches->size() * blocks, [this, &rq, &report, switches, blocks, written](size_t i) {
        const uint32_t n = (*switches)[i / blocks];
        const auto b = static_cast<uint32_t>(i % blocks);
        auto block_of = [b](const std::vector<uint8_t>& lft) {
          wire::SmpData block;
          block.fill(wire::kLftNoPort);
          for (uint32_t k = 0; k < wire::kLftBlockLids && b * wire::kLftBlockLids + k < lft.size();
               ++k)
            block[k] = lft[b * wire::kLftBlockLids + k];
          return block;
        };
        const wire::SmpData block = block_of(routes_.lft[n]);
        if (written && n < written->lft.size() && block_of(written->lft[n]) == block) return;
        set(
            rq, report, [this, n] { return subnet_.name(n); }, SmpAttr::kLinearForwardingTable, b,
            subnet_.nodes[n].path, block, [](const wire::Smp&) {});
        report.lft_blocks += 1;
      });
}

void IbSubnetManager::change_state(IbRequester& rq, IbSweepReport& report, uint32_t n,
                                   IbPortState from, IbPortState to) {
  for_each_link_port_of(
      subnet_, n, [&](uint32_t p, IbPort& port, const std::vector<uint8_t>& path) {
        if (port.info.port_state() != static_cast<uint8_t>(from)) return;
        wire::PortInfo pi = port.info.for_set();
        pi.set_port_state(to);
        set(
            rq, report, [this, n, p, &port, to] { return state_change_text(n, p, port, to); },
            SmpAttr::kPortInfo, p, path, pi.raw,
            [&port](const wire::Smp& a) { port.info.raw = a.data; });
        report.port_sets += 1;
      });
}

std::string IbSubnetManager::state_change_text(uint32_t n, uint32_t p, const IbPort& port,
                                               IbPortState to) const {
  const IbPort& peer = subnet_.nodes[port.peer_node].ports[port.peer_port];
  return fmt::format("{} port {} to {} (peer {} port {}: {})", subnet_.name(n), p,
                     wire::ib_port_state_name(static_cast<uint8_t>(to)),
                     subnet_.name(port.peer_node), port.peer_port,
                     wire::ib_port_state_name(peer.info.port_state()));
}

Result<IbSweepReport> IbSubnetManager::audit() {
  const auto t0 = std::chrono::steady_clock::now();
  IbSweepReport report;
  IbRequester rq(port_, options_.requests);
  if (Status s = discover(rq, report); !s) return s.error();
  report.discover_s = seconds_since(t0);
  routes_ = IbRoutes{};
  routes_.engine = "(as found)";
  routes_.lft.assign(subnet_.nodes.size(), {});
  for (IbNode& node : subnet_.nodes)
    for (IbPort& port : node.ports) {
      port.lid = port.known ? port.info.lid() : 0;
      if (!node.is_switch() && !port.entered) port.lid = 0;
      if (node.is_switch() && &port != &node.ports[0]) port.lid = 0;
      routes_.max_lid = std::max(routes_.max_lid, port.lid);
    }
  report.sm_lid = subnet_.sm_lid();
  for (uint32_t n = 0; n < subnet_.nodes.size(); ++n) {
    IbNode& node = subnet_.nodes[n];
    if (!node.is_switch()) continue;
    const uint16_t top = std::min(node.switch_info.linear_fdb_top(), routes_.max_lid);
    auto& lft = routes_.lft[n];
    lft.assign(routes_.max_lid + 1u, wire::kLftNoPort);
    for (uint32_t b = 0; b * wire::kLftBlockLids <= top; ++b) {
      auto smp = wire::Smp::directed_request(MadMethod::kGet, SmpAttr::kLinearForwardingTable, b,
                                             node.path);
      if (!smp) continue;
      rq.submit(*smp, wire::kPermissiveLid, [&lft, b](const Status& st, const wire::Smp& a) {
        if (!st) return;
        for (uint32_t i = 0; i < wire::kLftBlockLids && b * wire::kLftBlockLids + i < lft.size();
             ++i)
          lft[b * wire::kLftBlockLids + i] = a.data[i];
      });
      report.lft_blocks += 1;
    }
  }
  if (Status s = rq.run(); !s) return s.error();
  check_ib_routes(subnet_, routes_);
  report.engine = routes_.engine;
  report.unreachable = routes_.unreachable;
  report.max_paths_per_port = routes_.max_paths_per_port;
  report.max_lids_per_port = routes_.max_lids_per_port;
  for (const auto& p : routes_.problems) report.problems.push_back(p);
  count_active(report);
  report.smps = rq.stats();
  report.window = rq.window();
  report.total_s = seconds_since(t0);
  report.subnet_up = report.ports_not_active == 0 && report.unreachable == 0;
  return report;
}

}  // namespace galaxy::nm
