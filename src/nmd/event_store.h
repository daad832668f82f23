// The management daemon's event store (issue "Management console", item 3; docs/system.md 2.5 fault
// management: event collection): faults, alarms, configuration changes and scan summaries kept
// in SQLite so they survive a restart of the daemon, and queried by time, location and severity.
//
// The database runs in WAL mode (readers do not block the single writer, and a crash loses at
// most the last transactions with synchronous=NORMAL) with a 2 s busy timeout. The schema is
// versioned by PRAGMA user_version; a file written by a newer Galaxy is refused rather than
// misread. Every query is parameterized: filter text is bound, never spliced into SQL.
//
// The open (unacknowledged) faults and alarms are counted by severity and by chip as events are
// appended, acknowledged and pruned, from one GROUP BY when the file is opened: the status and
// the views read the counters, never the rows, so they stay fast however many events pile up.
//
// One EventStore is safe to use from several threads (calls are serialized by a mutex).
#pragma once

#include <array>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace galaxy::nmd {

enum class EventKind : uint8_t { kFault, kAlarm, kConfigChange, kScanSummary, kLog };
// Same order and values as chip::Severity, so a chip fault's severity converts by value.
enum class EventSeverity : uint8_t { kInfo, kMinor, kMajor, kCritical };

// "fault", "alarm", "config_change", "scan_summary", "log".
std::string_view event_kind_name(EventKind k);
// "info", "minor", "major", "critical" (as chip::severity_name).
std::string_view event_severity_name(EventSeverity s);
Result<EventKind> parse_event_kind(std::string_view name);
Result<EventSeverity> parse_event_severity(std::string_view name);

inline constexpr size_t kMaxEventLocationChars = 256;
inline constexpr size_t kMaxEventCauseChars = 256;
inline constexpr size_t kMaxEventAcknowledgedByChars = 256;
inline constexpr size_t kMaxEventDetailBytes = 64 * 1024;

struct Event {
  int64_t id = 0;       // assigned by the store
  int64_t time_us = 0;  // wall clock, microseconds since the epoch
  EventKind kind = EventKind::kLog;
  EventSeverity severity = EventSeverity::kInfo;
  std::string location = {};  // "cabinet 3 / chassis 1 / nrc 18304 port 5", or a chip name
  int64_t chip = -1;          // -1: not about a chip
  int32_t port = -1;          // -1: not about a port
  std::string cause = {};     // "link_down", "crc_error_burst", "routing engine changed"
  std::string detail = {};    // free text or JSON
  bool acknowledged = false;
  std::string acknowledged_by = {};
  int64_t acknowledged_us = 0;

  bool operator==(const Event&) const = default;
};

// A filter; the defaults select everything. Results are ordered by (time_us, id), except that a
// query with after_id > 0 (streaming: "what is new since the last id I saw") is ordered by id,
// so paging on the largest id returned never skips an event whose time is out of order.
struct EventQuery {
  int64_t since_us = INT64_MIN;        // time_us >= since_us
  int64_t until_us = INT64_MAX;        // time_us < until_us (half-open, so ranges tile)
  std::string location_contains = {};  // literal substring (% and _ are not wildcards); ASCII
                                       // letters match case-insensitively (SQLite LIKE)
  std::optional<EventSeverity> min_severity = {};
  std::optional<EventKind> kind = {};
  std::optional<bool> acknowledged = {};
  int64_t chip = -1;  // -1: any chip
  size_t limit = 1000;
  bool newest_first = true;
  int64_t after_id = 0;  // only id > after_id, for streaming
  int64_t id = 0;        // only this event (0: any)
};

// Unacknowledged fault and alarm events.
struct OpenFaultCounts {
  std::array<int64_t, 4> by_severity = {};  // indexed by EventSeverity
  std::map<int64_t, int64_t> by_chip = {};  // chip -> count; only chips with some (chip >= 0)

  int64_t total() const {
    return by_severity[0] + by_severity[1] + by_severity[2] + by_severity[3];
  }
  bool operator==(const OpenFaultCounts&) const = default;
};

// `galaxy nmd --retention`: "30d", "12h", "90m", "3600s" or a plain number of seconds; "0" or
// "none" keeps every event (returns 0). At most kMaxRetentionS; below 1 s is refused.
inline constexpr double kMaxRetentionS = 36500.0 * 86400;  // a century
Result<double> parse_retention(std::string_view text);

class EventStore {
 public:
  // Creates the schema if absent. path ":memory:" gives a private in-memory store (tests).
  static Result<std::unique_ptr<EventStore>> open(const std::string& path);
  ~EventStore();
  EventStore(const EventStore&) = delete;
  EventStore& operator=(const EventStore&) = delete;

  // Validates the fields (the id is ignored) and returns the assigned id.
  Result<int64_t> append(Event e);
  // Appends all of events in one transaction (all or none); returns the id of the last one.
  // Validates every event first. An empty list returns 0.
  Result<int64_t> append_all(const std::vector<Event>& events);
  Result<std::vector<Event>> query(const EventQuery& q) const;
  // Unknown id -> kNotFound. Acknowledging an acknowledged event keeps the first ack.
  Status acknowledge(int64_t id, const std::string& by, int64_t time_us);
  // Events matching q, ignoring its limit and order.
  Result<int64_t> count(const EventQuery& q) const;
  // Severity name -> number of events; all four severities are present (0 when none).
  Result<std::map<std::string, int64_t>> counts_by_severity(
      std::optional<bool> acknowledged = std::nullopt) const;
  // The counters of unacknowledged faults and alarms; reads no rows.
  OpenFaultCounts open_fault_counts() const;
  std::array<int64_t, 4> open_faults_by_severity() const;
  // Changes whenever an event is appended, acknowledged or pruned (answers made from the store
  // are cached by it).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Events kept (every kind); reads no rows.
  int64_t size() const;
  // Retention: deletes the events with time_us < time_us and returns how many. Deletes in
  // batches, each its own transaction, so that a large prune never holds the store for long.
  Result<int64_t> prune_older_than(int64_t time_us);
  std::string path() const { return path_; }

 private:
  struct StmtDeleter {
    void operator()(sqlite3_stmt* s) const;
  };
  using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

  EventStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  Status init();
  Status load_counts();
  Result<Stmt> prepare(const std::string& sql) const;
  // One INSERT with insert_ (mu_ held); SQLITE_DONE on success.
  int insert_locked(const Event& e);

  std::string path_;
  sqlite3* db_ = nullptr;
  Stmt insert_;
  Stmt ack_;
  Stmt exists_;
  Stmt prune_;
  mutable std::mutex mu_;
  // The counters have their own mutex (taken after mu_ when both are): a reader of the status
  // does not wait behind a long query or a prune batch.
  mutable std::mutex counts_mu_;
  OpenFaultCounts open_;
  int64_t size_ = 0;
  std::atomic<uint64_t> generation_{0};
};

// Field names as in Event; kind and severity as their names.
nlohmann::json to_json(const Event& e);

}  // namespace galaxy::nmd
