#include "nmd/daemon.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include "base/json_text.h"
#include "base/log.h"
#include "base/spec.h"
#include "chip/chip.h"
#include "chip/register_names.h"
#include "ib/umad_port.h"
#include "nm/reroute.h"
#include "nm/route_load.h"
#include "nmd/inject.h"
#include "nmd/ops.h"
#include "nmd/scan_json.h"
#include "wire/flit.h"

namespace galaxy::nmd {

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

EventSeverity severity_of(const std::string& name) {
  auto s = parse_event_severity(name);
  return s.ok() ? *s : EventSeverity::kMajor;
}

// The status registers by name (nm/scan.h order).
size_t reg_index(std::string_view name) {
  for (size_t i = 0; i < nm::kStatusRegisters; ++i)
    if (nm::status_registers()[i].name == name) return i;
  return 0;
}

// Work that reads the whole fabric (a status scan, the fault audit) holds the session in slices
// of about kSessionSliceS of wall time and lets the requests that wait for it (a trace, a
// register read) in between: such a request waits about one slice, whatever the fabric's size
// and the machine's speed.
constexpr double kSessionSliceS = 0.04;

// How many items (chips scanned, chips audited) the next slice takes: as many as the last
// slice's time per item says fit in kSessionSliceS, within [1, most].
class SliceSize {
 public:
  SliceSize(uint32_t first, uint32_t most) : size_(first), most_(most) {}
  uint32_t get() const { return size_; }
  void took(uint32_t items, double seconds) {
    if (items == 0) return;
    const double per_item = std::max(seconds, 1e-9) / items;
    size_ = static_cast<uint32_t>(std::clamp(kSessionSliceS / per_item, 1.0, double(most_)));
  }

 private:
  uint32_t size_, most_;
};

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::create(const DaemonOptions& options) {
  // Written so that nan fails too; inf or 1e300 would overflow the loop's int64 deadlines.
  for (auto [field, v] : {std::pair{"scan_interval_s", options.scan_interval_s},
                          std::pair{"sweep_interval_s", options.sweep_interval_s},
                          std::pair{"fault_audit_s", options.fault_audit_s}})
    if (!(v >= 0 && v <= kMaxIntervalS))
      return make_error(
          Code::kOutOfRange, 8210,
          fmt::format("{} = {} must be a number in [0, {}] (0: none)", field, v, kMaxIntervalS));
  if (!(options.retention_s == 0 ||
        (options.retention_s >= 1 && options.retention_s <= kMaxRetentionS)))
    return make_error(Code::kOutOfRange, 8082,
                      fmt::format("retention = {} s: must be 0 (keep every event) or from 1 s to "
                                  "{} s",
                                  options.retention_s, kMaxRetentionS));
  if (!(options.sm_poll_s >= 0.001 && options.sm_poll_s <= kMaxIntervalS))
    return make_error(Code::kOutOfRange, 8409,
                      fmt::format("sm_poll_s = {} must be a number in [0.001, {}] (seconds "
                                  "between a standby's polls of the master)",
                                  options.sm_poll_s, kMaxIntervalS));
  if (options.sm_poll_retries < 1 || options.sm_poll_retries > 100)
    return make_error(Code::kOutOfRange, 8410,
                      fmt::format("sm_poll_retries = {} must be in [1, 100] (polls the master "
                                  "may miss)",
                                  options.sm_poll_retries));
  if (options.sm_priority > 15)
    return make_error(
        Code::kOutOfRange, 8408,
        fmt::format("sm_priority = {} must be in [0, 15] (SMInfo priority)", options.sm_priority));
  std::unique_ptr<Daemon> d(new Daemon(options));
  GALAXY_TRY(d->init());
  return d;
}

Daemon::~Daemon() {
  stop();
}

Status Daemon::init() {
  started_us_ = clock_us();
  config_ = {options_.routing_engine, options_.scan_interval_s, options_.sweep_interval_s,
             options_.fault_mask};
  GALAXY_TRY(register_galaxy_metrics(metrics_));
  auto store = EventStore::open(options_.db_path);
  if (!store.ok()) return store.error();
  events_ = std::move(*store);
  auto newest = events_->query(EventQuery{.limit = 1, .newest_first = true});
  if (newest.ok() && !newest->empty()) newest_event_ = newest->front().id;

  auto region = parse_region(options_.region);
  if (!region.ok()) return region.error();
  region_ = std::move(*region);
  if (ib::is_ib_fabric(options_.session.fabric)) return init_ib();
  auto s = open_session(options_.session);
  if (!s.ok()) return s.error();
  session_ = std::move(*s);
  if (!region_.clauses.empty()) {
    const fabric::Topology& plan = session_.plan();
    region_chips_.resize(plan.num_nodes());
    size_t inside = 0;
    for (uint32_t n = 0; n < plan.num_nodes(); ++n)
      inside += region_chips_[n] = region_.contains(plan.location(n), plan.level(n));
    if (inside == 0)
      return make_error(Code::kInvalidArgument, 8224,
                        fmt::format("--region = '{}' holds no chip of the fabric", region_.text));
    region_nodes_ = [this](uint32_t node) {
      return in_region(session_.discovery.map.chip_id[node]);
    };
  }
  std::lock_guard lock(mu_);
  // With a key, every request carries it from the first: a restarted server finds its chips as
  // it left them, and a chip another server protects refuses this one (until its lease ends).
  session_.requester->set_m_key(options_.mkey);
  const auto t0 = std::chrono::steady_clock::now();
  SessionOptions pipelined = options_.session;
  pipelined.serial = false;
  GALAXY_TRY(discover(session_, pipelined));
  const nm::FabricMap& map = session_.discovery.map;
  note({.kind = EventKind::kLog,
        .cause = "discovery",
        .detail = fmt::format("{} chips, {} links found in {:.0f} ms", map.num_nodes(),
                              map.topology.num_links(), seconds_since(t0) * 1e3)});
  // Other servers of this fabric (nm/galaxy_sm.h): the chips name the master; a master that
  // answers is followed, else this server takes the fabric.
  nm::GalaxySmOptions so;
  so.guid = options_.sm_guid;
  so.priority = static_cast<uint8_t>(options_.sm_priority);
  so.sm_key = options_.sm_key;
  so.poll_interval = static_cast<nm::Picoseconds>(options_.sm_poll_s * 1e6) * nm::kUs;
  so.poll_retries = options_.sm_poll_retries;
  sm_ = std::make_unique<nm::GalaxySm>(*session_.requester, so);
  auto role = sm_->elect(map, region_nodes_);
  if (!role.ok()) return role.error();
  uint64_t reporting = 0;
  if (*role == wire::SmState::kStandby) {
    const nm::SmPeer& m = *sm_->master();
    note({.kind = EventKind::kLog,
          .cause = "standby",
          .detail = fmt::format("the master is server {:016x} (priority {}) at NIC {} VP {}; "
                                "this server polls it every {} s",
                                m.info.guid, m.info.priority, m.chip, m.vp, options_.sm_poll_s)});
  } else {
    auto taken = take_fabric_locked();
    if (!taken.ok()) return taken.error();
    reporting = *taken;
  }
  // Every management request the daemon sends: its type, outcome and latency (simulated time
  // on a simulated fabric).
  session_.requester->set_reply_observer([this](const nm::MgmtRequest& q, const nm::MgmtReply& r) {
    const std::string type(wire::nmp_type_name(q.type));
    const char* outcome = r.status.ok()                             ? "ok"
                          : r.status.error().code == Code::kTimeout ? "timeout"
                                                                    : "refused";
    if (MetricFamily* f = metrics_.find(kMgmtRequestsTotal))
      (void)f->add({{"type", type}, {"outcome", outcome}}, 1);
    if (MetricFamily* h = metrics_.find(kMgmtRequestLatencySeconds); h && r.status.ok())
      (void)h->observe({{"type", type}}, static_cast<double>(r.latency) / nm::kSec);
  });
  session_.requester->set_fault_handler([this](const wire::MgmtPacket& p) {
    pending_faults_.push_back(nm::decode_fault(p, session_.discovery.map, session_.port->now()));
  });
  ledger_ = std::make_unique<nm::FaultLedger>(session_.plan());
  // What the first discovery found is what this server believes of every link until reports,
  // reads or the master's events say more: a standby that takes over later finds by its sweep
  // what changed while no server managed the fabric.
  for_each_managed_link_locked(
      map, [&](uint32_t chip, uint8_t p, bool up) { (void)ledger_->observe_state(chip, p, up); });
  const int64_t now = clock_us();
  next_audit_us_ = now;  // the first audit learns every chip's report count
  next_scan_us_ = now;   // the first scan at once: the console starts with counters
  next_sweep_us_ = now + static_cast<int64_t>(config_.sweep_interval_s * 1e6);
  next_sm_us_ = now + static_cast<int64_t>(options_.sm_poll_s * 1e6);
  followed_event_ = newest_event_;
  rebuild_view_locked();
  publish_locked();
  note({.kind = EventKind::kLog,
        .cause = "daemon started",
        .detail = fmt::format(
            "fabric {}; {}; fault reporting on {} chips; events in {}", options_.session.fabric,
            wire::sm_state_name(static_cast<uint8_t>(sm_->state())), reporting, options_.db_path)});
  return {};
}

Status Daemon::init_ib() {
  if (!region_.clauses.empty())
    return make_error(Code::kInvalidArgument, 8406,
                      fmt::format("--region = '{}': regions divide Galaxy's machine rooms; an "
                                  "InfiniBand subnet has one SM and is managed whole",
                                  region_.text));
  // One key for the subnet, as OpenSM's m_key (per-port keys, OpenSM's guid2mkey, are not
  // placed); the level is the M_Key protect bits.
  if (options_.mkey.enabled() && options_.mkey.per_chip)
    return make_error(Code::kUnsupported, 8412,
                      "--mkey-per-chip on an InfiniBand subnet: the SM places one M_Key for the "
                      "subnet (OpenSM's m_key); per-port keys are not supported");
  nm::IbSmOptions sm;
  sm.priority = static_cast<uint8_t>(options_.sm_priority);
  sm.sm_key = options_.sm_key;
  if (options_.mkey.enabled()) {
    sm.m_key = options_.mkey.key;
    sm.m_key_protect = options_.mkey.level;
    sm.m_key_lease_s = options_.mkey.lease_s;
  }
  auto f = IbFabric::open(
      options_.session.fabric, [this](Event e) { note(std::move(e)); }, sm);
  if (!f) return f.error();
  ib_ = std::move(*f);
  // Other SMs find this one (IsSM) and read its SMInfo, answered between the loop's steps.
  if (Status s = ib_->serve_sm_info(); !s)
    note({.kind = EventKind::kAlarm,
          .severity = EventSeverity::kMinor,
          .cause = "SMInfo not served",
          .detail = fmt::format("other SMs will not find this one: {}", s.error().to_string())});
  std::lock_guard lock(mu_);
  auto swept = sweep_ib_locked(config_.routing_engine);
  if (!swept) return swept.error();
  const int64_t now = clock_us();
  next_scan_us_ = now;  // the first scan at once: the console starts with counters
  next_sweep_us_ = now + static_cast<int64_t>(config_.sweep_interval_s * 1e6);
  publish_locked();
  note({.kind = EventKind::kLog,
        .cause = "daemon started",
        .detail = fmt::format("InfiniBand subnet {} (Galaxy is its SM); events in {}",
                              options_.session.fabric, options_.db_path)});
  return {};
}

// A heavy sweep of the InfiniBand subnet (IbFabric::sweep), counted as a sweep and a routing.
Result<nlohmann::json> Daemon::sweep_ib_locked(const std::string& engine) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ib_->sweep(engine);
  const double wall_s = seconds_since(t0);
  ++counters_.sweeps;
  counters_.last_sweep_s = wall_s;
  counters_.last_sweep_us = clock_us();
  if (MetricFamily* h = metrics_.find(kSweepDurationSeconds)) (void)h->observe({}, wall_s);
  if (!r) {
    note({.kind = EventKind::kLog,
          .severity = EventSeverity::kMajor,
          .cause = "sweep failed",
          .detail = r.error().to_string()});
    return r.error();
  }
  (*r)["wall_s"] = wall_s;
  routes_summary_ = ib_->routes_summary();
  rebuild_view_locked();
  return r;
}

Result<nlohmann::json> Daemon::scan_ib() {
  auto lock = lock_session();
  last_scan_started_us_ = clock_us();
  auto r = ib_->scan();
  if (!r) return r.error();
  const double wall_s = (*r)["wall_s"].get<double>();
  ++counters_.scans;
  counters_.last_scan_s = wall_s;
  counters_.last_scan_us = clock_us();
  if (MetricFamily* h = metrics_.find(kScanDurationSeconds)) (void)h->observe({}, wall_s);
  note({.kind = EventKind::kScanSummary,
        .severity = (*r)["ports_failed"].get<uint64_t>() == 0 ? EventSeverity::kInfo
                                                              : EventSeverity::kMajor,
        .cause = "status scan",
        .detail = json_text(*r)});
  rebuild_view_locked();
  return r;
}

const fabric::Topology& Daemon::plan_locked() const {
  return ib_ ? ib_->plan() : session_.plan();
}

Status Daemon::require_galaxy(std::string_view what) const {
  if (!ib_) return {};
  return make_error(Code::kUnsupported, 8407,
                    fmt::format("{} acts on Galaxy's chips; this daemon serves the InfiniBand "
                                "subnet {}, where IBA has no such operation",
                                what, options_.session.fabric));
}

Result<nlohmann::json> Daemon::trace(const std::string& src, const std::string& dst) {
  auto lock = lock_session();
  if (ib_) return ib_->trace(src, dst);
  auto a = resolve(session_, src);
  if (!a.ok()) return a.error();
  auto b = resolve(session_, dst);
  if (!b.ok()) return b.error();
  if (*a == *b)
    return make_error(Code::kInvalidArgument, 8233,
                      fmt::format("src = dst = '{}': give two different NICs", src));
  return trace_op(session_, *a, *b, false);
}

void Daemon::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Daemon::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

int64_t Daemon::clock_us() const {
  if (options_.session.shared.fabric)
    return static_cast<int64_t>(options_.session.shared.fabric->sim().now() / nm::kUs);
  return wall_us();
}

void Daemon::loop() {
  while (!stop_) {
    std::this_thread::sleep_for(
        std::chrono::microseconds(static_cast<int64_t>(options_.tick_ms * 1000)));
    step();
  }
}

void Daemon::step() {
  if (halted_) return;
  prune_events();
  bool scan_due = false, audit_due = false, reroute_due = false;
  {
    std::lock_guard lock(mu_);
    tick_locked();
    const int64_t now = clock_us();
    // A Galaxy fabric's master (an InfiniBand daemon has no election of its own).
    const bool master = !ib_ && sm_->state() == wire::SmState::kMaster;
    scan_due = config_.scan_interval_s > 0 && now >= next_scan_us_ && (ib_ || master);
    audit_due = master && options_.fault_audit_s > 0 && now >= next_audit_us_;
    reroute_due = master && reroute_pending_ && now >= next_reroute_us_;
  }
  if (reroute_due && !halted_) reroute();
  if (audit_due && !halted_) audit_faults();
  if (scan_due && !halted_) {
    (void)scan_batched();
    std::lock_guard lock(mu_);
    next_scan_us_ = clock_us() + static_cast<int64_t>(config_.scan_interval_s * 1e6);
    publish_locked();
  }
}

void Daemon::serve_now() {
  if (halted_ || ib_) return;
  std::lock_guard lock(mu_);
  if (session_.requester) session_.requester->poll();
}

void Daemon::halt() {
  halted_ = true;
  if (session_.cooperative) session_.cooperative->stop();
}

void Daemon::tick_locked() {
  if (ib_) {
    // InfiniBand: no fault reports to collect (traps are the subnet's); other SMs' SMInfo
    // requests answered; sweeps on schedule.
    ib_->serve(1);
    const bool now = ib_->handover_received() || ib_->discover_requested();
    if ((config_.sweep_interval_s > 0 && clock_us() >= next_sweep_us_) || now) {
      // Scheduled sweeps are light unless a switch reports a change (POST /api/discover is
      // always heavy); none while an SMInfo Set DISABLE holds the SM NOT ACTIVE.
      if (now || ib_->heavy_sweep_due()) (void)sweep_locked();
      next_sweep_us_ = clock_us() + static_cast<int64_t>(config_.sweep_interval_s * 1e6);
    }
    publish_locked();
    return;
  }
  // Let time pass on the fabric so that reports in flight arrive: simulated time on a
  // simulated fabric; on a live one the requester polls its queue for a moment.
  const double us = session_.fabric ? options_.sim_us_per_tick : 1000;
  session_.requester->drain_faults(static_cast<nm::Picoseconds>(us * nm::kUs));
  if (const int64_t started = clock_us(); started >= next_sm_us_) {
    // Every interval from the start of the last poll: a poll that waits for a silent master
    // does not stretch the interval (a lost master is replaced after interval x retries).
    sm_step_locked();
    next_sm_us_ = started + static_cast<int64_t>(options_.sm_poll_s * 1e6);
  }
  if (sm_->state() != wire::SmState::kMaster) {
    // A standby (or a server told to stand still) writes nothing and scans nothing: it answers
    // SMInfo, polls the master and follows the master's events.
    pending_faults_.clear();
    follow_store_locked();
    publish_locked();
    return;
  }
  if (!pending_faults_.empty()) handle_faults_locked();
  const int64_t now = clock_us();
  if ((config_.sweep_interval_s > 0 && now >= next_sweep_us_) || sweep_due_) {
    sweep_due_ = false;
    (void)sweep_locked();
    next_sweep_us_ = clock_us() + static_cast<int64_t>(config_.sweep_interval_s * 1e6);
  }
  publish_locked();
}

void Daemon::prune_events() {
  if (options_.retention_s <= 0) return;
  const int64_t now = clock_us();
  if (now < next_prune_us_) return;
  const double every_s = std::clamp(options_.retention_s / 10, 1.0, 60.0);
  next_prune_us_ = now + static_cast<int64_t>(every_s * 1e6);
  const int64_t cutoff = now - static_cast<int64_t>(options_.retention_s * 1e6);
  auto n = events_->prune_older_than(cutoff);
  if (!n.ok()) {
    std::fprintf(stderr, "galaxy nmd: %s\n", n.error().to_string().c_str());
    return;
  }
  if (*n == 0) return;
  {
    // Not while a rebuild of the view is publishing its own counts.
    std::lock_guard lock(mu_);
    refresh_fault_counts();
  }
  note({.kind = EventKind::kLog,
        .cause = "events pruned",
        .detail = fmt::format("{} events older than the retention of {} s deleted", *n,
                              options_.retention_s)});
}

void Daemon::publish_locked() {
  // The ledger keeps its own counts; the published counters read them.
  if (ledger_) {
    counters_.faults_merged = ledger_->merged();
    counters_.faults_inferred = ledger_->inferred();
  }
  publish_sm_locked();
  std::lock_guard lock(published_mu_);
  published_ = {config_, counters_, routes_summary_};
}

std::string Daemon::location_of(uint32_t plan_node, int port) const {
  const fabric::Topology& plan = plan_locked();
  if (plan_node >= plan.num_nodes()) return fmt::format("chip {}", plan_node);
  std::string where = location_text(plan.location(plan_node));
  std::string out = where.empty() ? plan.name(plan_node) : where + " " + plan.name(plan_node);
  if (port >= 0) out += fmt::format(" port {}", port);
  return out;
}

Event Daemon::fault_event(const nm::FaultRecord& f) const {
  Event e;
  e.kind = EventKind::kFault;
  e.severity = severity_of(f.severity);
  e.chip = f.chip;
  e.port = f.port;
  e.location = location_of(f.chip, f.port);
  e.cause = f.cause;
  e.detail = json_text(nlohmann::json{{"code", f.code},
                                      {"detail", f.detail},
                                      {"reported_at", f.location},
                                      {"sim_time_us", static_cast<double>(f.time) / nm::kUs}});
  return e;
}

void Daemon::handle_faults_locked() {
  std::vector<std::pair<uint32_t, uint8_t>> downs;
  bool any_up = false;
  take_reports_locked(downs, any_up);
  check_chips_locked(downs, any_up);
  after_link_changes_locked(downs, any_up);
}

void Daemon::take_reports_locked(std::vector<std::pair<uint32_t, uint8_t>>& downs, bool& any_up) {
  std::vector<nm::FaultRecord> faults;
  faults.swap(pending_faults_);
  MetricFamily* total = metrics_.find(kFaultsTotal);
  for (const nm::FaultRecord& f : faults) {
    ++counters_.faults;
    if (total) (void)total->add({{"severity", f.severity}, {"cause", f.cause}}, 1);
    if (ledger_->sequence_gap(f.chip, f.sequence)) to_check_.insert(f.chip);
    const bool up = f.cause == "link_up";
    if (!up && f.cause != "link_down") {
      note(fault_event(f));
      continue;
    }
    for (const nm::LinkChange& c : ledger_->report(f.chip, f.port, up, f.detail))
      record_link_change_locked(c, &f, "a later report of the link", downs, any_up);
  }
}

void Daemon::record_link_change_locked(const nm::LinkChange& c, const nm::FaultRecord* report,
                                       const char* found_by,
                                       std::vector<std::pair<uint32_t, uint8_t>>& downs,
                                       bool& any_up) {
  const auto code = c.up ? chip::FaultCode::kLinkUp : chip::FaultCode::kLinkDown;
  Event e;
  e.kind = EventKind::kFault;
  e.severity = static_cast<EventSeverity>(chip::fault_severity(code));
  e.chip = c.chip;
  e.port = c.port;
  e.location = location_of(c.chip, c.port);
  e.cause = std::string(chip::fault_name(code));
  nlohmann::json detail{
      {"code", static_cast<int>(code)}, {"handshakes", c.handshakes}, {"inferred", c.inferred}};
  if (report && !c.inferred) {
    detail["reported_at"] = report->location;
    detail["sim_time_us"] = static_cast<double>(report->time) / nm::kUs;
  } else {
    // No report of this change arrived: a later report or a read of the port proves it.
    detail["found_by"] = found_by;
  }
  e.detail = json_text(detail);
  note(std::move(e));
  const std::pair<wire::ChipId, uint8_t> end{static_cast<wire::ChipId>(c.chip), c.port};
  if (c.up) {
    // Either end may have recorded the down: the link is up at both.
    reported_down_.erase(end);
    const fabric::Topology& plan = session_.plan();
    if (c.chip < plan.num_nodes() && c.port < plan.num_ports(c.chip))
      if (auto peer = plan.peer({c.chip, c.port}))
        reported_down_.erase({static_cast<wire::ChipId>(peer->node), peer->port});
    any_up = true;
  } else {
    reported_down_[end] = clock_us();
    downs.emplace_back(c.chip, c.port);
  }
}

void Daemon::alarm_link_down_locked(uint32_t chip, uint8_t port, std::string detail) {
  note({.kind = EventKind::kAlarm,
        .severity = EventSeverity::kCritical,
        .location = location_of(chip, port),
        .chip = chip,
        .port = port,
        .cause = "link down",
        .detail = std::move(detail)});
}

void Daemon::check_chips_locked(std::vector<std::pair<uint32_t, uint8_t>>& downs, bool& any_up) {
  const fabric::Topology& plan = session_.plan();
  // Bounded: reports arriving during the reads may reveal more gaps.
  for (size_t round = 0; !to_check_.empty() && round < 4 * plan.num_nodes() + 4; ++round) {
    const uint32_t chip = *to_check_.begin();
    to_check_.erase(to_check_.begin());
    const nm::FabricMap& map = session_.discovery.map;
    auto node = map.node_of.find(static_cast<wire::ChipId>(chip));
    if (node == map.node_of.end() || map.hops[node->second] == UINT8_MAX) continue;
    auto links = nm::read_port_links(*session_.requester, map, node->second);
    ++counters_.chips_checked;
    // Reports that arrived during the reads go first: they tell what the reads would infer.
    take_reports_locked(downs, any_up);
    if (!links.ok()) {
      // Its route crosses a link that is down (or the chip is gone): discovery finds which.
      sweep_due_ = true;
      continue;
    }
    for (const nm::PortLink& l : *links) {
      if (chip >= plan.num_nodes() || l.port >= plan.num_ports(chip) || !plan.peer({chip, l.port}))
        continue;
      for (const nm::LinkChange& c :
           ledger_->observe(chip, l.port, l.up, l.handshakes & 0xFFFFFFFF))
        record_link_change_locked(c, nullptr, "a read of the port", downs, any_up);
    }
  }
}

void Daemon::audit_faults() {
  auto lock = lock_session();
  const nm::FabricMap& map = session_.discovery.map;
  const uint64_t generation = map_generation_;
  std::vector<uint32_t> nodes;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (v != map.server_node && map.hops[v] != UINT8_MAX && (!region_nodes_ || region_nodes_(v)))
      nodes.push_back(v);
  ++counters_.audits;
  // One quick try per chip: a chip that does not answer brings a sweep, which finds why. The
  // requests let in between slices keep the usual options.
  const nm::RequesterOptions usual = session_.requester->options();
  nm::RequesterOptions quick = usual;
  quick.retries = 0;
  quick.timeout = std::min<nm::Picoseconds>(usual.timeout, 200 * nm::kMs);
  const uint64_t mine = nm::fault_dest_of(*session_.port);
  std::set<uint32_t> astray;
  size_t answered = 0;
  SliceSize slice(256, 4096);
  for (size_t first = 0; first < nodes.size();) {
    if (first > 0) {
      let_waiters_in(lock);
      // A sweep replaced the map, or this server is master no more: the next audit reads anew.
      if (map_generation_ != generation || sm_->state() != wire::SmState::kMaster) break;
    }
    const size_t end = std::min(nodes.size(), first + slice.get());
    const std::vector<uint32_t> part(nodes.begin() + static_cast<ptrdiff_t>(first),
                                     nodes.begin() + static_cast<ptrdiff_t>(end));
    const auto t0 = std::chrono::steady_clock::now();
    session_.requester->set_options(quick);
    const auto counts = nm::read_fault_audit(*session_.requester, map, part);
    session_.requester->set_options(usual);
    slice.took(static_cast<uint32_t>(part.size()), seconds_since(t0));
    answered += counts.size();
    // A chip whose reports go to another server (two servers that took a fresh fabric at once,
    // or writes lost): this master writes its reporting again, so that no report goes astray.
    for (const nm::FaultAuditRead& a : counts) {
      if (ledger_->missing_reports(map.chip_id[a.node], a.reported))
        to_check_.insert(map.chip_id[a.node]);
      if (a.fault_dest != mine) astray.insert(a.node);
    }
    first = end;
    if (first == nodes.size() && answered < nodes.size())
      // A chip that no longer answers on its route: a link on the route is down, and the
      // chip's report of it may be what was lost. Discovery finds which.
      sweep_due_ = true;
  }
  next_audit_us_ = clock_us() + static_cast<int64_t>(options_.fault_audit_s * 1e6);
  if (map_generation_ != generation) return;
  if (!astray.empty()) {
    auto setup = nm::enable_fault_reporting(*session_.requester, map, config_.fault_mask,
                                            [&](uint32_t v) { return astray.count(v) > 0; });
    note({.kind = EventKind::kLog,
          .severity = EventSeverity::kMinor,
          .cause = "fault reporting reclaimed",
          .detail = setup.ok() ? fmt::format("{} chips reported to another server; {} now report "
                                             "to this one ({} writes failed)",
                                             astray.size(), setup->chips, setup->failed)
                               : setup.error().to_string()});
  }
  // Reports that arrived meanwhile go first: they may account for what is missing.
  if (!to_check_.empty() || !pending_faults_.empty()) handle_faults_locked();
  publish_locked();
}

void Daemon::let_waiters_in(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  // Whoever waits for the session goes now, for at most 200 ms, then the next slice.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (session_waiters_.load(std::memory_order_acquire) > 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  lock.lock();
}

void Daemon::after_link_changes_locked(const std::vector<std::pair<uint32_t, uint8_t>>& downs,
                                       bool any_up) {
  // A link that came back is found by a sweep (region re-discovery only removes links), at once
  // whether or not sweeps are scheduled.
  if (any_up) sweep_due_ = true;
  bool reroute = false;  // once for the whole batch
  if (!downs.empty()) {
    // One re-discovery for the batch: the reports of a chip's neighbours when it died arrive
    // together, and a silent chip then costs one timeout.
    std::vector<std::pair<wire::ChipId, uint8_t>> reported;
    for (auto [chip, port] : downs) reported.push_back({static_cast<wire::ChipId>(chip), port});
    const std::string from = downs.size() == 1 ? location_of(downs[0].first, downs[0].second)
                                               : fmt::format("{} ports", downs.size());
    auto upd = nm::rediscover_region(*session_.requester, session_.discovery.map, reported);
    ++map_edits_;
    if (!upd.ok()) {
      note({.kind = EventKind::kLog,
            .severity = EventSeverity::kMajor,
            .location = location_of(downs[0].first, downs[0].second),
            .chip = downs[0].first,
            .cause = "region re-discovery failed",
            .detail = upd.error().to_string()});
    } else {
      for (auto [c, p] : upd->links_down)
        alarm_link_down_locked(c, p,
                               fmt::format("found down after a report from {}; {} source routes "
                                           "changed, {} chips unreachable",
                                           from, upd->routes_changed, upd->unreachable));
      for (wire::ChipId c : upd->silent)
        note({.kind = EventKind::kAlarm,
              .severity = EventSeverity::kMajor,
              .location = location_of(c, -1),
              .chip = c,
              .cause = "chip silent",
              .detail = "answered no read after its neighbours reported links down; its links "
                        "are out of the routes until a sweep finds it"});
      // A sweep confirms what the silence suggests (a chip found again comes back).
      if (!upd->silent.empty()) sweep_due_ = true;
      reroute = !upd->links_down.empty();
    }
  }
  // What is known is shown before re-routing, which may wait on chips that no longer answer.
  rebuild_view_locked();
  publish_locked();
  if (!reroute || routes_.writes.empty()) return;
  // The daemon's loop re-routes at once (Daemon::reroute), with the session free meanwhile.
  reroute_attempts_ = 0;
  reroute_pending_ = true;
  next_reroute_us_ = clock_us();
}

namespace {

// "fattree", or "updown (fattree left connected pairs unjoined)" when the fallback routed.
std::string engine_text(const std::string& asked, const std::string& used) {
  if (asked == used) return asked;
  return fmt::format("{} ({} left connected NIC pairs unjoined)", used, asked);
}

}  // namespace

void Daemon::reroute() {
  auto lock = lock_session();
  if (!reroute_pending_ || sm_->state() != wire::SmState::kMaster) return;
  reroute_pending_ = false;
  const uint64_t generation = map_generation_, edits = map_edits_;
  const std::string engine = config_.routing_engine;
  const nm::FabricMap map = session_.discovery.map;
  counters_.rerouting = true;
  publish_locked();
  lock.unlock();
  auto computed = nm::compute_checked_routes(map, engine);
  lock.lock();
  counters_.rerouting = false;
  publish_locked();
  if (map_generation_ != generation || config_.routing_engine != engine) {
    // A sweep replaced the map, or the engine changed (both route on their own): the routes
    // computed here are for a map or an engine that is no longer; computed again.
    reroute_pending_ = true;
    next_reroute_us_ = clock_us();
    return;
  }
  // Routes of a map that lost another link meanwhile are still newer than those loaded: they
  // are loaded, and computed once more for the map as it is now.
  if (map_edits_ != edits) {
    reroute_pending_ = true;
    next_reroute_us_ = clock_us();
  }
  auto rr = computed.ok() ? nm::load_rerouted(*session_.requester, session_.discovery.map,
                                              std::move(*computed), routes_)
                          : Result<nm::RerouteResult>(computed.error());
  if (!rr.ok()) {
    // Retried until it succeeds or a later change re-routes anyway; the operator sees an alarm.
    ++counters_.reroute_failures;
    ++reroute_attempts_;
    const int64_t wait_s = std::min<int64_t>(int64_t{1} << std::min(reroute_attempts_ - 1, 5u), 30);
    reroute_pending_ = true;
    next_reroute_us_ = clock_us() + wait_s * 1000000;
    note({.kind = EventKind::kAlarm,
          .severity = EventSeverity::kMajor,
          .cause = "re-route failed",
          .detail = fmt::format("attempt {}: {}; retried in {} s", reroute_attempts_,
                                rr.error().to_string(), wait_s)});
    publish_locked();
    return;
  }
  ++counters_.reroutes;
  routes_ = std::move(rr->routes);
  routes_summary_["rerouted_us"] = clock_us();
  routes_summary_["compute_ms"] = rr->compute_ms;
  routes_summary_["engine"] = rr->engine;
  routes_summary_["fell_back_from"] = rr->fell_back ? config_.routing_engine : std::string();
  routes_summary_["connected_pairs"] = rr->connected_pairs;
  routes_summary_["reachable_pairs"] = rr->check.reachable_pairs;
  routes_summary_["nic_pairs"] = rr->check.nic_pairs;
  routes_summary_["deadlock_free"] = rr->check.deadlock_free;
  note({.kind = EventKind::kLog,
        .cause = "re-routed",
        .detail = fmt::format("{}: {} NRCs reloaded; {} of {} NIC pairs reachable{}",
                              engine_text(config_.routing_engine, rr->engine), rr->nrcs_reloaded,
                              rr->check.reachable_pairs, rr->check.nic_pairs,
                              reroute_attempts_ > 0
                                  ? fmt::format(" (after {} failed attempts)", reroute_attempts_)
                                  : std::string())});
  reroute_attempts_ = 0;
  publish_locked();
}

Status Daemon::route_locked(const std::string& engine) {
  // InfiniBand: a heavy sweep with the engine (LIDs kept, tables rewritten).
  if (ib_) return sweep_ib_locked(engine).status();
  const nm::FabricMap& map = session_.discovery.map;
  const auto t0 = std::chrono::steady_clock::now();
  auto computed = nm::compute_checked_routes(map, engine);
  if (!computed.ok()) return computed.error();
  const nm::RouteCheck& check = computed->check;
  auto load = nm::load_routes(*session_.requester, map, computed->routes);
  if (!load.ok()) return load.error();
  routes_ = std::move(computed->routes);
  routes_summary_ = {{"engine", computed->engine},
                     {"fell_back_from", computed->fell_back ? engine : std::string()},
                     {"connected_pairs", computed->connected_pairs},
                     {"loaded_us", clock_us()},
                     {"range_writes", routes_.num_writes()},
                     {"nic_pairs", check.nic_pairs},
                     {"reachable_pairs", check.reachable_pairs},
                     {"deadlock_free", check.deadlock_free},
                     {"loops", check.loops},
                     {"max_path_nrcs", check.max_path_nrcs},
                     {"problems", check.problems},
                     {"load_packets", load->packets},
                     {"load_failed", load->failed},
                     {"wall_ms", seconds_since(t0) * 1e3},
                     {"compute_ms", computed->compute_ms}};
  note({.kind = EventKind::kLog,
        .severity = check.reachable_pairs == check.nic_pairs && load->failed == 0
                        ? EventSeverity::kInfo
                        : EventSeverity::kMajor,
        .cause = "routes loaded",
        .detail = fmt::format("{}: {} of {} NIC pairs reachable, {} table writes, {} failed",
                              engine_text(engine, computed->engine), check.reachable_pairs,
                              check.nic_pairs, load->packets, load->failed)});
  return {};
}

Result<nlohmann::json> Daemon::scan_batched() {
  if (ib_) return scan_ib();
  std::lock_guard one_scan(scan_mu_);
  auto lock = lock_session();
  const auto t0 = std::chrono::steady_clock::now();
  last_scan_started_us_ = clock_us();
  const nm::FabricMap* map = &session_.discovery.map;
  const uint32_t nodes = map->num_nodes();
  const uint64_t generation = map_generation_;
  std::optional<nm::ScanResult> total;
  // A sweep replaced the map meanwhile: the nodes scanned so far are of the old one.
  auto map_replaced = [] {
    return make_error(Code::kUnsupported, 8320,
                      "the status scan stopped: a sweep replaced the fabric map meanwhile (the "
                      "next scan reads the new one)");
  };
  nm::ScanOptions so;
  so.include = region_nodes_;
  // Chips of the fabric that discovery no longer reaches (a host gone) count as not responding.
  so.plan = &session_.plan();
  // Progress on the status page while the scan runs (the lock is held whenever it ends).
  counters_.scan_running = true;
  counters_.scan_chips_done = 0;
  counters_.scan_chips_total = nm::scan_chip_count(*map, so);
  struct Done {
    Daemon& d;
    ~Done() {
      d.counters_.scan_running = false;
      d.publish_locked();
    }
  } done{*this};
  publish_locked();
  SliceSize slice(16, 1024);
  for (uint32_t first = 0; first < nodes;) {
    if (first > 0) {
      let_waiters_in(lock);
      if (map_generation_ != generation) return map_replaced();
      if (!pending_faults_.empty()) handle_faults_locked();
    }
    nm::Scanner scanner(*session_.requester, *map);
    so.first_node = first;
    so.end_node = nm::scan_batch_end(*map, so, first, slice.get());
    first = so.end_node;
    const auto tb = std::chrono::steady_clock::now();
    auto r = scanner.scan_once(so);
    if (!r.ok() && r.error().id == 5300) continue;  // nothing left to read
    if (!r.ok()) return r.error();
    slice.took(static_cast<uint32_t>(r->chips.size()), seconds_since(tb));
    counters_.scan_chips_done += r->chips.size();
    publish_locked();
    if (!total)
      total = std::move(*r);
    else
      nm::merge_scan(*total, std::move(*r));
  }
  // The scan's summary, the ledger's comparison and the view take a slice of their own.
  let_waiters_in(lock);
  if (map_generation_ != generation) return map_replaced();
  if (!total)
    return make_error(Code::kNotFound, 8321, "the status scan found no chip to read in the map");
  return finish_scan_locked(std::move(*total), seconds_since(t0));
}

nlohmann::json Daemon::finish_scan_locked(nm::ScanResult result, double wall_s) {
  auto scan = std::make_unique<nm::ScanResult>(std::move(result));
  std::unique_ptr<nm::ScanDiff> d;
  if (last_scan_) d = std::make_unique<nm::ScanDiff>(nm::diff(*last_scan_, *scan));
  nlohmann::json summary = scan_summary_json(session_, *scan, 10);
  summary["chips"] = scan->chips.size();
  summary["wall_s"] = wall_s;
  if (d) {
    summary.update(scan_diff_json(session_, *d, 0, false));
    for (uint32_t node : d->stopped_answering) {
      wire::ChipId chip = session_.discovery.map.chip_id[node];
      note({.kind = EventKind::kAlarm,
            .severity = EventSeverity::kMajor,
            .location = location_of(chip, -1),
            .chip = chip,
            .cause = "chip stopped answering",
            .detail = "no answer to the status scan after the requester's retries"});
    }
  }
  ++counters_.scans;
  counters_.last_scan_s = wall_s;
  counters_.last_scan_us = clock_us();
  if (MetricFamily* h = metrics_.find(kScanDurationSeconds)) (void)h->observe({}, wall_s);
  note({.kind = EventKind::kScanSummary,
        .severity = scan->non_responding.empty() ? EventSeverity::kInfo : EventSeverity::kMajor,
        .cause = "status scan",
        .detail = json_text(summary)});
  last_scan_ = std::move(scan);
  last_diff_ = std::move(d);
  // A port the scan read in a state no report told of gets its missing fault or clearing
  // event; reports that arrived during the scan are taken first.
  std::vector<std::pair<uint32_t, uint8_t>> downs;
  bool any_up = false;
  take_reports_locked(downs, any_up);
  const size_t kState = reg_index("LINK_STATE"), kHandshakes = reg_index("HANDSHAKES");
  const fabric::Topology& plan = session_.plan();
  for (const nm::ChipStatus& cs : last_scan_->chips)
    for (size_t p = 0; p < cs.ports.size(); ++p) {
      const nm::PortStatus& ps = cs.ports[p];
      const auto port = static_cast<uint8_t>(p);
      if (!(ps.read_mask >> kState & 1) || !(ps.read_mask >> kHandshakes & 1) ||
          cs.chip_id >= plan.num_nodes() || p >= plan.num_ports(cs.chip_id) ||
          !plan.peer({cs.chip_id, port}))
        continue;
      const bool up = (ps.value[kState] & 3) == static_cast<uint64_t>(chip::LinkState::kUp);
      for (const nm::LinkChange& c :
           ledger_->observe(cs.chip_id, port, up, ps.value[kHandshakes] & 0xFFFFFFFF))
        record_link_change_locked(c, nullptr, "the status scan", downs, any_up);
    }
  if (!downs.empty() || any_up || !to_check_.empty()) {
    check_chips_locked(downs, any_up);
    after_link_changes_locked(downs, any_up);
  }
  rebuild_view_locked();
  return summary;
}

void Daemon::for_each_managed_link_locked(
    const nm::FabricMap& map, const std::function<void(uint32_t, uint8_t, bool)>& f) const {
  const fabric::Topology& plan = session_.plan();
  for (uint32_t node = 0; node < map.num_nodes(); ++node) {
    const uint32_t chip = map.chip_id[node];
    if (chip >= plan.num_nodes() || !in_region(chip)) continue;
    for (uint8_t p = 0; p < plan.num_ports(chip) && p < map.topology.num_ports(node); ++p)
      if (plan.peer({chip, p})) f(chip, p, map.topology.peer({node, p}).has_value());
  }
}

Result<nlohmann::json> Daemon::sweep_locked(bool route) {
  if (ib_) return sweep_ib_locked(config_.routing_engine);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t started_us = clock_us();
  nm::DiscoveryOptions o;
  o.pipelined = true;
  session_.requester->set_options(requester_options(false));
  auto r = nm::discover(*session_.requester, o);
  const double wall_s = seconds_since(t0);
  ++counters_.sweeps;
  counters_.last_sweep_s = wall_s;
  counters_.last_sweep_us = clock_us();
  if (MetricFamily* h = metrics_.find(kSweepDurationSeconds)) (void)h->observe({}, wall_s);
  if (!r.ok()) {
    note({.kind = EventKind::kLog,
          .severity = EventSeverity::kMajor,
          .cause = "sweep failed",
          .detail = r.error().to_string()});
    return r.error();
  }
  const nm::FabricMap& old_map = session_.discovery.map;
  const nm::FabricMap& new_map = r->map;
  // What discovery found against what is believed: a link found down (or up) that no report
  // told of gets its missing fault or clearing event, judged at the ends discovery reached.
  // Reports that arrived during the sweep go first. The sweep re-routes on its own below.
  {
    std::vector<std::pair<uint32_t, uint8_t>> downs;
    bool any_up = false;
    take_reports_locked(downs, any_up);
    for_each_managed_link_locked(new_map, [&](uint32_t chip, uint8_t p, bool up) {
      for (const nm::LinkChange& c : ledger_->observe_state(chip, p, up))
        record_link_change_locked(c, nullptr, "discovery", downs, any_up);
    });
    for (auto [chip, port] : downs)
      alarm_link_down_locked(chip, port, "found down by a discovery sweep");
  }
  std::set<wire::ChipId> before, after;
  for (wire::ChipId c : old_map.chip_id) before.insert(c);
  for (wire::ChipId c : new_map.chip_id) after.insert(c);
  std::vector<wire::ChipId> gone, came;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(gone));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(came));
  const int64_t links_delta = static_cast<int64_t>(new_map.topology.num_links()) -
                              static_cast<int64_t>(old_map.topology.num_links());
  for (wire::ChipId c : gone)
    note({.kind = EventKind::kAlarm,
          .severity = EventSeverity::kMajor,
          .location = location_of(c, -1),
          .chip = c,
          .cause = "chip gone",
          .detail = "not found by the sweep"});
  for (wire::ChipId c : came)
    note({.kind = EventKind::kLog,
          .location = location_of(c, -1),
          .chip = c,
          .cause = "chip found",
          .detail = "new in the sweep"});
  nlohmann::json summary{{"chips", new_map.num_nodes()},
                         {"links", new_map.topology.num_links()},
                         {"chips_gone", gone},
                         {"chips_new", came},
                         {"links_delta", links_delta},
                         {"requests", r->requests},
                         {"wall_s", wall_s},
                         {"sim_time_us", static_cast<double>(r->elapsed) / nm::kUs}};
  summary["changed"] = !(gone.empty() && came.empty() && links_delta == 0);
  if (!summary["changed"].get<bool>()) return summary;
  note({.kind = EventKind::kLog,
        .severity = EventSeverity::kMinor,
        .cause = "sweep: fabric changed",
        .detail = fmt::format("{} chips gone, {} new, links {:+}; map replaced", gone.size(),
                              came.size(), links_delta)});
  session_.discovery = std::move(*r);
  ++map_generation_;
  ++map_edits_;
  // A link this sweep found is up, whatever was reported before it began.
  for (auto it = reported_down_.begin(); it != reported_down_.end();) {
    const nm::FabricMap& m = session_.discovery.map;
    auto node = m.node_of.find(it->first.first);
    const bool found = node != m.node_of.end() &&
                       it->first.second < m.topology.num_ports(node->second) &&
                       m.topology.peer({node->second, it->first.second}).has_value();
    it = found && it->second < started_us ? reported_down_.erase(it) : std::next(it);
  }
  if (!came.empty()) {
    (void)nm::enable_fault_reporting(*session_.requester, session_.discovery.map,
                                     config_.fault_mask, region_nodes_);
    place_mkeys_locked();
  }
  if (route && config_.routing_engine != "none") {
    Status st = route_locked(config_.routing_engine);
    if (!st.ok())
      note({.kind = EventKind::kLog,
            .severity = EventSeverity::kMajor,
            .cause = "re-route after sweep failed",
            .detail = st.error().to_string()});
  }
  last_scan_.reset();  // the next scan compares against a scan of the new map
  last_diff_.reset();
  rebuild_view_locked();
  return summary;
}

Result<nlohmann::json> Daemon::sweep_now() {
  auto lock = lock_session();
  auto r = sweep_locked();
  next_sweep_us_ = clock_us() + static_cast<int64_t>(config_.sweep_interval_s * 1e6);
  publish_locked();
  return r;
}

Result<uint64_t> Daemon::take_fabric_locked() {
  if (config_.routing_engine != "none") GALAXY_TRY(route_locked(config_.routing_engine));
  auto setup = nm::enable_fault_reporting(*session_.requester, session_.discovery.map,
                                          config_.fault_mask, region_nodes_);
  if (!setup.ok()) return setup.error();
  place_mkeys_locked();
  sm_->became_master();
  return setup->chips;
}

namespace {

std::string server_text(const nm::SmPeer& p) {
  return fmt::format("server {:016x} (priority {}) at NIC {} VP {}", p.info.guid, p.info.priority,
                     p.chip, p.vp);
}

}  // namespace

void Daemon::sm_step_locked() {
  const nm::FabricMap& map = session_.discovery.map;
  // Master's work after a handover or a takeover: what changed while nobody managed the fabric
  // is found by a sweep against the ledger (a shared store: only the gap), then the fabric is
  // routed and its chips name this server.
  auto take = [&](std::string cause, std::string why) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)sweep_locked(/*route=*/false);  // take_fabric_locked routes
    auto taken = take_fabric_locked();
    if (!taken.ok()) {
      note({.kind = EventKind::kLog,
            .severity = EventSeverity::kCritical,
            .cause = cause + " failed",
            .detail = taken.error().to_string()});
      return;
    }
    note({.kind = EventKind::kLog,
          .severity = EventSeverity::kMajor,
          .cause = std::move(cause),
          .detail = fmt::format("{}; this server is master: {} chips report to it ({:.0f} ms)", why,
                                *taken, seconds_since(t0) * 1e3)});
    next_audit_us_ = next_scan_us_ = clock_us();
  };
  if (sm_->handover_received()) {
    take("handover", "the master handed the fabric over");
    if (Status a = sm_->acknowledge_handover(); !a.ok())
      note({.kind = EventKind::kLog,
            .severity = EventSeverity::kMinor,
            .cause = "handover acknowledgement",
            .detail = a.error().to_string()});
    return;
  }
  switch (sm_->state()) {
    case wire::SmState::kStandby: {
      const std::string was = server_text(*sm_->master());
      auto p = sm_->poll(map, region_nodes_);
      if (!p.ok()) return;
      if (*p == nm::SmPollOutcome::kTakeOver)
        take("takeover",
             fmt::format("the master, {}, missed {} polls", was, options_.sm_poll_retries));
      else if (*p == nm::SmPollOutcome::kNewMaster)
        note({.kind = EventKind::kLog,
              .cause = "standby",
              .detail = fmt::format("the chips name a new master, {}; this server polls it",
                                    server_text(*sm_->master()))});
      return;
    }
    case wire::SmState::kMaster: {
      auto c = sm_->check(map, region_nodes_);
      if (!c.ok()) return;
      if (*c == nm::SmCheckOutcome::kReclaim) {
        // The chips name a server that is not master (a restarted one, or writes lost): this
        // master writes them again.
        auto setup =
            nm::enable_fault_reporting(*session_.requester, map, config_.fault_mask, region_nodes_);
        note({.kind = EventKind::kLog,
              .severity = EventSeverity::kMinor,
              .cause = "fault reporting reclaimed",
              .detail = setup.ok() ? fmt::format("the chips named another server; {} chips "
                                                 "report to this one again",
                                                 setup->chips)
                                   : setup.error().to_string()});
      } else if (*c != nm::SmCheckOutcome::kMaster) {
        note({.kind = EventKind::kLog,
              .severity = EventSeverity::kMajor,
              .cause = *c == nm::SmCheckOutcome::kHandedOver ? "handed over" : "demoted",
              .detail = fmt::format(
                  "{}; this server stands by under it",
                  *c == nm::SmCheckOutcome::kHandedOver
                      ? "a standby outranks this master: " + server_text(*sm_->master()) +
                            " has the fabric"
                      : "the chips name another master, " + server_text(*sm_->master()))});
        followed_event_ = newest_event_;
      }
      return;
    }
    default:
      return;  // NOT ACTIVE (an SMInfo Set DISABLE) or discovering: nothing until told
  }
}

void Daemon::follow_store_locked() {
  // Every kind: the master's alarms and log lines wake this server's event streams too.
  EventQuery q;
  q.after_id = followed_event_;
  q.newest_first = false;
  q.limit = 10000;
  auto events = events_->query(q);
  if (!events.ok() || events->empty()) return;
  for (const Event& e : *events) {
    followed_event_ = std::max(followed_event_, e.id);
    if (e.kind != EventKind::kFault || e.chip < 0 || e.port < 0) continue;
    const bool down = e.cause == chip::fault_name(chip::FaultCode::kLinkDown);
    const bool up = e.cause == chip::fault_name(chip::FaultCode::kLinkUp);
    // What the master recorded is what this server believes: nothing recorded again.
    if (down || up)
      (void)ledger_->observe_state(static_cast<uint32_t>(e.chip), static_cast<uint8_t>(e.port), up);
  }
  {
    std::lock_guard lock(event_mu_);
    newest_event_ = std::max(newest_event_, followed_event_);
  }
  event_cv_.notify_all();
}

nlohmann::json Daemon::sm_json() const {
  std::lock_guard lock(published_mu_);
  return published_sm_;
}

Status Daemon::require_master(std::string_view what) const {
  if (ib_ || is_master()) return {};
  const nlohmann::json j = sm_json();
  return make_error(Code::kInvalidArgument, 8411,
                    fmt::format("{}: this server is {}; the master ({}) manages the fabric", what,
                                j.value("state", "standby"),
                                j.contains("master") ? j["master"].value("name", "?") : "none"));
}

void Daemon::publish_sm_locked() {
  if (!sm_) return;
  auto peer = [](const nm::SmPeer& p) {
    return nlohmann::json{
        {"guid", fmt::format("{:016x}", p.info.guid)},
        {"priority", p.info.priority},
        {"state", wire::sm_state_name(p.info.state)},
        {"nic", p.chip},
        {"vp", p.vp},
        {"name", fmt::format("{:016x} at NIC {} VP {}", p.info.guid, p.chip, p.vp)}};
  };
  const nm::GalaxySmCounters& k = sm_->counters();
  nlohmann::json j{{"state", wire::sm_state_name(static_cast<uint8_t>(sm_->state()))},
                   {"guid", fmt::format("{:016x}", sm_->guid())},
                   {"priority", sm_->options().priority},
                   {"nic", session_.port->server_chip_id()},
                   {"vp", session_.port->server_vp()},
                   {"poll_s", options_.sm_poll_s},
                   {"poll_retries", options_.sm_poll_retries},
                   {"counters",
                    {{"polls", k.polls},
                     {"polls_missed", k.polls_missed},
                     {"answered", k.answered},
                     {"refused_sets", k.refused_sets},
                     {"handovers_given", k.handovers_given},
                     {"handovers_received", k.handovers_received},
                     {"takeovers", k.takeovers},
                     {"demotions", k.demotions}}}};
  if (sm_->master()) j["master"] = peer(*sm_->master());
  nlohmann::json standbys = nlohmann::json::array();
  for (const nm::SmPeer& p : sm_->standbys()) standbys.push_back(peer(p));
  j["standbys"] = std::move(standbys);
  if (sm_->successor()) j["successor"] = peer(*sm_->successor());
  published_master_.store(sm_->state() == wire::SmState::kMaster, std::memory_order_release);
  std::lock_guard lock(published_mu_);
  published_sm_ = std::move(j);
}

void Daemon::place_mkeys_locked() {
  const nm::MKeyPolicy& p = options_.mkey;
  if (!p.enabled()) return;
  auto placed = nm::place_mkeys(*session_.requester, session_.discovery.map, p, region_nodes_);
  if (!placed.ok()) {
    note({.kind = EventKind::kLog,
          .severity = EventSeverity::kMajor,
          .cause = "M_Key placement failed",
          .detail = placed.error().to_string()});
    return;
  }
  note({.kind = EventKind::kLog,
        .severity = placed->failed == 0 ? EventSeverity::kInfo : EventSeverity::kMajor,
        .cause = "M_Keys placed",
        .detail = fmt::format(
            "{} chips hold {} at level {}, lease {} s; {} refused{}", placed->chips,
            p.per_chip ? "their own key" : "the key", p.level, p.lease_s, placed->failed,
            placed->failed ? " (first: " + placed->first.to_string() + ")" : "")});
}

void Daemon::rebuild_view_locked() {
  if (ib_) return publish_view_locked(ib_->view());
  auto v = std::make_shared<FabricView>();
  const fabric::Topology& plan = session_.plan();
  const nm::FabricMap& map = session_.discovery.map;
  init_from_plan(*v, plan);
  for (uint32_t n = 0; n < plan.num_nodes(); ++n) {
    ChipView& c = v->chips[n];
    c.in_region = in_region(n);
    auto it = map.node_of.find(static_cast<wire::ChipId>(n));
    if (it != map.node_of.end() && map.hops[it->second] != UINT8_MAX) c.hops = map.hops[it->second];
  }
  for (uint32_t i = 0; i < map.topology.num_nics(); ++i)
    v->nic_chips.push_back(map.chip_id[map.topology.nic_node(i)]);
  for (uint32_t n = 0; n < plan.num_nodes(); ++n) {
    auto mit = map.node_of.find(static_cast<wire::ChipId>(n));
    for (uint8_t p = 0; p < v->chips[n].ports; ++p) {
      PortView& pv = v->ports[v->chips[n].first_port + p];
      auto peer = plan.peer({n, p});
      if (!peer) continue;
      pv.peer = peer->node;
      pv.peer_port = peer->port;
      bool found = mit != map.node_of.end() && map.topology.peer({mit->second, p}).has_value();
      pv.link = found ? LinkView::kUp : LinkView::kDown;
    }
  }
  const size_t kLinkState = reg_index("LINK_STATE"), kTxFlits = reg_index("TX_FLITS"),
               kRetrans = reg_index("RETRANSMISSIONS"), kCrc = reg_index("CRC_ERRORS");
  if (last_scan_) {
    v->scans = counters_.scans;
    std::set<wire::ChipId> silent;
    for (uint32_t node : last_scan_->non_responding) silent.insert(map.chip_id[node]);
    for (wire::ChipId chip : last_scan_->unreached)
      if (chip < v->chips.size()) v->chips[chip].responding = false;
    for (const nm::ChipStatus& cs : last_scan_->chips) {
      if (cs.chip_id >= v->chips.size()) continue;
      ChipView& c = v->chips[cs.chip_id];
      c.responding = !silent.count(cs.chip_id);
      if (cs.environment_read) {
        c.temperature_c = static_cast<float>(static_cast<double>(cs.temperature_mc) / 1000.0);
        c.voltage_mv = static_cast<float>(cs.voltage_mv);
      }
      for (size_t p = 0; p < cs.ports.size() && p < c.ports; ++p) {
        const nm::PortStatus& ps = cs.ports[p];
        if (!ps.read_mask) continue;
        PortView& pv = v->ports[c.first_port + p];
        pv.scanned = true;
        pv.registers = ps.value;
        // A link the scan read as down or training is so, whatever discovery found earlier;
        // one reported down after the scan began stays down until a later scan reads it up.
        if (pv.peer != fabric::kNoNode && (ps.read_mask >> kLinkState & 1)) {
          uint64_t st = ps.value[kLinkState] & 3;
          pv.link = st == 2 ? LinkView::kUp : st == 1 ? LinkView::kTraining : LinkView::kDown;
          auto down = reported_down_.find({cs.chip_id, static_cast<uint8_t>(p)});
          if (down != reported_down_.end()) {
            if (pv.link == LinkView::kUp && down->second < last_scan_started_us_)
              reported_down_.erase(down);
            else
              pv.link = LinkView::kDown;
          }
        }
      }
    }
  }
  for (const auto& [end, when] : reported_down_)
    if (end.first < v->chips.size() && end.second < v->chips[end.first].ports)
      v->ports[v->chips[end.first].first_port + end.second].link = LinkView::kDown;
  // A link is as good as its worse end: the end on a chip that no longer answers keeps what
  // discovery found, the end that was read (or reported down) knows better.
  for (uint32_t n = 0; n < v->chips.size(); ++n)
    for (uint8_t p = 0; p < v->chips[n].ports; ++p) {
      PortView& a = v->ports[v->chips[n].first_port + p];
      if (a.peer == fabric::kNoNode || a.peer < n) continue;
      PortView& b = v->ports[v->chips[a.peer].first_port + a.peer_port];
      const LinkView worse = static_cast<LinkView>(
          std::min(static_cast<uint8_t>(a.link), static_cast<uint8_t>(b.link)));
      a.link = b.link = worse;
    }
  if (last_diff_ && last_diff_->interval_s > 0) {
    v->scan_interval_s = last_diff_->interval_s;
    for (const nm::RegisterChange& ch : last_diff_->changes) {
      if (ch.chip_id >= v->chips.size() || ch.port >= v->chips[ch.chip_id].ports) continue;
      PortView& pv = v->ports[v->chips[ch.chip_id].first_port + ch.port];
      if (ch.reg == kTxFlits)
        pv.utilisation =
            static_cast<float>(ch.rate_per_s * wire::kFlitBits / wire::kLinkBitsPerSecond);
      else if (ch.reg == kRetrans)
        pv.retransmissions_per_s = static_cast<float>(ch.rate_per_s);
      else if (ch.reg == kCrc)
        pv.crc_errors_per_s = static_cast<float>(ch.rate_per_s);
    }
  }
  publish_view_locked(std::move(v));
}

void Daemon::publish_view_locked(std::shared_ptr<FabricView> v) {
  count_faults(*v);
  v->built_us = clock_us();
  update_port_metrics(*v);
  if (v->scans != history_scan_ && v->scan_interval_s > 0) {
    history_scan_ = v->scans;
    history_.add_scan(*v, v->built_us);
  }
  note_fault_history(counters_.faults);
  std::lock_guard lock(view_mu_);
  view_ = std::move(v);
  view_generation_.fetch_add(1, std::memory_order_release);
}

void Daemon::note_fault_history(uint64_t faults_received) {
  uint64_t open = 0;
  for (int64_t n : events_->open_faults_by_severity()) open += static_cast<uint64_t>(n);
  history_.add_faults(clock_us(), open, faults_received);
}

void Daemon::update_port_metrics(const FabricView& v) {
  struct Fam {
    const char* name;
    size_t reg;
  };
  const std::array<Fam, 6> counters{{{kPortTxFlitsTotal, reg_index("TX_FLITS")},
                                     {kPortRxFlitsTotal, reg_index("RX_FLITS")},
                                     {kPortTxPacketsTotal, reg_index("TX_PACKETS")},
                                     {kPortRetransmissionsTotal, reg_index("RETRANSMISSIONS")},
                                     {kPortCrcErrorsTotal, reg_index("CRC_ERRORS")},
                                     {kPortDirtyDiscardsTotal, reg_index("DIRTY_DISCARDS")}}};
  const bool all = v.chips.size() <= options_.all_port_metrics_up_to_chips;
  MetricFamily* link_up = metrics_.find(kPortLinkUp);
  MetricFamily* util = metrics_.find(kPortUtilisationRatio);
  MetricFamily* temperature = metrics_.find(kChipTemperatureCelsius);
  MetricFamily* voltage = metrics_.find(kChipVoltageVolts);
  // A chip's TEMPERATURE and VOLTAGE change only with a scan: set once per scan, not at every
  // publish (every tick of the loop; 24,136 chips on TH-2).
  const bool new_environment = v.scans != environment_metrics_scans_;
  environment_metrics_scans_ = v.scans;
  for (uint32_t n = 0; n < v.chips.size(); ++n) {
    const ChipView& c = v.chips[n];
    if (new_environment && std::isfinite(c.temperature_c) && temperature && voltage) {
      const std::vector<Label> labels{{"chip", std::to_string(n)},
                                      {"chip_name", c.name},
                                      {"location", location_text(c.location)}};
      (void)temperature->set(labels, c.temperature_c);
      (void)voltage->set(labels, c.voltage_mv / 1000.0);
    }
    for (uint8_t p = 0; p < c.ports; ++p) {
      const PortView& pv = v.port(n, p);
      if (pv.peer == fabric::kNoNode) continue;
      const bool notable = pv.link != LinkView::kUp || pv.retransmissions_per_s > 0 ||
                           pv.crc_errors_per_s > 0 || pv.registers[counters[3].reg] > 0;
      if (!all && !notable) continue;
      auto labels =
          port_labels(n, c.name, location_text(c.location), p + v.port_base,
                      fmt::format("{}:{}", v.chips[pv.peer].name, pv.peer_port + v.port_base));
      if (link_up) (void)link_up->set(labels, pv.link == LinkView::kUp ? 1 : 0);
      if (util) (void)util->set(labels, pv.utilisation);
      // The counter families are Galaxy's status registers; InfiniBand's PortCounters are
      // read through the API (GET /api/chips/{chip}).
      if (!pv.scanned || !v.ib_counters.empty()) continue;
      for (const Fam& f : counters)
        if (MetricFamily* fam = metrics_.find(f.name))
          (void)fam->set(labels, static_cast<double>(pv.registers[f.reg]));
    }
  }
  if (MetricFamily* alarms = metrics_.find(kAlarmsActive))
    for (const auto& [sev, count] : open_fault_counts())
      (void)alarms->set({{"severity", sev}}, static_cast<double>(count));
}

// From the store's counters: every open fault of every chip, however many, without reading rows.
void Daemon::count_faults(FabricView& v) const {
  for (ChipView& c : v.chips) c.faults = 0;
  for (const auto& [chip, n] : events_->open_fault_counts().by_chip)
    if (static_cast<size_t>(chip) < v.chips.size())
      v.chips[static_cast<size_t>(chip)].faults = static_cast<uint32_t>(n);
}

std::map<std::string, int64_t> Daemon::open_fault_counts() const {
  std::map<std::string, int64_t> out;
  const std::array<int64_t, 4> by = events_->open_faults_by_severity();
  for (size_t s = 0; s < by.size(); ++s)
    out[std::string(event_severity_name(static_cast<EventSeverity>(s)))] = by[s];
  return out;
}

void Daemon::refresh_fault_counts() {
  std::shared_ptr<const FabricView> cur = view();
  auto v = std::make_shared<FabricView>(*cur);
  count_faults(*v);
  if (MetricFamily* alarms = metrics_.find(kAlarmsActive))
    for (const auto& [sev, count] : open_fault_counts())
      (void)alarms->set({{"severity", sev}}, static_cast<double>(count));
  note_fault_history(counters().faults);
  std::lock_guard lock(view_mu_);
  view_ = std::move(v);
  view_generation_.fetch_add(1, std::memory_order_release);
}

Result<nlohmann::json> Daemon::chip_routes(const std::string& chip) {
  auto lock = lock_session();
  if (ib_) return ib_->chip_routes(chip);
  auto node = resolve(session_, chip);
  if (!node.ok()) return node.error();
  const nm::FabricMap& m = session_.discovery.map;
  if (m.topology.is_nic(*node))
    return make_error(Code::kInvalidArgument, 8223,
                      fmt::format("chip = '{}' is a NIC; route tables live in NRCs", chip));
  nlohmann::json ranges = nlohmann::json::array();
  if (*node < routes_.writes.size())
    for (const nm::RangeWrite& w : routes_.writes[*node])
      ranges.push_back({{"inputs", ports_of(w.inputs)},
                        {"first_dest", w.first_dest},
                        {"last_dest", w.first_dest + w.count - 1},
                        {"outputs", ports_of(w.ports)}});
  return nlohmann::json{{"chip", m.chip_id[*node]},
                        {"name", session_.plan().name(m.chip_id[*node])},
                        {"engine", routes_.engine.empty() ? "none" : routes_.engine},
                        {"ranges", ranges}};
}

std::shared_ptr<const FabricView> Daemon::view() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

ConfigState Daemon::config() const {
  std::lock_guard lock(published_mu_);
  return published_.config;
}

DaemonCounters Daemon::counters() const {
  std::lock_guard lock(published_mu_);
  return published_.counters;
}

nlohmann::json Daemon::routes_json() const {
  std::lock_guard lock(published_mu_);
  if (published_.routes.is_null()) return {{"engine", "none"}, {"loaded", false}};
  nlohmann::json j = published_.routes;
  j["loaded"] = true;
  return j;
}

void Daemon::note(Event e) {
  if (halted_) return;  // a crashed process says nothing more
  // What the daemon does goes to its log as well as to the store: faults and alarms as
  // warnings, the rest (start, discovery, scans, sweeps, re-routes) as information.
  const log::Level level = e.kind == EventKind::kFault || e.kind == EventKind::kAlarm ||
                                   e.severity >= EventSeverity::kMajor
                               ? log::Level::kWarn
                               : log::Level::kInfo;
  log::line(level, 0, "{} {}{}{}: {}{}{}", event_kind_name(e.kind), event_severity_name(e.severity),
            e.location.empty() ? "" : " ", e.location, e.cause, e.detail.empty() ? "" : " ",
            e.detail.substr(0, 300));
  auto id = record(std::move(e));
  if (!id.ok()) log::error(id.error().id, "event not stored: {}", id.error().message);
}

Result<int64_t> Daemon::record(Event e) {
  // A halted server is a crashed process: it writes nothing more.
  if (halted_) return make_error(Code::kIoError, 8413, "this server has halted");
  if (e.time_us == 0) e.time_us = clock_us();
  auto id = events_->append(std::move(e));
  if (!id.ok()) return id;
  {
    std::lock_guard lock(event_mu_);
    newest_event_ = std::max(newest_event_, *id);
  }
  event_cv_.notify_all();
  return id;
}

int64_t Daemon::wait_for_event(int64_t after_id, int timeout_ms) {
  std::unique_lock lock(event_mu_);
  event_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                     [&] { return newest_event_ > after_id || stop_; });
  return newest_event_;
}

bool Daemon::in_region(uint32_t chip_id) const {
  return region_chips_.empty() || (chip_id < region_chips_.size() && region_chips_[chip_id]);
}

Result<uint32_t> Daemon::resolve(const Session& s, const std::string& text) const {
  if (ib_) return ib_->resolve(text);
  // A name of the described fabric (plan) first: chip id = plan node on every engine.
  Result<uint32_t> node = uint32_t{0};
  if (auto n = s.plan().resolve(text); n.ok()) {
    auto it = s.discovery.map.node_of.find(static_cast<wire::ChipId>(*n));
    if (it == s.discovery.map.node_of.end())
      return make_error(Code::kNotFound, 8211,
                        fmt::format("chip = '{}' (chip {}) was not discovered", text, *n));
    node = it->second;
  } else {
    node = find_node(s, text);
    if (!node.ok()) return node;
  }
  const wire::ChipId chip = s.discovery.map.chip_id[*node];
  if (!in_region(chip))
    return make_error(Code::kNotFound, 8225,
                      fmt::format("chip = '{}' (chip {}) is outside this daemon's region ({})",
                                  text, chip, region_.text));
  return node;
}

Result<uint32_t> Daemon::resolve_planned(const Session& s, const std::string& text) const {
  if (ib_) return ib_->resolve(text);
  // A chip id is the plan node on every engine; nic:<index> the plan's NIC index.
  auto planned = s.plan().resolve(text);
  if (planned.ok()) return planned;
  // Names only discovery gives ("nrc12") need the chip in the map.
  auto node = find_node(s, text);
  if (!node.ok()) return planned.error();
  return s.discovery.map.chip_id[*node];
}

Status Daemon::set_config(const nlohmann::json& changes, const std::string& by) {
  if (!changes.is_object())
    return make_error(Code::kInvalidArgument, 8212, "the body must be a JSON object");
  if (changes.contains("routing_engine") || changes.contains("fault_mask"))
    GALAXY_TRY(require_master("routing_engine and fault_mask"));
  static const std::set<std::string> kKnown{"routing_engine", "scan_interval_s", "sweep_interval_s",
                                            "fault_mask"};
  for (const auto& [k, v] : changes.items())
    if (!kKnown.count(k))
      return make_error(Code::kInvalidArgument, 8213,
                        fmt::format("'{}' is not a configuration field (routing_engine, "
                                    "scan_interval_s, sweep_interval_s, fault_mask)",
                                    k));
  // Validate every field before changing any.
  auto number = [&](const char* k, double lo, double hi) -> Result<std::optional<double>> {
    if (!changes.contains(k)) return std::optional<double>{};
    const auto& v = changes[k];
    // Written so that nan fails too (JSON has none, but a number beyond a double reads as inf).
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi))
      return make_error(
          Code::kOutOfRange, 8214,
          fmt::format("{} = {} must be a number in [{}, {}]", k, json_text(v), lo, hi));
    return std::optional<double>{v.get<double>()};
  };
  auto scan = number("scan_interval_s", 0, kMaxIntervalS);
  if (!scan.ok()) return scan.error();
  auto sweep = number("sweep_interval_s", 0, kMaxIntervalS);
  if (!sweep.ok()) return sweep.error();
  std::optional<uint64_t> mask;
  if (changes.contains("fault_mask")) {
    GALAXY_TRY(require_galaxy("fault_mask (the chips' fault reporting)"));
    const auto& v = changes["fault_mask"];
    if (v.is_number_unsigned()) {
      mask = v.get<uint64_t>();
    } else if (v.is_string()) {
      auto m = chip::parse_u64("fault_mask", v.get<std::string>(), UINT64_MAX);
      if (!m.ok()) return m.error();
      mask = *m;
    } else {
      return make_error(
          Code::kInvalidArgument, 8215,
          fmt::format("fault_mask = {} must be a number or a 0x string", json_text(v)));
    }
  }
  std::optional<std::string> engine;
  if (changes.contains("routing_engine")) {
    if (!changes["routing_engine"].is_string())
      return make_error(Code::kInvalidArgument, 8216,
                        fmt::format("routing_engine = {} must be a string",
                                    json_text(changes["routing_engine"])));
    engine = changes["routing_engine"].get<std::string>();
    if (*engine != "none") {
      auto spec = Spec::parse(*engine);
      if (!spec.ok()) return spec.error();
      auto e = nm::routing_engines().find(spec->name);
      if (!e.ok()) return e.error();
    }
  }
  auto lock = lock_session();
  auto changed = [&](const std::string& field, const std::string& from, const std::string& to) {
    note({.kind = EventKind::kConfigChange,
          .cause = field + " changed",
          .detail =
              json_text(nlohmann::json{{"field", field}, {"from", from}, {"to", to}, {"by", by}})});
  };
  if (engine && *engine != config_.routing_engine) {
    if (*engine != "none") GALAXY_TRY(route_locked(*engine));
    changed("routing_engine", config_.routing_engine, *engine);
    config_.routing_engine = *engine;
  }
  if (*scan && **scan != config_.scan_interval_s) {
    changed("scan_interval_s", fmt::format("{}", config_.scan_interval_s),
            fmt::format("{}", **scan));
    config_.scan_interval_s = **scan;
    next_scan_us_ = clock_us() + static_cast<int64_t>(**scan * 1e6);
  }
  if (*sweep && **sweep != config_.sweep_interval_s) {
    changed("sweep_interval_s", fmt::format("{}", config_.sweep_interval_s),
            fmt::format("{}", **sweep));
    config_.sweep_interval_s = **sweep;
    next_sweep_us_ = clock_us() + static_cast<int64_t>(**sweep * 1e6);
  }
  if (mask && *mask != config_.fault_mask) {
    auto setup = nm::enable_fault_reporting(*session_.requester, session_.discovery.map, *mask,
                                            region_nodes_);
    if (!setup.ok()) return setup.error();
    changed("fault_mask", fmt::format("0x{:x}", config_.fault_mask), fmt::format("0x{:x}", *mask));
    config_.fault_mask = *mask;
  }
  publish_locked();
  return {};
}

Result<nlohmann::json> Daemon::route_now(const std::string& engine, const std::string& by) {
  GALAXY_TRY(require_master("route"));
  if (engine.empty() || engine == "none")
    return make_error(Code::kInvalidArgument, 8217,
                      fmt::format("engine = '{}': name a routing engine", engine));
  {
    auto spec = Spec::parse(engine);
    if (!spec.ok()) return spec.error();
    auto e = nm::routing_engines().find(spec->name);
    if (!e.ok()) return e.error();
  }
  auto lock = lock_session();
  GALAXY_TRY(route_locked(engine));
  if (engine != config_.routing_engine)
    note({.kind = EventKind::kConfigChange,
          .cause = "routing_engine changed",
          .detail = json_text(nlohmann::json{{"field", "routing_engine"},
                                             {"from", config_.routing_engine},
                                             {"to", engine},
                                             {"by", by}})});
  config_.routing_engine = engine;
  publish_locked();
  return routes_summary_;
}

Result<nlohmann::json> Daemon::scan_now() {
  auto r = scan_batched();
  auto lock = lock_session();
  next_scan_us_ = clock_us() + static_cast<int64_t>(config_.scan_interval_s * 1e6);
  publish_locked();
  return r;
}

Result<nlohmann::json> Daemon::inject(const std::string& action, const std::string& chip, int port,
                                      const std::string& code, const std::string& by) {
  GALAXY_TRY(require_galaxy("inject"));
  auto lock = lock_session();
  GALAXY_TRY(require_simulated(session_, "inject"));
  auto named = resolve_planned(session_, chip);
  if (!named.ok()) return named.error();
  const uint32_t plan_node = *named;
  const fabric::Topology& plan = session_.plan();
  // A link belongs to the region of either end (a region's NRCs reach their NICs' links).
  std::optional<fabric::PortRef> peer;
  if (port >= 0 && static_cast<uint32_t>(port) < plan.num_ports(plan_node))
    peer = plan.peer({plan_node, static_cast<uint8_t>(port)});
  if (!in_region(plan_node) && !(peer && in_region(peer->node)))
    return make_error(Code::kNotFound, 8291,
                      fmt::format("chip = '{}' (chip {}) is outside this daemon's region ({})",
                                  chip, plan_node, region_.text));
  InjectRequest r;
  r.action = action;
  r.chip = plan_node;
  r.port = port;
  r.code = code;
  r.window_us = 0;  // the daemon's loop takes the reports
  auto out = inject_op(session_, r);
  if (!out.ok()) return out.error();
  note({.kind = EventKind::kLog,
        .severity = EventSeverity::kMinor,
        .location = location_of(plan_node, port),
        .chip = plan_node,
        .port = port,
        .cause = "injected " + action,
        .detail = fmt::format("by {}", by)});
  return out;
}

Result<nlohmann::json> Daemon::chip_status(const std::string& chip) {
  auto lock = lock_session();
  if (ib_) return ib_->chip_status(chip);
  auto node = resolve(session_, chip);
  if (!node.ok()) return node.error();
  GALAXY_TRY(require_remote(session_, *node, chip));
  nm::Scanner scanner(*session_.requester, session_.discovery.map);
  nm::ScanOptions so;
  so.only_node = *node;
  auto r = scanner.scan_once(so);
  if (!r.ok()) return r.error();
  const nm::ChipStatus& cur = r->chips.front();
  const wire::ChipId chip_id = cur.chip_id;
  if (!cur.responding)
    return make_error(Code::kTimeout, 8222,
                      fmt::format("chip = '{}' did not answer the status reads", chip));
  nlohmann::json ports = nlohmann::json::array();
  for (size_t p = 0; p < cur.ports.size(); ++p) {
    nlohmann::json regs = nlohmann::json::object();
    for (size_t i = 0; i < nm::kStatusRegisters; ++i)
      if (cur.ports[p].read_mask >> i & 1)
        regs[std::string(nm::status_registers()[i].name)] = cur.ports[p].value[i];
    ports.push_back({{"port", p}, {"absent", cur.ports[p].absent}, {"registers", regs}});
  }
  // Compared as the fabric scan's compare mode does (nm::diff): state changes first, then
  // counters by delta.
  nlohmann::json changes = nlohmann::json::array();
  double interval_s = 0;
  const int64_t now = clock_us();
  auto prev = chip_reads_.find(*node);
  const bool first_read = prev == chip_reads_.end();
  if (!first_read) {
    interval_s = static_cast<double>(now - prev->second.wall_us) / 1e6;
    for (const nm::RegisterChange& ch : nm::diff(prev->second.scan, *r).changes) {
      const auto& info = nm::status_registers()[ch.reg];
      nlohmann::json c{
          {"port", ch.port}, {"register", info.name}, {"old", ch.old_value}, {"new", ch.new_value}};
      if (info.counter) c["delta"] = ch.delta;
      changes.push_back(std::move(c));
    }
  }
  nlohmann::json out{
      {"chip", chip_id},          {"name", session_.plan().name(chip_id)},
      {"ports", ports},           {"changes", changes},
      {"first_read", first_read}, {"interval_s", interval_s},
      {"requests", r->requests},  {"sim_time_us", static_cast<double>(r->elapsed) / nm::kUs}};
  chip_reads_[*node] = {std::move(*r), now};
  return out;
}

}  // namespace galaxy::nmd
