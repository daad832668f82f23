#include "nmd/sm_campaign.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "engine/sim/calibration.h"
#include "engine/sim/fabric_spec.h"
#include "engine/sim/rng.h"
#include "engine/sim/sim_fabric.h"
#include "nm/routing.h"
#include "nmd/daemon.h"

namespace galaxy::nmd {

namespace {

using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Median, 95th percentile and maximum of `v` (milliseconds), or nulls when empty.
nlohmann::json summary_ms(std::vector<double> v) {
  if (v.empty()) return {{"n", 0}, {"median", nullptr}, {"p95", nullptr}, {"max", nullptr}};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {{"n", v.size()}, {"median", at(0.5)}, {"p95", at(0.95)}, {"max", v.back()}};
}

struct Change {
  std::string kind;     // link_down, link_up, chip_kill
  fabric::PortRef end;  // a link's end; a killed chip's node (port 0)
  int64_t at_us = 0;
  int64_t rerouted_us = -1;  // the first routes the master loaded after it
  double compute_ms = 0;     // the master's computation of those routes (wall, this host)
  bool leaderless = false;   // made while no server was master
};

class Campaign {
 public:
  explicit Campaign(const SmCampaignOptions& o) : o_(o), rng_(o.seed) {}
  Result<nlohmann::json> run();

 private:
  const fabric::Topology& plan() const { return fabric_->topology(); }
  int64_t now_us() const {
    return static_cast<int64_t>(fabric_->sim().now() / units::kMicrosecond);
  }
  void say(const std::string& line) const {
    if (o_.progress) o_.progress(line);
  }
  void problem(std::string p) {
    if (problems_.size() < 50) problems_.push_back(std::move(p));
    ++problem_count_;
  }

  Status add_server(uint32_t i);
  // While server `waiting` waits for the fabric: the others answer what reached them.
  void turn(size_t waiting);
  void observe();
  // Every live server takes one step of its loop (1 ms of simulated time each).
  void round();
  // Rounds until `done` or `limit_s` of simulated time.
  bool run_until(const std::function<bool()>& done, double limit_s);
  Daemon* master() const;
  static int64_t routes_at_us(const Daemon& d);

  // The fabric as it now is (what the campaign did to it).
  bool chip_alive(uint32_t node) const { return !dead_[node]; }
  bool link_live(fabric::PortRef p) const;
  // NICs reachable from the master's NIC over live links (never through a NIC).
  std::vector<uint32_t> reachable_nics(uint32_t from_nic) const;
  // Ordered NIC pairs the fabric as it now is connects (within each part when it is cut), as
  // the routes' verification counts them (nm::connected_nic_pairs over the map).
  uint64_t connected_pairs() const;
  std::optional<fabric::PortRef> random_flap_link();
  uint32_t random_kill_chip();

  void set_link(fabric::PortRef end, bool up);
  void kill_chip(uint32_t node);
  // Waits for the master to re-route after `c`, then checks the chips at the change.
  void settle(Change& c);
  void check_change(const Change& c);
  size_t index_of(const Daemon* d) const;
  // Whether `node` was killed by a change before `at_us`.
  bool dead_before(uint32_t node, int64_t at_us) const;
  // Packets for NIC `dest` from every NIC in `reach`, followed through the tables the NRCs hold
  // along every output they allow: each output live, no other NIC reached, no state without a
  // route. "" when so, else what went wrong.
  std::string follow_to(uint32_t dest, const std::vector<uint32_t>& reach) const;
  // follow_to for sampled destinations (all sources each), after a phase.
  nlohmann::json walk_paths(const std::string& phase);
  nlohmann::json check_history();

  const SmCampaignOptions& o_;
  sim::Rng rng_;
  std::shared_ptr<sim::SimFabric> fabric_;
  std::vector<std::unique_ptr<Daemon>> servers_;
  std::vector<uint32_t> server_nics_;            // NIC nodes
  std::vector<bool> dead_;                       // per node
  std::set<std::pair<uint32_t, uint8_t>> down_;  // both ends of links taken down
  std::vector<Change> changes_;
  // The kill in the middle of a sweep.
  std::optional<int64_t> kill_at_us_;
  size_t kill_target_ = 0;
  int64_t killed_at_us_ = -1;
  // At most one master, at every observation.
  uint64_t observations_ = 0;
  size_t max_masters_ = 0;
  std::vector<std::string> problems_;
  uint64_t problem_count_ = 0;
};

Status Campaign::add_server(uint32_t i) {
  DaemonOptions d;
  d.session.fabric = o_.fabric;
  d.session.server_nic = plan().nic_index(server_nics_[i]);
  d.session.seed = o_.seed;
  d.session.shared.fabric = fabric_;
  d.session.shared.serve_others = [this, i] { turn(i); };
  d.db_path = o_.db_path;
  d.routing_engine = o_.routing_engine;
  d.scan_interval_s = 0;   // status scans are not part of the campaign
  d.sweep_interval_s = 0;  // sweeps when a change asks for one (and the takeover's)
  d.sm_priority = std::min<uint32_t>(15, o_.servers - i);
  d.sm_poll_s = o_.sm_poll_s;
  d.sm_poll_retries = o_.sm_poll_retries;
  auto s = Daemon::create(d);
  if (!s.ok()) return s.error();
  servers_.push_back(std::move(*s));
  return {};
}

void Campaign::turn(size_t waiting) {
  for (size_t j = 0; j < servers_.size(); ++j)
    if (j != waiting && !servers_[j]->halted()) servers_[j]->serve_now();
  observe();
  if (kill_at_us_ && now_us() >= *kill_at_us_) {
    servers_[kill_target_]->halt();
    killed_at_us_ = now_us();
    kill_at_us_.reset();
  }
}

void Campaign::observe() {
  size_t masters = 0;
  for (const auto& s : servers_) masters += !s->halted() && s->is_master();
  ++observations_;
  if (masters > max_masters_) max_masters_ = masters;
}

void Campaign::round() {
  for (const auto& s : servers_)
    if (!s->halted()) {
      s->step();
      observe();
    }
}

bool Campaign::run_until(const std::function<bool()>& done, double limit_s) {
  const int64_t end = now_us() + static_cast<int64_t>(limit_s * 1e6);
  while (!done()) {
    if (now_us() > end) return false;
    round();
  }
  return true;
}

Daemon* Campaign::master() const {
  for (const auto& s : servers_)
    if (!s->halted() && s->is_master()) return s.get();
  return nullptr;
}

int64_t Campaign::routes_at_us(const Daemon& d) {
  const nlohmann::json r = d.routes_json();
  return std::max(r.value("loaded_us", int64_t{0}), r.value("rerouted_us", int64_t{0}));
}

bool Campaign::link_live(fabric::PortRef p) const {
  if (dead_[p.node] || down_.count({p.node, p.port})) return false;
  auto peer = plan().peer(p);
  return peer && !dead_[peer->node];
}

std::vector<uint32_t> Campaign::reachable_nics(uint32_t from_nic) const {
  const fabric::Topology& t = plan();
  std::vector<uint32_t> nics;
  std::vector<bool> seen(t.num_nodes(), false);
  std::vector<uint32_t> todo{from_nic};
  seen[from_nic] = true;
  while (!todo.empty()) {
    const uint32_t n = todo.back();
    todo.pop_back();
    if (t.is_nic(n)) {
      nics.push_back(n);
      if (n != from_nic) continue;  // NICs do not forward
    }
    for (uint8_t p = 0; p < t.num_ports(n); ++p) {
      if (!link_live({n, p})) continue;
      const uint32_t m = t.peer({n, p})->node;
      if (!seen[m]) {
        seen[m] = true;
        todo.push_back(m);
      }
    }
  }
  std::sort(nics.begin(), nics.end());
  return nics;
}

uint64_t Campaign::connected_pairs() const {
  return nm::connected_nic_pairs(plan(), [this](fabric::PortRef p) { return link_live(p); });
}

std::optional<fabric::PortRef> Campaign::random_flap_link() {
  const fabric::Topology& t = plan();
  for (int tries = 0; tries < 100000; ++tries) {
    const uint32_t n = static_cast<uint32_t>(rng_.below(t.num_nodes()));
    if (t.is_nic(n) || dead_[n] || t.num_ports(n) == 0) continue;
    const fabric::PortRef p{n, static_cast<uint8_t>(rng_.below(t.num_ports(n)))};
    auto peer = t.peer(p);
    // Between two NRCs (a NIC's only link would cut it off, not re-route it).
    if (!peer || t.is_nic(peer->node) || !link_live(p)) continue;
    return p;
  }
  return std::nullopt;
}

uint32_t Campaign::random_kill_chip() {
  const fabric::Topology& t = plan();
  for (;;) {
    const uint32_t n = static_cast<uint32_t>(rng_.below(t.num_nodes()));
    if (t.is_nic(n) || dead_[n]) continue;
    // Not a server's own NRC: a server cut off from the fabric manages nothing.
    bool near_server = false;
    for (uint32_t s : server_nics_)
      for (uint8_t p = 0; p < t.num_ports(s); ++p)
        if (auto peer = t.peer({s, p}); peer && peer->node == n) near_server = true;
    if (!near_server) return n;
  }
}

void Campaign::set_link(fabric::PortRef end, bool up) {
  const auto peer = plan().peer(end);
  Status st = fabric_->set_link(end, up);
  if (!st.ok())
    problem(fmt::format("set_link {} port {}: {}", end.node, end.port, st.error().to_string()));
  for (fabric::PortRef p : {end, *peer}) {
    if (up)
      down_.erase({p.node, p.port});
    else
      down_.insert({p.node, p.port});
  }
  changes_.push_back({up ? "link_up" : "link_down", end, now_us(), -1, 0, master() == nullptr});
}

void Campaign::kill_chip(uint32_t node) {
  // A chip that loses power: no signal on any of its links.
  for (uint8_t p = 0; p < plan().num_ports(node); ++p)
    if (plan().peer({node, p})) (void)fabric_->set_link({node, p}, false);
  dead_[node] = true;
  changes_.push_back({"chip_kill", {node, 0}, now_us(), -1, 0, master() == nullptr});
}

void Campaign::settle(Change& c) {
  const bool rerouted = run_until(
      [&] {
        Daemon* m = master();
        return m && routes_at_us(*m) > c.at_us;
      },
      o_.change_limit_s);
  if (!rerouted) {
    problem(fmt::format("{} at node {} port {} (t={} us): not re-routed within {} s", c.kind,
                        c.end.node, c.end.port, c.at_us, o_.change_limit_s));
    return;
  }
  c.rerouted_us = routes_at_us(*master());
  c.compute_ms = master()->routes_json().value("compute_ms", 0.0);
  check_change(c);
}

size_t Campaign::index_of(const Daemon* d) const {
  for (size_t i = 0; i < servers_.size(); ++i)
    if (servers_[i].get() == d) return i;
  return 0;
}

void Campaign::check_change(const Change& c) {
  const fabric::Topology& t = plan();
  Daemon* m = master();
  const std::vector<uint32_t> reach = reachable_nics(server_nics_[index_of(m)]);
  const std::string what = fmt::format("{} at {} port {}", c.kind, t.name(c.end.node), c.end.port);
  // The master's routes join every pair of NICs the fabric still connects.
  const nlohmann::json r = m->routes_json();
  const uint64_t connected = connected_pairs();
  if (r.value("reachable_pairs", uint64_t{0}) != connected)
    problem(fmt::format("{}: the master's routes join {} NIC pairs; the fabric connects {}", what,
                        r.value("reachable_pairs", uint64_t{0}), connected));
  std::vector<fabric::PortRef> ends;  // NRC ends next to the change
  if (c.kind == "chip_kill") {
    for (uint8_t p = 0; p < t.num_ports(c.end.node); ++p)
      if (auto peer = t.peer({c.end.node, p}); peer && !t.is_nic(peer->node) && !dead_[peer->node])
        ends.push_back(*peer);
  } else {
    for (fabric::PortRef e : {c.end, *t.peer(c.end)})
      if (!t.is_nic(e.node) && !dead_[e.node]) ends.push_back(e);
  }
  // The destinations a table at the change lets out over it (or, for a link back up, over which
  // it carries routes again). Engines leave the entries of states no packet enters as they were,
  // so a stale entry is no fault by itself: the packets of every NIC for such a destination are
  // followed, and none may meet a dead output.
  std::vector<uint32_t> over;
  for (uint32_t dest : reach) {
    bool hit = false;
    for (fabric::PortRef e : ends) {
      const chip::Nrc& nrc = fabric_->nrc(e.node);
      for (uint8_t in = 0; in < t.num_ports(e.node) && !hit; ++in)
        hit = link_live({e.node, in}) && nrc.allowed_ports(in, dest).test(e.port);
    }
    if (hit) over.push_back(dest);
  }
  if (c.kind == "link_up") {
    if (over.empty()) problem(fmt::format("{}: no NRC routes over the link again", what));
    return;
  }
  // Up to 16 of them, and 4 other destinations.
  std::vector<uint32_t> dests;
  for (size_t k = 0; k < 16 && !over.empty(); ++k) {
    const size_t i = rng_.below(over.size());
    dests.push_back(over[i]);
    over.erase(over.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (int k = 0; k < 4 && !reach.empty(); ++k) dests.push_back(reach[rng_.below(reach.size())]);
  for (uint32_t d : dests)
    if (std::string why = follow_to(d, reach); !why.empty()) {
      problem(fmt::format("{}: {}", what, why));
      return;
    }
}

std::string Campaign::follow_to(uint32_t dest, const std::vector<uint32_t>& reach) const {
  const fabric::Topology& t = plan();
  // Forward over (NRC, input port) states from every source; each state followed once.
  std::set<std::pair<uint32_t, uint8_t>> seen;
  std::vector<fabric::PortRef> todo;
  for (uint32_t src : reach) {
    if (src == dest) continue;
    for (uint8_t p = 0; p < t.num_ports(src); ++p)
      if (link_live({src, p})) {
        const fabric::PortRef in = *t.peer({src, p});
        if (in.node != dest && seen.insert({in.node, in.port}).second) todo.push_back(in);
      }
  }
  while (!todo.empty()) {
    const fabric::PortRef at = todo.back();
    todo.pop_back();
    if (t.is_nic(at.node))
      return fmt::format("packets for NIC {} reach NIC {}", t.name(dest), t.name(at.node));
    const chip::PortSet allowed = fabric_->nrc(at.node).allowed_ports(at.port, dest);
    if (allowed.none())
      return fmt::format("packets for NIC {} meet no route at {} (in port {})", t.name(dest),
                         t.name(at.node), at.port);
    std::string why;
    allowed.for_each([&](unsigned p) {
      if (!why.empty()) return;
      const fabric::PortRef out{at.node, static_cast<uint8_t>(p)};
      if (!link_live(out)) {
        why = fmt::format("packets for NIC {} may leave {} by port {}, which is dead", t.name(dest),
                          t.name(at.node), p);
        return;
      }
      const fabric::PortRef next = *t.peer(out);
      if (next.node != dest && seen.insert({next.node, next.port}).second) todo.push_back(next);
    });
    if (!why.empty()) return why;
  }
  return {};
}

nlohmann::json Campaign::walk_paths(const std::string& phase) {
  Daemon* m = master();
  if (!m) return {{"phase", phase}, {"destinations", 0}, {"failed", 0}};
  const std::vector<uint32_t> reach = reachable_nics(server_nics_[index_of(m)]);
  uint64_t dests = 0, failed = 0;
  for (uint32_t k = 0; k < o_.path_samples && !reach.empty(); ++k) {
    const uint32_t d = reach[rng_.below(reach.size())];
    ++dests;
    if (std::string why = follow_to(d, reach); !why.empty() && failed++ < 3)
      problem(fmt::format("after {}: {}", phase, why));
  }
  return {{"phase", phase}, {"destinations", dests}, {"failed", failed}};
}

nlohmann::json Campaign::check_history() {
  const fabric::Topology& t = plan();
  std::vector<Event> events;
  for (const auto& s : servers_) {
    auto q = s->events().query(
        EventQuery{.kind = EventKind::kFault, .limit = 10'000'000, .newest_first = false});
    if (q.ok()) {
      events = std::move(*q);
      break;
    }
  }
  // (chip, port, cause) -> the times recorded.
  std::map<std::tuple<int64_t, int32_t, std::string>, std::vector<int64_t>> recorded;
  for (const Event& e : events) recorded[{e.chip, e.port, e.cause}].push_back(e.time_us);
  auto found = [&](fabric::PortRef p, const std::string& cause, int64_t after, int64_t before) {
    auto it = recorded.find({p.node, p.port, cause});
    if (it == recorded.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](int64_t at) { return at >= after && at < before; });
  };
  // A change's event comes before the next change of the same link (the campaign waits for
  // each re-route), so a later flap's event never stands for an earlier one.
  auto same_link = [&](const Change& a, const Change& b) {
    if (a.kind == "chip_kill" || b.kind == "chip_kill") return false;
    return a.end == b.end || a.end == *t.peer(b.end);
  };
  uint64_t expected = 0, lost = 0;
  for (size_t i = 0; i < changes_.size(); ++i) {
    const Change& c = changes_[i];
    int64_t before = INT64_MAX;
    for (size_t j = i + 1; j < changes_.size() && before == INT64_MAX; ++j)
      if (same_link(c, changes_[j])) before = changes_[j].at_us;
    std::vector<std::vector<fabric::PortRef>> wanted;  // each: one of these ends records it
    const std::string cause = c.kind == "link_up" ? "link_up" : "link_down";
    if (c.kind == "chip_kill") {
      for (uint8_t p = 0; p < t.num_ports(c.end.node); ++p)
        if (auto peer = t.peer({c.end.node, p}); peer && !t.is_nic(peer->node))
          wanted.push_back({*peer, {c.end.node, p}});
    } else {
      wanted.push_back({c.end, *t.peer(c.end)});
    }
    for (const auto& ends : wanted) {
      // A link whose other end died before this change was reported at that death.
      if (c.kind == "chip_kill" && dead_before(ends[0].node, c.at_us)) continue;
      ++expected;
      if (std::none_of(ends.begin(), ends.end(),
                       [&](fabric::PortRef p) { return found(p, cause, c.at_us, before); })) {
        if (lost++ < 5)
          problem(fmt::format("{} at {} port {} (t={} us{}): not in the fault history", cause,
                              t.name(ends[0].node), ends[0].port, c.at_us,
                              c.leaderless ? ", no master then" : ""));
      }
    }
  }
  return {{"fault_events", events.size()}, {"changes_expected", expected}, {"lost", lost}};
}

bool Campaign::dead_before(uint32_t node, int64_t at_us) const {
  for (const Change& c : changes_)
    if (c.kind == "chip_kill" && c.end.node == node && c.at_us < at_us) return true;
  return false;
}

Result<nlohmann::json> Campaign::run() {
  if (o_.servers < 2 || o_.servers > 8)
    return make_error(Code::kOutOfRange, 8414,
                      fmt::format("servers = {} must be in [2, 8]", o_.servers));
  if (o_.leaderless_downs > o_.flaps)
    return make_error(
        Code::kOutOfRange, 8415,
        fmt::format("leaderless_downs = {} exceeds flaps = {}", o_.leaderless_downs, o_.flaps));
  if (o_.db_path.empty())
    return make_error(Code::kInvalidArgument, 8416, "db_path: the shared event store is needed");
  const auto wall0 = SteadyClock::now();
  auto topo = sim::resolve_topology(o_.fabric);
  if (!topo.ok()) return topo.error();
  auto timing = sim::default_timing();
  if (!timing.ok()) return timing.error();
  sim::SimOptions so;
  so.seed = o_.seed;
  auto f = sim::SimFabric::create(*topo, *timing, so);
  if (!f.ok()) return f.error();
  fabric_ = std::move(*f);
  const fabric::Topology& t = plan();
  if (t.num_nics() < o_.servers)
    return make_error(
        Code::kOutOfRange, 8417,
        fmt::format("the fabric has {} NICs for {} servers", t.num_nics(), o_.servers));
  dead_.assign(t.num_nodes(), false);
  for (uint32_t i = 0; i < o_.servers; ++i)
    server_nics_.push_back(
        t.nic_node(static_cast<uint32_t>(uint64_t{i} * t.num_nics() / o_.servers)));

  // Bring-up: the servers start one after another; the first (highest priority) takes the
  // fabric, the others find it through the chips and stand by.
  nlohmann::json report{{"fabric", o_.fabric},
                        {"nics", t.num_nics()},
                        {"nrcs", t.num_nrcs()},
                        {"links", t.num_links()},
                        {"servers", o_.servers},
                        {"seed", o_.seed},
                        {"sm_poll_s", o_.sm_poll_s},
                        {"sm_poll_retries", o_.sm_poll_retries},
                        {"routing_engine", o_.routing_engine}};
  nlohmann::json bringup = nlohmann::json::array();
  for (uint32_t i = 0; i < o_.servers; ++i) {
    const auto w = SteadyClock::now();
    const int64_t s0 = now_us();
    GALAXY_TRY(add_server(i));
    bringup.push_back({{"server", i},
                       {"nic", t.name(server_nics_[i])},
                       {"role", servers_.back()->sm_json().value("state", "")},
                       {"sim_ms", static_cast<double>(now_us() - s0) / 1e3},
                       {"wall_s", seconds_since(w)}});
    say(fmt::format("server {} up at {} as {}", i, t.name(server_nics_[i]),
                    bringup.back()["role"].get<std::string>()));
  }
  report["bringup"] = bringup;
  // The standbys poll; the master learns them and names its successor.
  run_until([] { return false; }, 2.5 * o_.sm_poll_s);
  if (master() != servers_[0].get()) problem("server 0 (highest priority) is not the master");
  for (size_t i = 1; i < servers_.size(); ++i)
    if (servers_[i]->sm_json().value("state", "") != "standby")
      problem(fmt::format("server {} is not standby", i));
  nlohmann::json paths = nlohmann::json::array();
  paths.push_back(walk_paths("bring-up"));

  // The master dies in the middle of a sweep, and links go down while nobody is master.
  Daemon* old = master();
  nlohmann::json failover;
  if (old) {
    const int64_t s0 = now_us();
    (void)old->sweep_now();
    const int64_t sweep_us = now_us() - s0;
    const double fraction = 0.2 + 0.6 * rng_.uniform();
    kill_target_ = index_of(old);
    kill_at_us_ = now_us() + static_cast<int64_t>(fraction * static_cast<double>(sweep_us));
    const int64_t s1 = now_us();
    (void)old->sweep_now();
    if (killed_at_us_ < 0) {
      problem("the sweep ended before the master was killed");
      old->halt();
      killed_at_us_ = now_us();
    }
    kill_at_us_.reset();
    failover["sweep_sim_ms"] = static_cast<double>(sweep_us) / 1e3;
    failover["killed_into_sweep_ms"] = static_cast<double>(killed_at_us_ - s1) / 1e3;
    say(fmt::format("master (server {}) killed {:.1f} ms into a {:.1f} ms sweep", kill_target_,
                    static_cast<double>(killed_at_us_ - s1) / 1e3,
                    static_cast<double>(sweep_us) / 1e3));
    std::vector<fabric::PortRef> leaderless;
    for (uint32_t k = 0; k < o_.leaderless_downs; ++k)
      if (auto l = random_flap_link()) {
        set_link(*l, false);
        leaderless.push_back(*l);
      }
    const double limit = 3.0 * o_.sm_poll_s * (o_.sm_poll_retries + 2);
    if (run_until([&] { return master() != nullptr; }, limit)) {
      Daemon* m = master();
      // When the new master said so itself (its takeover event), not when this loop looked.
      int64_t became = now_us();
      auto taken = m->events().query(EventQuery{.since_us = killed_at_us_,
                                                .kind = EventKind::kLog,
                                                .limit = 100000,
                                                .newest_first = false});
      if (taken.ok())
        for (const Event& e : *taken)
          if (e.cause == "takeover") {
            became = e.time_us;
            break;
          }
      failover["new_master"] = index_of(m);
      failover["time_to_new_master_ms"] = static_cast<double>(became - killed_at_us_) / 1e3;
      if (run_until([&] { return master() && routes_at_us(*master()) > killed_at_us_; },
                    o_.change_limit_s)) {
        failover["time_to_reroute_ms"] =
            static_cast<double>(routes_at_us(*master()) - killed_at_us_) / 1e3;
        failover["takeover_compute_ms"] = master()->routes_json().value("compute_ms", 0.0);
        for (Change& c : changes_) {
          c.rerouted_us = routes_at_us(*master());
          check_change(c);
        }
      } else {
        problem("the new master did not route");
      }
      say(fmt::format("server {} master {:.0f} ms after the kill", index_of(m),
                      failover["time_to_new_master_ms"].get<double>()));
    } else {
      problem(fmt::format("no new master within {} s of simulated time", limit));
    }
    // The leaderless downs come back up, as the first flaps.
    for (fabric::PortRef l : leaderless) {
      set_link(l, true);
      settle(changes_.back());
    }
  }
  report["failover"] = failover;
  paths.push_back(walk_paths("failover"));

  // Links flap one after another: down, re-routed, up, re-routed.
  for (uint32_t k = o_.leaderless_downs; k < o_.flaps; ++k) {
    auto l = random_flap_link();
    if (!l) {
      problem("no link left to flap");
      break;
    }
    set_link(*l, false);
    settle(changes_.back());
    set_link(*l, true);
    settle(changes_.back());
    if ((k + 1) % 10 == 0) say(fmt::format("{} of {} flaps", k + 1, o_.flaps));
  }
  paths.push_back(walk_paths("flaps"));
  // Chips die one after another.
  for (uint32_t k = 0; k < o_.chip_kills; ++k) {
    kill_chip(random_kill_chip());
    settle(changes_.back());
  }
  if (o_.chip_kills > 0) say(fmt::format("{} chips killed", o_.chip_kills));
  paths.push_back(walk_paths("chip kills"));
  report["paths"] = paths;

  // Figures and checks.
  // Simulated time from the change to the routes (the fabric and the protocol: reports,
  // re-discovery, loading), the master's computation on this host (which simulated time does
  // not count), and the two together.
  struct Times {
    std::vector<double> sim, compute, total;
  };
  std::map<std::string, Times> times;
  uint64_t not_rerouted = 0;
  for (const Change& c : changes_) {
    if (c.rerouted_us < 0) {
      ++not_rerouted;
      continue;
    }
    if (c.leaderless) continue;
    Times& t = times[c.kind];
    const double sim_ms = static_cast<double>(c.rerouted_us - c.at_us) / 1e3;
    t.sim.push_back(sim_ms);
    t.compute.push_back(c.compute_ms);
    t.total.push_back(sim_ms + c.compute_ms);
  }
  nlohmann::json per_kind = nlohmann::json::object();
  for (const auto& [kind, t] : times)
    per_kind[kind] = {{"simulated", summary_ms(t.sim)},
                      {"compute", summary_ms(t.compute)},
                      {"total", summary_ms(t.total)}};
  report["time_to_reroute_ms"] = per_kind;
  report["changes"] = {{"count", changes_.size()}, {"not_rerouted", not_rerouted}};
  report["masters"] = {{"observations", observations_}, {"max_at_once", max_masters_}};
  if (max_masters_ > 1) problem(fmt::format("{} masters at once", max_masters_));
  if (!master()) problem("no master at the end");
  report["history"] = check_history();
  report["sim_s"] = static_cast<double>(now_us()) / 1e6;
  report["wall_s"] = seconds_since(wall0);
  report["problems"] = problems_;
  report["problem_count"] = problem_count_;
  report["passed"] = problem_count_ == 0;
  return report;
}

}  // namespace

Result<nlohmann::json> run_sm_campaign(const SmCampaignOptions& options) {
  Campaign c(options);
  return c.run();
}

}  // namespace galaxy::nmd
