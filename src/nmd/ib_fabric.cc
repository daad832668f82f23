#include "nmd/ib_fabric.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "base/json_text.h"
#include "chip/chip.h"
#include "ib/umad_port.h"
#include "nm/ib_scan.h"
#include "nm/ib_trace.h"
#include "nmd/ib_json.h"

namespace galaxy::nmd {

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The data rate of a link as its PortInfo says it runs (IBA 14.2.5.6): lanes from
// LinkWidthActive, the lane's signalling rate from LinkSpeedActive (SDR, DDR, QDR; 8b/10b), so
// that utilisation reads as the other fabrics' does. 0 when the fields say nothing usable.
double link_data_bits_per_s(const wire::PortInfo& pi) {
  return wire::ib_link_lanes(pi.link_width_active()) *
         (wire::ib_lane_half_gbaud(pi.link_speed_active()) * 0.5e9) * 0.8;
}

LinkView link_view_of(uint8_t state) {
  switch (static_cast<wire::IbPortState>(state)) {
    case wire::IbPortState::kActive:
      return LinkView::kUp;
    case wire::IbPortState::kInit:
    case wire::IbPortState::kArmed:
      return LinkView::kTraining;
    default:
      return LinkView::kDown;
  }
}

// A counter's growth; a counter that went down was reset (or saturated and was cleared).
uint64_t grown(uint64_t before, uint64_t after) {
  return after >= before ? after - before : 0;
}

}  // namespace

Result<std::unique_ptr<IbFabric>> IbFabric::open(const std::string& spec, NoteFn note,
                                                 const nm::IbSmOptions& sm) {
  ib::UmadOptions uo;
  GALAXY_TRY(ib::parse_ib_fabric(spec, uo));
  auto port = ib::open_umad_port(uo);
  if (!port) return port.error();
  return std::make_unique<IbFabric>(std::move(*port), std::move(note), sm);
}

IbFabric::IbFabric(std::unique_ptr<ib::SmpPort> port, NoteFn note, const nm::IbSmOptions& sm)
    : port_(std::move(port)), note_(std::move(note)), sm_(*port_, sm) {
  plan_ = std::make_shared<fabric::Topology>();
}

uint32_t IbFabric::chip_of_node(uint32_t node) const {
  return node < chip_of_node_.size() ? chip_of_node_[node] : fabric::kNoNode;
}

Result<nlohmann::json> IbFabric::sweep(const std::string& engine) {
  Result<nm::IbSweepReport> r = nm::IbSweepReport{};
  if (engine == "none") {
    r = sm_.audit();
  } else {
    sm_.set_routing(engine);
    r = sm_.sweep();
  }
  if (!r) return r.error();
  const bool first = !swept_;
  swept_ = true;
  const bool changed = adopt_subnet(first);
  nlohmann::json j = ib_sweep_json(*r);
  j["fabric"] = "ib";
  j["changed"] = changed && !first;
  j["nodes"] = sm_.subnet().nodes.size();
  routes_summary_ = {{"engine", engine == "none" ? "none" : r->engine},
                     {"loaded_us", now_us()},
                     {"lft_blocks", r->lft_blocks},
                     {"unreachable_routes", r->unreachable},
                     {"max_paths_per_port", r->max_paths_per_port},
                     {"max_lids_per_port", r->max_lids_per_port},
                     {"subnet_up", r->subnet_up},
                     {"max_lid", r->lids.max_lid},
                     {"sm_lid", r->sm_lid},
                     {"role", r->role}};
  if (!r->fallback_from.empty()) {
    routes_summary_["routing_fallback"] = {{"from", r->fallback_from},
                                           {"reason", r->fallback_reason}};
    note_({.kind = EventKind::kAlarm,
           .severity = EventSeverity::kMajor,
           .cause = "routing fallback",
           .detail = fmt::format("{} -> {}: {}", r->fallback_from, r->engine, r->fallback_reason)});
  }
  if (engine != "none" && r->ports_not_active > 0)
    note_({.kind = EventKind::kAlarm,
           .severity = EventSeverity::kMajor,
           .cause = "ports not active",
           .detail = fmt::format("{} linked ports are not ACTIVE after the sweep{}{}",
                                 r->ports_not_active, r->problems.empty() ? "" : ": ",
                                 r->problems.empty() ? "" : r->problems.front())});
  if (r->unreachable > 0)
    note_({.kind = EventKind::kAlarm,
           .severity = EventSeverity::kMajor,
           .cause = "routes do not arrive",
           .detail = fmt::format("{} (switch, LID) routes of the {} tables do not arrive",
                                 r->unreachable, engine == "none" ? "found" : "written")});
  if (r->master) {
    // Another SM runs the subnet (IBA 14.4.1): this sweep wrote nothing.
    note_({.kind = EventKind::kAlarm,
           .severity = EventSeverity::kMajor,
           .cause = "standby",
           .detail = fmt::format("the {} SM at LID {} (port GUID {:#018x}, priority {}) runs the "
                                 "subnet; nothing written",
                                 wire::sm_state_name(r->master->info.sm_state), r->master->lid,
                                 r->master->info.guid, r->master->info.priority)});
    return j;
  }
  note_(
      {.kind = EventKind::kLog,
       .severity = r->subnet_up || engine == "none" ? EventSeverity::kInfo : EventSeverity::kMajor,
       .cause = engine == "none" ? "subnet checked"
                : r->subnet_up   ? "subnet up"
                                 : "subnet not up",
       .detail = fmt::format("{} switches, {} CA ports, {} links; {}: {} LFT blocks; {} SMPs "
                             "in {:.3f} s",
                             r->switches, r->ca_ports, r->links,
                             routes_summary_["engine"].get<std::string>(), r->lft_blocks,
                             r->smps.sent, r->total_s)});
  return j;
}

bool IbFabric::heavy_sweep_due() {
  // Disabled by an SMInfo Set (IBA 14.4.1): no sweeps until STANDBY or DISCOVER.
  if (sm_.state() == wire::SmState::kNotActive) return false;
  if (!swept_ || routes_summary_.value("role", "") != "master") return true;
  auto light = sm_.light_sweep();
  return !light || *light;
}

bool IbFabric::adopt_subnet(bool first) {
  const nm::IbSubnet& net = sm_.subnet();
  std::vector<bool> was_found(chips_.size());
  for (uint32_t c = 0; c < chips_.size(); ++c) {
    was_found[c] = chips_[c].node != nm::kNoIbNode;
    chips_[c].node = nm::kNoIbNode;
  }
  bool changed = false;
  chip_of_node_.assign(net.nodes.size(), fabric::kNoNode);
  for (uint32_t n = 0; n < net.nodes.size(); ++n) {
    const nm::IbNode& node = net.nodes[n];
    auto [it, added] =
        chip_of_guid_.emplace(node.info.node_guid, static_cast<uint32_t>(chips_.size()));
    if (added) {
      chips_.push_back({.guid = node.info.node_guid,
                        .is_switch = node.is_switch(),
                        .ports = node.info.num_ports});
      was_found.push_back(false);
    }
    chips_[it->second].node = n;
    chip_of_node_[n] = it->second;
  }
  std::set<LinkKey> links;
  for (uint32_t n = 0; n < net.nodes.size(); ++n)
    for (uint32_t p = 1; p < net.nodes[n].ports.size(); ++p) {
      const nm::IbPort& port = net.nodes[n].ports[p];
      if (!port.linked()) continue;
      LinkKey k{chip_of_node_[n], static_cast<uint8_t>(p), chip_of_node_[port.peer_node],
                port.peer_port};
      if (std::tie(std::get<2>(k), std::get<3>(k)) < std::tie(std::get<0>(k), std::get<1>(k)))
        k = {std::get<2>(k), std::get<3>(k), std::get<0>(k), std::get<1>(k)};
      links.insert(k);
    }
  auto where = [&](uint32_t chip, int port) {
    std::string s = plan_ && chip < plan_->num_nodes() ? plan_->name(chip) : "";
    if (s.empty()) s = fabric::guid_name(chips_[chip].is_switch ? 'S' : 'H', chips_[chip].guid);
    return port >= 0 ? fmt::format("{} port {}", s, port) : s;
  };
  if (!first) {
    for (uint32_t c = 0; c < chips_.size(); ++c) {
      const bool found = chips_[c].node != nm::kNoIbNode;
      if (found == was_found[c]) continue;
      changed = true;
      note_({.kind = found ? EventKind::kLog : EventKind::kAlarm,
             .severity = found ? EventSeverity::kInfo : EventSeverity::kMajor,
             .location = where(c, -1),
             .chip = c,
             .cause = found ? "node found" : "node gone",
             .detail = found ? "found by the sweep" : "not found by the sweep"});
    }
    for (const LinkKey& k : links_now_)
      if (!links.count(k)) {
        changed = true;
        const auto [a, pa, b, pb] = k;
        note_({.kind = EventKind::kAlarm,
               .severity = EventSeverity::kCritical,
               .location = where(a, pa),
               .chip = a,
               .port = pa,
               .cause = std::string(chip::fault_name(chip::FaultCode::kLinkDown)),
               .detail = fmt::format("the link to {} is gone from the sweep", where(b, pb))});
      }
    for (const LinkKey& k : links)
      if (!links_now_.count(k)) {
        changed = true;
        const auto [a, pa, b, pb] = k;
        note_({.kind = EventKind::kFault,
               .severity = EventSeverity::kInfo,
               .location = where(a, pa),
               .chip = a,
               .port = pa,
               .cause = std::string(chip::fault_name(chip::FaultCode::kLinkUp)),
               .detail = fmt::format("the link to {} is found by the sweep", where(b, pb))});
      }
  }
  links_now_ = std::move(links);
  links_ever_.insert(links_now_.begin(), links_now_.end());
  rebuild_plan();
  return changed;
}

void IbFabric::rebuild_plan() {
  const nm::IbSubnet& net = sm_.subnet();
  auto plan = std::make_shared<fabric::Topology>();
  // Names: the description where no other node has it (what users call a node), else the
  // ibnetdiscover name, as the ibnetdiscover importer names them; both stay findable.
  std::unordered_map<std::string, uint32_t> described;
  std::vector<std::string> description(chips_.size());
  for (uint32_t c = 0; c < chips_.size(); ++c) {
    const uint32_t n = chips_[c].node;
    if (n != nm::kNoIbNode)
      description[c] = net.nodes[n].description;
    else if (plan_ && c < plan_->num_nodes())
      description[c] = plan_->identity(c).description;
    ++described[description[c]];
  }
  for (uint32_t c = 0; c < chips_.size(); ++c) {
    const Chip& ch = chips_[c];
    const std::string id = fabric::guid_name(ch.is_switch ? 'S' : 'H', ch.guid);
    const std::string& d = description[c];
    fabric::Location loc;
    loc.role = ch.is_switch ? "switch" : "ca";
    // Chip c is plan node c: NumPorts is held to what a topology takes (IBA allows 1-254).
    auto added = plan->add_node(ch.is_switch ? fabric::NodeKind::kNrc : fabric::NodeKind::kNic,
                                std::clamp<uint32_t>(ch.ports, 1, fabric::kMaxTopologyPorts),
                                !d.empty() && described[d] == 1 ? d : id, std::move(loc));
    if (!added) added = plan->add_node(fabric::NodeKind::kNic, 1, id);
    fabric::Identity identity;
    identity.guid = ch.guid;
    identity.description = d;
    if (ch.node != nm::kNoIbNode) {
      const nm::IbNode& node = net.nodes[ch.node];
      if (node.is_switch()) {
        identity.lids = {net.held_lid({ch.node, 0})};
      } else {
        identity.lids.assign(ch.ports, 0);
        for (uint32_t p = 1; p <= ch.ports && p < node.ports.size(); ++p)
          if (node.ports[p].entered)
            identity.lids[p - 1] = net.held_lid({ch.node, static_cast<uint8_t>(p)});
      }
    }
    plan->set_identity(*added, std::move(identity));
  }
  // The links found now, then those found before whose ports are still free (down).
  for (const auto* set : {&links_now_, &links_ever_})
    for (const auto& [a, pa, b, pb] : *set) {
      if (a >= plan->num_nodes() || b >= plan->num_nodes() || pa == 0 || pb == 0) continue;
      const fabric::PortRef x{a, static_cast<uint8_t>(pa - 1)}, y{b, static_cast<uint8_t>(pb - 1)};
      if (plan->peer(x) || plan->peer(y)) continue;
      (void)plan->connect(x, y);
    }
  // A switch's level: 1 + its distance in switches from the nearest CA (leaves 1, spines 2 ...),
  // once per plan rather than per snapshot.
  std::vector<int> level(plan->num_nodes(), -1);
  std::deque<uint32_t> todo;
  for (uint32_t c = 0; c < plan->num_nodes(); ++c)
    if (plan->is_nic(c)) {
      level[c] = 0;
      todo.push_back(c);
    }
  while (!todo.empty()) {
    const uint32_t u = todo.front();
    todo.pop_front();
    for (uint8_t p = 0; p < plan->num_ports(u); ++p) {
      auto peer = plan->peer({u, p});
      if (!peer || level[peer->node] >= 0 || plan->is_nic(peer->node)) continue;
      level[peer->node] = level[u] + 1;
      todo.push_back(peer->node);
    }
  }
  levels_.assign(plan->num_nodes(), 0);
  for (uint32_t c = 0; c < plan->num_nodes(); ++c)
    levels_[c] = static_cast<uint8_t>(std::max(level[c], 0));
  plan_ = std::move(plan);
}

std::shared_ptr<FabricView> IbFabric::view() const {
  const nm::IbSubnet& net = sm_.subnet();
  auto v = std::make_shared<FabricView>();
  const fabric::Topology& plan = *plan_;
  v->plan_owner = plan_;
  v->port_base = 1;
  init_from_plan(*v, plan);
  for (uint32_t c = 0; c < plan.num_nodes(); ++c) {
    ChipView& cv = v->chips[c];
    cv.level = levels_[c];
    const uint32_t n = chips_[c].node;
    cv.hops = n == nm::kNoIbNode ? -1 : static_cast<int>(net.nodes[n].path.size());
    cv.responding = n != nm::kNoIbNode;
  }
  v->ib_counters.resize(v->ports.size());
  for (uint32_t n = 0; n < net.nodes.size(); ++n)
    if (!net.nodes[n].is_switch()) v->nic_chips.push_back(chip_of_node(n));
  for (uint32_t c = 0; c < plan.num_nodes(); ++c) {
    const uint32_t n = chips_[c].node;
    for (uint8_t p = 0; p < v->chips[c].ports; ++p) {
      PortView& pv = v->ports[v->chips[c].first_port + p];
      auto peer = plan.peer({c, p});
      if (!peer) continue;
      pv.peer = peer->node;
      pv.peer_port = peer->port;
      const uint8_t ib_port = static_cast<uint8_t>(p + 1);
      pv.link = LinkView::kDown;
      if (n != nm::kNoIbNode && ib_port < net.nodes[n].ports.size()) {
        const nm::IbPort& port = net.nodes[n].ports[ib_port];
        if (port.linked() && chip_of_node(port.peer_node) == peer->node &&
            port.peer_port == peer->port + 1)
          pv.link = port.known ? link_view_of(port.info.port_state()) : LinkView::kUp;
      }
      if (auto r = last_read_.find({c, ib_port}); r != last_read_.end()) {
        pv.scanned = true;
        v->ib_counters[v->chips[c].first_port + p] = r->second.counters;
      }
      if (auto r = rates_.find({c, ib_port}); r != rates_.end()) {
        pv.utilisation = r->second.utilisation;
        pv.retransmissions_per_s = r->second.recoveries_per_s;
        pv.crc_errors_per_s = r->second.errors_per_s;
      }
    }
  }
  v->scans = scans_;
  v->scan_interval_s = scan_interval_s_;
  return v;
}

Result<nlohmann::json> IbFabric::scan() {
  if (!swept_)
    return make_error(Code::kUnsupported, 8400,
                      "the subnet has not been swept yet: nothing to scan");
  const nm::IbSubnet& net = sm_.subnet();
  const auto t0 = std::chrono::steady_clock::now();
  nm::IbRequester rq(*port_, {});
  auto scan = nm::scan_ib(rq, net);
  if (!scan) return scan.error();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t at = now_us();
  uint64_t with_errors = 0, errors_rose = 0;
  double interval_s = 0;
  // Only the ports this scan read keep counters and rates (a port gone since shows none).
  std::map<std::pair<uint32_t, uint8_t>, PortRead> read;
  std::map<std::pair<uint32_t, uint8_t>, PortRates> rates;
  for (const nm::IbPortScan& p : scan->ports) {
    if (!p.read) continue;
    with_errors += p.errors() > 0;
    const uint32_t chip = chip_of_node(p.port.node);
    const std::pair key{chip, p.port.port};
    auto prev = last_read_.find(key);
    if (prev != last_read_.end() && at > prev->second.at_us) {
      const double dt = static_cast<double>(at - prev->second.at_us) / 1e6;
      interval_s = std::max(interval_s, dt);
      const wire::PortCounters& a = prev->second.counters;
      const wire::PortCounters& b = p.counters;
      const nm::IbNode& node = net.nodes[p.port.node];
      const double bps = link_data_bits_per_s(node.ports[p.port.port].info);
      PortRates r;
      // PortXmitData counts 4-byte words.
      if (bps > 0)
        r.utilisation = static_cast<float>(static_cast<double>(grown(a.xmit_data, b.xmit_data)) *
                                           32 / dt / bps);
      r.recoveries_per_s = static_cast<float>(
          static_cast<double>(grown(a.link_error_recoveries, b.link_error_recoveries)) / dt);
      r.errors_per_s =
          static_cast<float>(static_cast<double>(grown(a.symbol_errors, b.symbol_errors) +
                                                 grown(a.rcv_errors, b.rcv_errors)) /
                             dt);
      rates[key] = r;
      const uint64_t rose = grown(wire::port_counter_errors(a), p.errors());
      if (rose > 0) {
        ++errors_rose;
        note_({.kind = EventKind::kFault,
               .severity = EventSeverity::kMinor,
               .location = fmt::format("{} port {}", plan_->name(chip), p.port.port),
               .chip = chip,
               .port = p.port.port,
               .cause = "port_errors",
               .detail = json_text(nlohmann::json{{"rose_by", rose},
                                                  {"interval_s", dt},
                                                  {"before", ib_counters_json(a)},
                                                  {"now", ib_counters_json(b)}})});
      }
    }
    read[key] = {p.counters, at};
  }
  last_read_ = std::move(read);
  rates_ = std::move(rates);
  ++scans_;
  if (interval_s > 0) scan_interval_s_ = interval_s;
  nlohmann::json summary{{"fabric", "ib"},
                         {"ports_read", scan->read},
                         {"ports_failed", scan->failed},
                         {"ports_with_errors", with_errors},
                         {"ports_errors_rose", errors_rose},
                         {"requests", scan->requests},
                         {"wall_s", wall_s}};
  if (interval_s > 0) summary["interval_s"] = interval_s;
  nlohmann::json failed = nlohmann::json::array();
  for (const nm::IbPortScan& p : scan->ports)
    if (!p.read && failed.size() < 10) failed.push_back(ib_port_scan_json(net, p));
  if (!failed.empty()) summary["not_read"] = failed;
  return summary;
}

Result<nm::IbEndpoint> IbFabric::endpoint(const std::string& text) const {
  const nm::IbSubnet& net = sm_.subnet();
  auto found = net.find(text);
  if (found) return found;
  // A chip id or a name the console shows.
  auto chip = plan_->resolve(text);
  if (!chip) return found.error();
  const uint32_t n = chips_[*chip].node;
  if (n == nm::kNoIbNode)
    return make_error(Code::kNotFound, 8401,
                      fmt::format("'{}' (chip {}) was not found by the last sweep", text, *chip));
  return net.find(fabric::guid_name(chips_[*chip].is_switch ? 'S' : 'H', chips_[*chip].guid));
}

Result<uint32_t> IbFabric::resolve(const std::string& text) const {
  if (auto chip = plan_->resolve(text)) return chip;
  auto e = sm_.subnet().find(text);
  if (!e) return e.error();
  return chip_of_node(e->node);
}

Result<nlohmann::json> IbFabric::trace(const std::string& src, const std::string& dst) {
  auto a = endpoint(src);
  if (!a) return a.error();
  auto b = endpoint(dst);
  if (!b) return b.error();
  nm::IbRequester rq(*port_, {});
  auto tr = nm::trace_ib(rq, sm_.subnet(), *a, *b);
  if (!tr) return tr.error();
  nlohmann::json j = ib_trace_json(sm_.subnet(), *tr);
  // What the console draws a trace with: each switch's chip id, the port it chose, its level.
  for (size_t i = 0; i < tr->hops.size(); ++i) {
    const uint32_t chip = chip_of_node(tr->hops[i].node);
    nlohmann::json& hop = j["hops"][i];
    hop["chip"] = chip;
    hop["chosen"] = hop["out_port"];
    if (chip < levels_.size()) hop["location"] = {{"level", levels_[chip]}, {"text", ""}};
  }
  return j;
}

Result<nlohmann::json> IbFabric::chip_status(const std::string& text) {
  auto chip = resolve(text);
  if (!chip) return chip.error();
  const uint32_t n = chips_[*chip].node;
  if (n == nm::kNoIbNode)
    return make_error(Code::kNotFound, 8402,
                      fmt::format("chip = '{}' was not found by the last sweep", text));
  const nm::IbSubnet& net = sm_.subnet();
  nm::IbRequester rq(*port_, {});
  auto scan = nm::scan_ib(rq, net, n);
  if (!scan) return scan.error();
  if (scan->read == 0 && scan->failed > 0)
    return make_error(Code::kTimeout, 8403,
                      fmt::format("chip = '{}': no port's counters were read ({})", text,
                                  scan->ports.front().error));
  const int64_t at = now_us();
  auto prev = chip_reads_.find(*chip);
  const bool first_read = prev == chip_reads_.end();
  nlohmann::json ports = nlohmann::json::array();
  nlohmann::json changes = nlohmann::json::array();
  for (const nm::IbPortScan& p : scan->ports) {
    ports.push_back(ib_port_scan_json(net, p));
    if (first_read || !p.read) continue;
    for (const nm::IbPortScan& q : prev->second.first.ports) {
      if (q.port != p.port || !q.read) continue;
      // The counters compared field by field, by their IBA names.
      const nlohmann::json before = ib_counters_json(q.counters),
                           now = ib_counters_json(p.counters);
      for (const auto& [name, v] : now.items())
        if (v != before[name])
          changes.push_back({{"port", p.port.port},
                             {"counter", name},
                             {"old", before[name]},
                             {"new", v},
                             {"delta", v.get<int64_t>() - before[name].get<int64_t>()}});
    }
  }
  nlohmann::json out{
      {"fabric", "ib"},
      {"chip", *chip},
      {"name", plan_->name(*chip)},
      {"ports", ports},
      {"changes", changes},
      {"first_read", first_read},
      {"interval_s", first_read ? 0.0 : static_cast<double>(at - prev->second.second) / 1e6},
      {"requests", scan->requests}};
  chip_reads_[*chip] = {std::move(*scan), at};
  return out;
}

Result<nlohmann::json> IbFabric::chip_routes(const std::string& text) {
  auto chip = resolve(text);
  if (!chip) return chip.error();
  const uint32_t n = chips_[*chip].node;
  if (!chips_[*chip].is_switch)
    return make_error(Code::kInvalidArgument, 8404,
                      fmt::format("chip = '{}' is a CA; forwarding tables live in switches", text));
  if (n == nm::kNoIbNode)
    return make_error(Code::kNotFound, 8405,
                      fmt::format("chip = '{}' was not found by the last sweep", text));
  nlohmann::json ranges = nlohmann::json::array();
  const nm::IbRoutes& routes = sm_.routes();
  if (n < routes.lft.size()) {
    const auto& lft = routes.lft[n];
    for (size_t lid = 1; lid < lft.size();) {
      size_t end = lid;
      while (end + 1 < lft.size() && lft[end + 1] == lft[lid]) ++end;
      if (lft[lid] != wire::kLftNoPort)
        ranges.push_back({{"first_lid", lid}, {"last_lid", end}, {"port", lft[lid]}});
      lid = end + 1;
    }
  }
  return nlohmann::json{{"fabric", "ib"},
                        {"chip", *chip},
                        {"name", plan_->name(*chip)},
                        {"lid", sm_.subnet().held_lid({n, 0})},
                        {"engine", routes.engine.empty() ? "none" : routes.engine},
                        {"ranges", ranges}};
}

}  // namespace galaxy::nmd
