// The management daemon (`galaxy nmd`, docs/api.md): the management server of docs/system.md 2.5
// run continuously over one fabric (simulated or live). At start: discovery, routing, fault
// reporting; then a background loop that collects fault reports as they arrive (a link-down
// re-discovers its region and re-routes), scans the status registers on a schedule and sweeps
// the fabric (a full discovery compared with the map) to notice chips and links that came or
// went. Every fault, alarm, configuration change and scan summary goes to the event store.
//
// Threads: the session (fabric, requester, map, routes) is used by one thread at a time under
// `mu_`; the background loop takes it for one step at a time, API handlers between steps. The
// FabricView snapshot and the metrics are read without it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "nm/fault_ledger.h"
#include "nm/faults.h"
#include "nm/galaxy_sm.h"
#include "nm/mkey.h"
#include "nm/routing.h"
#include "nm/scan.h"
#include "nmd/event_store.h"
#include "nmd/fabric_view.h"
#include "nmd/history.h"
#include "nmd/ib_fabric.h"
#include "nmd/metrics.h"
#include "nmd/session.h"

namespace galaxy::nmd {

// Scan and sweep intervals, from the command line and PUT /api/config alike: 0 (none) up to a
// day, and finite (the loop keeps its deadlines in int64 microseconds).
inline constexpr double kMaxIntervalS = 86400;

struct DaemonOptions {
  SessionOptions session;
  std::string db_path = "galaxy-nmd.db";
  std::string routing_engine = nm::kDefaultRoutingEngine;  // "none": leave the tables
  double scan_interval_s = 60;                             // 0: no scheduled scans
  double sweep_interval_s = 300;                           // 0: no sweeps
  uint64_t fault_mask = 0;
  double tick_ms = 50;            // how often the loop collects fault reports
  double sim_us_per_tick = 1000;  // simulated fabrics: simulated time let pass per tick
  // The chips this daemon manages (fault reporting, scans, chip requests): fabric_view.h Region.
  std::string region;
  // The SM's priority against other SMs (SMInfo, 0-15; IBA 14.4.1): other SMs of an InfiniBand
  // subnet, or other `galaxy nmd` servers of a Galaxy fabric (nm/galaxy_sm.h).
  unsigned sm_priority = 0;
  // Galaxy fabrics with several servers: the SM_Key they share (0: none), this server's GUID
  // (0: from its NIC and VP), and how often a standby polls the master (and the master checks
  // the chips), with the polls a master may miss before a standby takes over.
  uint64_t sm_key = 1;
  uint64_t sm_guid = 0;
  double sm_poll_s = 2;
  unsigned sm_poll_retries = 4;
  // Galaxy fabrics: the management keys placed in the managed chips (nm/mkey.h; key 0: none).
  nm::MKeyPolicy mkey;
  // Per-port metric series for every port up to this many chips; above it only the ports with
  // errors or a link down (TH-2 has 150,000 ports: a scrape of every one would be 100 MB).
  uint32_t all_port_metrics_up_to_chips = 4096;
  // How often every managed chip's FAULTS_REPORTED is compared with the reports that arrived
  // (a chip whose last reports were lost sends no later one to reveal the gap); 0: never.
  double fault_audit_s = 5;
  // Events older than this are deleted (checked every minute, or every tenth of the retention
  // when shorter); 0 keeps every event. parse_retention reads the option's text.
  double retention_s = 0;
  // The console's history (nmd/history.h); its retention is retention_s.
  uint32_t history_points = 1440;
  uint64_t history_bytes = uint64_t{64} << 20;
};

struct ConfigState {
  std::string routing_engine;
  double scan_interval_s = 0;
  double sweep_interval_s = 0;
  uint64_t fault_mask = 0;
};

struct DaemonCounters {
  uint64_t scans = 0;
  double last_scan_s = 0;  // wall seconds of the last fabric scan
  int64_t last_scan_us = 0;
  // The scan running now, if any: chips read so far of those it reads (status "scan").
  bool scan_running = false;
  uint64_t scan_chips_done = 0;
  uint64_t scan_chips_total = 0;
  uint64_t sweeps = 0;
  double last_sweep_s = 0;
  int64_t last_sweep_us = 0;
  uint64_t faults = 0;  // reports received
  uint64_t reroutes = 0;
  bool rerouting = false;  // a re-route's computation is running (the session is free meanwhile)
  // The fault ledger (nm/fault_ledger.h): reports of a change the other end reported first and
  // changes recorded without a report (the ledger's counts, copied when published), chips read
  // because reports of theirs were lost, audits.
  uint64_t faults_merged = 0;
  uint64_t faults_inferred = 0;
  uint64_t chips_checked = 0;
  uint64_t audits = 0;
  uint64_t reroute_failures = 0;
};

class Daemon {
 public:
  // Opens the fabric and the event store, discovers, routes, enables fault reporting; the
  // background loop is not started yet (start()).
  static Result<std::unique_ptr<Daemon>> create(const DaemonOptions& options);
  ~Daemon();

  void start();  // the background loop
  void stop();
  // One turn of the background loop (fault reports, the SM's step, audits, re-routes, sweeps,
  // a scan when due), for a caller that drives the daemon itself instead of start().
  void step();
  // Servers sharing one simulated fabric in one thread (SessionOptions::Shared): answers what
  // reached this server (other servers' SMInfo; fault reports kept for its next step).
  void serve_now();
  // Stops this server as a crash would (SessionOptions::Shared): its port sends and receives
  // nothing more, it records no event and its steps do nothing. For fault campaigns.
  void halt();
  bool halted() const { return halted_; }
  // The daemon's clock in microseconds: wall time, or the simulated time of a shared fabric
  // (every schedule and every event time is on it).
  int64_t clock_us() const;

  // Runs f with the session to itself (API handlers that send management requests).
  template <class F>
  auto with_session(F&& f) {
    auto lock = lock_session();
    return f(session_);
  }
  // The session's lock, counted while waited for: a status scan running in batches lets the
  // waiters in between its batches.
  std::unique_lock<std::mutex> lock_session() const {
    session_waiters_.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock lock(mu_);
    session_waiters_.fetch_sub(1, std::memory_order_acq_rel);
    return lock;
  }

  // Lock-free readers.
  std::shared_ptr<const FabricView> view() const;
  // Changes whenever view() returns a new snapshot (answers made from a view are cached by it).
  uint64_t view_generation() const { return view_generation_.load(std::memory_order_acquire); }
  EventStore& events() { return *events_; }
  MetricRegistry& metrics() { return metrics_; }
  const History& history() const { return history_; }
  const DaemonOptions& options() const { return options_; }
  ConfigState config() const;
  DaemonCounters counters() const;
  int64_t started_us() const { return started_us_; }
  nlohmann::json routes_json() const;

  // Events: append to the store and wake the event stream's readers.
  Result<int64_t> record(Event e);
  void note(Event e);  // record, a failure only printed (the daemon's own log lines)
  // Blocks until an event with id > after_id exists or `timeout_ms` passes; returns the newest id.
  int64_t wait_for_event(int64_t after_id, int timeout_ms);

  // Writes (the API checks the token first). Each records a config_change event.
  Status set_config(const nlohmann::json& changes, const std::string& by);
  Result<nlohmann::json> route_now(const std::string& engine, const std::string& by);
  Result<nlohmann::json> scan_now();
  // A discovery sweep now: the map compared with what is found, replaced when it changed.
  Result<nlohmann::json> sweep_now();
  // Simulated fabrics: the test aid of `galaxy inject` (nmd/inject.h), on the daemon's session;
  // the chip (or, for a link, either end) may be unreachable but must be in the region.
  Result<nlohmann::json> inject(const std::string& action, const std::string& chip, int port,
                                const std::string& code, const std::string& by);
  // One chip's ten status registers of every port, read now, with the changes since the
  // previous read of the same chip (the device view's single / loop / compare).
  Result<nlohmann::json> chip_status(const std::string& chip);

  // An NRC's route table as loaded: per range of destination chip ids, the allowed outputs.
  Result<nlohmann::json> chip_routes(const std::string& chip);
  // Unacknowledged faults and alarms by severity name (all four present).
  std::map<std::string, int64_t> open_fault_counts() const;
  // After an acknowledgement: the snapshot's per-chip open fault counts, recomputed.
  void refresh_fault_counts();

  // Galaxy fabrics: this server's SMInfo role among the servers of the fabric (the console and
  // /api/status): state, GUID, priority, the master or the standbys, counters.
  nlohmann::json sm_json() const;
  // Galaxy fabrics: whether this server is master (writes of the fabric are the master's).
  bool is_master() const { return published_master_.load(std::memory_order_acquire); }
  // Refuses `what` on a standby server, with an error naming the master.
  Status require_master(std::string_view what) const;

  // The daemon serves an InfiniBand subnet (nmd/ib_fabric.h) rather than a Galaxy fabric.
  bool infiniband() const { return ib_ != nullptr; }
  // Operations on Galaxy's chips (registers, EEPROM, BIST, injected faults, fault masks) are
  // refused on an InfiniBand subnet with this error, which names `what`.
  Status require_galaxy(std::string_view what) const;
  // Path trace between two NICs (two ports on InfiniBand) named as users name them.
  Result<nlohmann::json> trace(const std::string& src, const std::string& dst);

  const Region& region() const { return region_; }
  bool in_region(uint32_t chip_id) const;
  // A chip named by id, name or nic:<index> -> its FabricMap node (session locked by caller);
  // a chip outside the region is "not found" (another daemon manages it).
  Result<uint32_t> resolve(const Session& s, const std::string& text) const;
  // The same names -> the chip's node in the described fabric (plan), discovered or not: a
  // link-down can cut a chip off (a NIC behind its only link), and the link-up that undoes it
  // names that chip. "nic:<index>" is the fabric's NIC index (as --server-nic), which does not
  // shift when a NIC drops out of the map.
  Result<uint32_t> resolve_planned(const Session& s, const std::string& text) const;

 private:
  explicit Daemon(DaemonOptions options)
      : options_(std::move(options)),
        history_(HistoryOptions{options_.history_points, options_.history_bytes,
                                options_.all_port_metrics_up_to_chips, options_.retention_s}) {}
  Status init();
  // init() on an InfiniBand subnet: the port opened, the first sweep.
  Status init_ib();
  // The described fabric: the session's, or the InfiniBand subnet's as last swept.
  const fabric::Topology& plan_locked() const;
  Result<nlohmann::json> scan_ib();
  Result<nlohmann::json> sweep_ib_locked(const std::string& engine);
  void loop();
  // f(chip, port, up) for every linked port of the plan at the managed chips `map` found: up
  // when `map` holds the link.
  void for_each_managed_link_locked(const nm::FabricMap& map,
                                    const std::function<void(uint32_t, uint8_t, bool)>& f) const;
  void tick_locked();
  // Retention, when due: deletes the events older than retention_s (without the session lock).
  void prune_events();
  void handle_faults_locked();
  // The reports received since the last call, through the ledger into events.
  void take_reports_locked(std::vector<std::pair<uint32_t, uint8_t>>& downs, bool& any_up);
  // Records one link change of the ledger as a fault event and keeps the view's link state;
  // `report` is the report it came from (null when inferred by a read).
  // `found_by` says what proved an inferred change.
  void record_link_change_locked(const nm::LinkChange& c, const nm::FaultRecord* report,
                                 const char* found_by,
                                 std::vector<std::pair<uint32_t, uint8_t>>& downs, bool& any_up);
  // The critical alarm of a link found down (after a report, or by a sweep).
  void alarm_link_down_locked(uint32_t chip, uint8_t port, std::string detail);
  // Reads the ports of the chips in to_check_ and records what the reads prove happened.
  void check_chips_locked(std::vector<std::pair<uint32_t, uint8_t>>& downs, bool& any_up);
  // Compares every managed chip's FAULTS_REPORTED with what arrived (fault_audit_s), in slices
  // that let the session's waiters in. Takes the lock itself.
  void audit_faults();
  // Between two slices of a long read of the fabric: the requests waiting for the session go.
  void let_waiters_in(std::unique_lock<std::mutex>& lock);
  // Re-discovers around the links found down and re-routes; a failed re-route is retried.
  void after_link_changes_locked(const std::vector<std::pair<uint32_t, uint8_t>>& downs,
                                 bool any_up);
  // Routes computed on a copy of the map with the session free (seconds on TH-2, which no trace
  // or register read waits for), then loaded where they changed. Takes the lock itself.
  void reroute();
  Status route_locked(const std::string& engine);
  // The status scan in batches of chips (a slice each, kSessionSliceS), the session released
  // between batches so a trace or a register request waits about one batch; reports that
  // arrived are taken between batches. Takes the lock itself.
  Result<nlohmann::json> scan_batched();
  // What a whole scan leads to: the summary event, alarms for chips that stopped answering, the
  // ledger's comparison, the view.
  nlohmann::json finish_scan_locked(nm::ScanResult scan, double wall_s);
  // A discovery sweep; when the map changed it is replaced and, with `route`, the fabric
  // re-routed.
  Result<nlohmann::json> sweep_locked(bool route = true);
  // A master's work on the fabric: routes, fault reporting (the chips then name this server as
  // the master), M_Keys; then master. -> the chips that report to it.
  Result<uint64_t> take_fabric_locked();
  // The server election's step (once per sm_poll_s): a standby polls the master and takes over
  // when it is lost; a master checks that the chips still name it and hands over to a standby
  // that outranks it.
  void sm_step_locked();
  // A standby follows the master's link events in the shared event store, so that its fault
  // ledger knows what the master recorded and a takeover records only what changed since.
  void follow_store_locked();
  void publish_sm_locked();
  // Places the configured M_Keys in the managed chips (none configured: nothing), and records
  // how many took them; a chip that refuses holds another server's key.
  void place_mkeys_locked();
  void rebuild_view_locked();
  // The snapshot with the open fault counts, its port metrics, made the one view() returns.
  void publish_view_locked(std::shared_ptr<FabricView> v);
  void count_faults(FabricView& v) const;
  // The fault counts' point of the history, when they changed.
  void note_fault_history(uint64_t faults_received);
  // Copies config_, counters_ and the routing summary for the readers that must not wait for
  // the session (a TH-2 scan holds it for seconds).
  void publish_locked();
  void update_port_metrics(const FabricView& v);
  Event fault_event(const nm::FaultRecord& f) const;
  std::string location_of(uint32_t plan_node, int port) const;

  DaemonOptions options_;
  Region region_;
  std::vector<bool> region_chips_;              // by chip id (plan node)
  std::function<bool(uint32_t)> region_nodes_;  // by FabricMap node, for nm/
  int64_t started_us_ = 0;
  std::unique_ptr<EventStore> events_;
  MetricRegistry metrics_;
  History history_;
  uint64_t history_scan_ = 0;  // session locked: the scan whose point the history holds last

  mutable std::mutex mu_;  // the session and everything below it

  mutable std::atomic<int> session_waiters_{0};
  // One status scan at a time: a scan asked for while another runs starts when it ends, so that
  // the requests between two batches wait behind one scan, not behind two interleaved.
  std::mutex scan_mu_;
  uint64_t environment_metrics_scans_ = UINT64_MAX;  // the scan the chip gauges were set from
  uint64_t map_generation_ = 0;  // session locked: a sweep replaced session_.discovery
  Session session_;
  std::unique_ptr<IbFabric> ib_;      // an InfiniBand subnet instead of session_'s fabric
  std::unique_ptr<nm::GalaxySm> sm_;  // Galaxy fabrics: the election among servers
  int64_t next_sm_us_ = 0;
  int64_t followed_event_ = 0;  // standby: the newest event of the store its ledger has seen
  nm::RouteSet routes_;
  nlohmann::json routes_summary_;
  ConfigState config_;
  std::vector<nm::FaultRecord> pending_faults_;
  std::unique_ptr<nm::FaultLedger> ledger_;
  std::set<uint32_t> to_check_;  // chips (ids) whose reports were lost: read their ports
  int64_t next_audit_us_ = 0;
  bool sweep_due_ = false;  // a chip to check did not answer: its route crosses a dead link
  // A re-route that failed is tried again (1 s, doubling to 30 s) until it succeeds or a later
  // change re-routes anyway.
  bool reroute_pending_ = false;
  // Bumped whenever the map changes (a region re-discovered, a sweep's map): a re-route that
  // computed on an older copy is done again.
  uint64_t map_edits_ = 0;
  int64_t next_reroute_us_ = 0;
  uint32_t reroute_attempts_ = 0;
  std::unique_ptr<nm::ScanResult> last_scan_;
  std::unique_ptr<nm::ScanDiff> last_diff_;
  struct ChipRead {
    nm::ScanResult scan;  // of that chip alone
    int64_t wall_us = 0;
  };
  std::map<uint32_t, ChipRead> chip_reads_;  // the device view's previous read of each chip
  // Ports reported down (chip id, port) -> when: down until a scan that started later reads
  // them up (a scan that began before the report may have read the link still up).
  std::map<std::pair<wire::ChipId, uint8_t>, int64_t> reported_down_;
  int64_t last_scan_started_us_ = 0;
  DaemonCounters counters_;
  int64_t next_scan_us_ = 0;
  int64_t next_sweep_us_ = 0;
  int64_t next_prune_us_ = 0;  // the loop's thread only

  struct Published {
    ConfigState config;
    DaemonCounters counters;
    nlohmann::json routes;
  };
  mutable std::mutex published_mu_;
  Published published_;
  nlohmann::json published_sm_;  // under published_mu_
  std::atomic<bool> published_master_{true};

  mutable std::mutex view_mu_;
  std::shared_ptr<const FabricView> view_;
  std::atomic<uint64_t> view_generation_{0};

  std::mutex event_mu_;
  std::condition_variable event_cv_;
  int64_t newest_event_ = 0;

  std::atomic<bool> stop_{false};
  std::atomic<bool> halted_{false};
  std::thread thread_;
};

int64_t wall_us();

}  // namespace galaxy::nmd
