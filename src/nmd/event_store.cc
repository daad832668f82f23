#include "nmd/event_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>
#include <variant>

namespace galaxy::nmd {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 2000;
// Rows deleted per prune transaction: each batch holds the store for a few milliseconds.
constexpr int64_t kPruneBatch = 10000;

constexpr std::array<std::string_view, 5> kKindNames = {"fault", "alarm", "config_change",
                                                        "scan_summary", "log"};
constexpr std::array<std::string_view, 4> kSeverityNames = {"info", "minor", "major", "critical"};

// kind and severity are stored as their enum values: severity so that min_severity is a plain
// integer comparison on an indexed column. The (kind, time_us) and (chip, time_us) indexes give
// the newest events of one kind or one chip without walking past every other event (a few scan
// summaries among a million faults); (chip, time_us) replaces the chip-only index of older files.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time_us INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  severity INTEGER NOT NULL,
  location TEXT NOT NULL,
  chip INTEGER NOT NULL,
  port INTEGER NOT NULL,
  cause TEXT NOT NULL,
  detail TEXT NOT NULL,
  acknowledged INTEGER NOT NULL DEFAULT 0,
  acknowledged_by TEXT NOT NULL DEFAULT '',
  acknowledged_us INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_time ON events(time_us);
CREATE INDEX IF NOT EXISTS events_severity ON events(severity);
CREATE INDEX IF NOT EXISTS events_kind_time ON events(kind, time_us);
CREATE INDEX IF NOT EXISTS events_chip_time ON events(chip, time_us);
DROP INDEX IF EXISTS events_chip;
PRAGMA user_version = 1;
)sql";

constexpr const char* kColumns =
    "id, time_us, kind, severity, location, chip, port, cause, detail, acknowledged, "
    "acknowledged_by, acknowledged_us";

std::string column_text(sqlite3_stmt* s, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  return p == nullptr ? std::string()
                      : std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, col)));
}

int bind_text(sqlite3_stmt* s, int index, const std::string& text) {
  return sqlite3_bind_text64(s, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

// LIKE with ESCAPE '\': the operator's text is matched literally.
std::string like_contains_pattern(std::string_view text) {
  std::string pattern = "%";
  for (char c : text) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += '%';
  return pattern;
}

using BindValue = std::variant<int64_t, std::string>;

// The WHERE clause of q: only constant SQL text, with the values in *binds, in order.
std::string where_clause(const EventQuery& q, std::vector<BindValue>* binds) {
  std::string sql = " WHERE time_us >= ? AND time_us < ?";
  binds->emplace_back(q.since_us);
  binds->emplace_back(q.until_us);
  if (!q.location_contains.empty()) {
    sql += " AND location LIKE ? ESCAPE '\\'";
    binds->emplace_back(like_contains_pattern(q.location_contains));
  }
  if (q.id > 0) {
    sql += " AND id = ?";
    binds->emplace_back(q.id);
  }
  if (q.min_severity) {
    sql += " AND severity >= ?";
    binds->emplace_back(static_cast<int64_t>(*q.min_severity));
  }
  if (q.kind) {
    sql += " AND kind = ?";
    binds->emplace_back(static_cast<int64_t>(*q.kind));
  }
  if (q.acknowledged) {
    sql += " AND acknowledged = ?";
    binds->emplace_back(static_cast<int64_t>(*q.acknowledged ? 1 : 0));
  }
  if (q.chip >= 0) {
    sql += " AND chip = ?";
    binds->emplace_back(q.chip);
  }
  if (q.after_id > 0) {
    sql += " AND id > ?";
    binds->emplace_back(q.after_id);
  }
  return sql;
}

int bind_all(sqlite3_stmt* s, const std::vector<BindValue>& binds) {
  for (size_t i = 0; i < binds.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    const int rc = std::holds_alternative<int64_t>(binds[i])
                       ? sqlite3_bind_int64(s, index, std::get<int64_t>(binds[i]))
                       : bind_text(s, index, std::get<std::string>(binds[i]));
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

// Faults and alarms are what an operator acknowledges; they alone are counted as open.
bool is_fault_or_alarm(int64_t kind) {
  return kind == static_cast<int64_t>(EventKind::kFault) ||
         kind == static_cast<int64_t>(EventKind::kAlarm);
}

// Adds delta open events of one severity and chip. A severity outside the known values (a row
// written by something else) is not counted, here or when it leaves, so the counters agree.
void add_open(OpenFaultCounts& c, int64_t severity, int64_t chip, int64_t delta) {
  if (severity < 0 || severity >= static_cast<int64_t>(c.by_severity.size())) return;
  c.by_severity[static_cast<size_t>(severity)] += delta;
  if (chip < 0) return;
  auto it = c.by_chip.try_emplace(chip, 0).first;
  it->second += delta;
  if (it->second <= 0) c.by_chip.erase(it);
}

void subtract_open(OpenFaultCounts& from, const OpenFaultCounts& gone) {
  for (size_t i = 0; i < from.by_severity.size(); ++i) from.by_severity[i] -= gone.by_severity[i];
  for (const auto& [chip, n] : gone.by_chip) {
    auto it = from.by_chip.find(chip);
    if (it == from.by_chip.end()) continue;
    it->second -= n;
    if (it->second <= 0) from.by_chip.erase(it);
  }
}

Status validate(const Event& e) {
  if (static_cast<size_t>(e.kind) >= kKindNames.size()) {
    return make_error(Code::kInvalidArgument, 8020,
                      fmt::format("event kind = {} is not a known kind (0-{})",
                                  static_cast<int>(e.kind), kKindNames.size() - 1));
  }
  if (static_cast<size_t>(e.severity) >= kSeverityNames.size()) {
    return make_error(Code::kInvalidArgument, 8021,
                      fmt::format("event severity = {} is not a known severity (0-{})",
                                  static_cast<int>(e.severity), kSeverityNames.size() - 1));
  }
  if (e.location.size() > kMaxEventLocationChars) {
    return make_error(
        Code::kInvalidArgument, 8022,
        fmt::format("event location = '{}...' is {} characters, more than {}",
                    e.location.substr(0, 40), e.location.size(), kMaxEventLocationChars));
  }
  if (e.cause.size() > kMaxEventCauseChars) {
    return make_error(Code::kInvalidArgument, 8023,
                      fmt::format("event cause = '{}...' is {} characters, more than {}",
                                  e.cause.substr(0, 40), e.cause.size(), kMaxEventCauseChars));
  }
  if (e.detail.size() > kMaxEventDetailBytes) {
    return make_error(Code::kInvalidArgument, 8024,
                      fmt::format("event detail = '{}...' is {} bytes, more than {}",
                                  e.detail.substr(0, 40), e.detail.size(), kMaxEventDetailBytes));
  }
  if (e.chip < -1) {
    return make_error(Code::kInvalidArgument, 8025,
                      fmt::format("event chip = {} is negative (-1 means no chip)", e.chip));
  }
  if (e.port < -1) {
    return make_error(Code::kInvalidArgument, 8026,
                      fmt::format("event port = {} is negative (-1 means no port)", e.port));
  }
  if (e.acknowledged_by.size() > kMaxEventAcknowledgedByChars) {
    return make_error(Code::kInvalidArgument, 8027,
                      fmt::format("event acknowledged_by = '{}...' is {} characters, more than {}",
                                  e.acknowledged_by.substr(0, 40), e.acknowledged_by.size(),
                                  kMaxEventAcknowledgedByChars));
  }
  return Status();
}

}  // namespace

std::string_view event_kind_name(EventKind k) {
  const auto i = static_cast<size_t>(k);
  return i < kKindNames.size() ? kKindNames[i] : "unknown";
}

std::string_view event_severity_name(EventSeverity s) {
  const auto i = static_cast<size_t>(s);
  return i < kSeverityNames.size() ? kSeverityNames[i] : "unknown";
}

Result<EventKind> parse_event_kind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<EventKind>(i);
  }
  return make_error(
      Code::kInvalidArgument, 8010,
      fmt::format("event kind = '{}' is not one of fault, alarm, config_change, scan_summary, log",
                  name));
}

Result<EventSeverity> parse_event_severity(std::string_view name) {
  for (size_t i = 0; i < kSeverityNames.size(); ++i) {
    if (kSeverityNames[i] == name) return static_cast<EventSeverity>(i);
  }
  return make_error(
      Code::kInvalidArgument, 8011,
      fmt::format("event severity = '{}' is not one of info, minor, major, critical", name));
}

Result<double> parse_retention(std::string_view text) {
  if (text == "none" || text == "0") return 0.0;
  // A decimal number then an optional unit; from_chars takes neither "inf", "nan" nor a sign
  // other than '-' (refused below), so only finite numbers get through.
  double value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value, std::chars_format::fixed);
  const std::string_view unit(end, static_cast<size_t>(last - end));
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  if (ec != std::errc() || end == first || scale == 0 || !std::isfinite(value)) {
    return make_error(Code::kInvalidArgument, 8080,
                      fmt::format("--retention = '{}' is not a duration: give a number with s, m, "
                                  "h or d (30d, 12h, 3600s), or 0 or none to keep every event",
                                  text));
  }
  const double seconds = value * scale;
  if (!(seconds == 0 || (seconds >= 1 && seconds <= kMaxRetentionS))) {
    return make_error(Code::kOutOfRange, 8081,
                      fmt::format("--retention = '{}' is {} s: must be 0 (keep every event) or "
                                  "from 1 s to {} d",
                                  text, seconds, kMaxRetentionS / 86400));
  }
  return seconds;
}

void EventStore::StmtDeleter::operator()(sqlite3_stmt* s) const {
  sqlite3_finalize(s);
}

EventStore::~EventStore() {
  insert_.reset();
  ack_.reset();
  exists_.reset();
  prune_.reset();
  // The last connection to close checkpoints the WAL into the database and removes the -wal file.
  sqlite3_close_v2(db_);
}

Result<std::unique_ptr<EventStore>> EventStore::open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return make_error(Code::kIoError, 8000,
                      fmt::format("event store path = '{}' cannot be opened: {}", path, why));
  }
  std::unique_ptr<EventStore> store(new EventStore(path, db));
  GALAXY_TRY(store->init());
  return store;
}

Status EventStore::init() {
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);

  // The first read of the file: a non-database file fails here (SQLITE_NOTADB).
  auto version = prepare("PRAGMA user_version");
  if (!version.ok()) {
    return make_error(Code::kIoError, 8001,
                      fmt::format("event store path = '{}' is not a usable SQLite database: {}",
                                  path_, version.error().message));
  }
  if (sqlite3_step(version->get()) != SQLITE_ROW) {
    return make_error(Code::kIoError, 8002,
                      fmt::format("event store path = '{}' is not a usable SQLite database: {}",
                                  path_, sqlite3_errmsg(db_)));
  }
  const int64_t user_version = sqlite3_column_int64(version->get(), 0);
  version->reset();
  if (user_version > kSchemaVersion) {
    return make_error(Code::kUnsupported, 8003,
                      fmt::format("event store path = '{}' has schema version {}, newer than this "
                                  "Galaxy's {}; use a newer galaxy or another file",
                                  path_, user_version, kSchemaVersion));
  }

  auto journal = prepare("PRAGMA journal_mode=WAL");
  if (!journal.ok()) return journal.error();
  if (sqlite3_step(journal->get()) != SQLITE_ROW) {
    return make_error(Code::kIoError, 8004,
                      fmt::format("event store path = '{}': setting journal_mode=WAL failed: {}",
                                  path_, sqlite3_errmsg(db_)));
  }
  const std::string mode = column_text(journal->get(), 0);
  journal->reset();
  // An in-memory database has no file to keep a WAL beside; SQLite reports "memory".
  if (mode != "wal" && !(path_ == ":memory:" && mode == "memory")) {
    return make_error(Code::kUnsupported, 8005,
                      fmt::format("event store path = '{}': journal_mode is '{}', not 'wal' (the "
                                  "file system may not support WAL's shared memory)",
                                  path_, mode));
  }

  char* err = nullptr;
  if (sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, &err) != SQLITE_OK ||
      sqlite3_exec(db_, (std::string("BEGIN IMMEDIATE;") + kSchema + "COMMIT;").c_str(), nullptr,
                   nullptr, &err) != SQLITE_OK) {
    std::string why = err != nullptr ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return make_error(
        Code::kIoError, 8006,
        fmt::format("event store path = '{}': creating the schema failed: {}", path_, why));
  }

  auto insert = prepare(
      "INSERT INTO events (time_us, kind, severity, location, chip, port, cause, detail, "
      "acknowledged, acknowledged_by, acknowledged_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.error();
  insert_ = std::move(insert.value());
  // acknowledged = 0 in the WHERE keeps the first acknowledgement; the row returned (only when
  // it changed) says which counters to lower.
  auto ack = prepare(
      "UPDATE events SET acknowledged = 1, acknowledged_by = ?, acknowledged_us = ? "
      "WHERE id = ? AND acknowledged = 0 RETURNING kind, severity, chip");
  if (!ack.ok()) return ack.error();
  ack_ = std::move(ack.value());
  auto exists = prepare("SELECT 1 FROM events WHERE id = ?");
  if (!exists.ok()) return exists.error();
  exists_ = std::move(exists.value());
  // One batch of the oldest events (by the time index); the rows returned lower the counters.
  auto prune = prepare(
      "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE time_us < ? ORDER BY time_us "
      "LIMIT ?) RETURNING kind, severity, chip, acknowledged");
  if (!prune.ok()) return prune.error();
  prune_ = std::move(prune.value());
  return load_counts();
}

// The only reading of every open row: once, when the file is opened.
Status EventStore::load_counts() {
  auto open = prepare(fmt::format(
      "SELECT severity, chip, COUNT(*) FROM events WHERE acknowledged = 0 AND kind IN ({}, {}) "
      "GROUP BY severity, chip",
      static_cast<int>(EventKind::kFault), static_cast<int>(EventKind::kAlarm)));
  if (!open.ok()) return open.error();
  OpenFaultCounts counts;
  int rc;
  while ((rc = sqlite3_step(open->get())) == SQLITE_ROW) {
    add_open(counts, sqlite3_column_int64(open->get(), 0), sqlite3_column_int64(open->get(), 1),
             sqlite3_column_int64(open->get(), 2));
  }
  auto all = prepare("SELECT COUNT(*) FROM events");
  if (!all.ok()) return all.error();
  if (rc != SQLITE_DONE || sqlite3_step(all->get()) != SQLITE_ROW) {
    return make_error(Code::kIoError, 8008,
                      fmt::format("event store path = '{}': counting the open faults failed: {}",
                                  path_, sqlite3_errmsg(db_)));
  }
  std::lock_guard lock(counts_mu_);
  open_ = std::move(counts);
  size_ = sqlite3_column_int64(all->get(), 0);
  return Status();
}

Result<EventStore::Stmt> EventStore::prepare(const std::string& sql) const {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size() + 1), &s, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(s);
    return make_error(Code::kIoError, 8007,
                      fmt::format("event store path = '{}': preparing '{}' failed: {}", path_, sql,
                                  sqlite3_errmsg(db_)));
  }
  return Stmt(s);
}

int EventStore::insert_locked(const Event& e) {
  sqlite3_stmt* s = insert_.get();
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  int rc = SQLITE_OK;
  int i = 0;
  if ((rc = sqlite3_bind_int64(s, ++i, e.time_us)) == SQLITE_OK &&
      (rc = sqlite3_bind_int(s, ++i, static_cast<int>(e.kind))) == SQLITE_OK &&
      (rc = sqlite3_bind_int(s, ++i, static_cast<int>(e.severity))) == SQLITE_OK &&
      (rc = bind_text(s, ++i, e.location)) == SQLITE_OK &&
      (rc = sqlite3_bind_int64(s, ++i, e.chip)) == SQLITE_OK &&
      (rc = sqlite3_bind_int(s, ++i, e.port)) == SQLITE_OK &&
      (rc = bind_text(s, ++i, e.cause)) == SQLITE_OK &&
      (rc = bind_text(s, ++i, e.detail)) == SQLITE_OK &&
      (rc = sqlite3_bind_int(s, ++i, e.acknowledged ? 1 : 0)) == SQLITE_OK &&
      (rc = bind_text(s, ++i, e.acknowledged_by)) == SQLITE_OK &&
      (rc = sqlite3_bind_int64(s, ++i, e.acknowledged_us)) == SQLITE_OK) {
    rc = sqlite3_step(s);
  }
  sqlite3_reset(s);
  return rc;
}

Result<int64_t> EventStore::append(Event e) {
  GALAXY_TRY(validate(e));
  std::lock_guard lock(mu_);
  if (insert_locked(e) != SQLITE_DONE) {
    return make_error(Code::kIoError, 8030,
                      fmt::format("event store path = '{}': appending event cause = '{}' failed: "
                                  "{}",
                                  path_, e.cause, sqlite3_errmsg(db_)));
  }
  const auto id = static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  std::lock_guard counts(counts_mu_);
  ++size_;
  if (!e.acknowledged && is_fault_or_alarm(static_cast<int64_t>(e.kind)))
    add_open(open_, static_cast<int64_t>(e.severity), e.chip, 1);
  generation_.fetch_add(1, std::memory_order_release);
  return id;
}

Result<int64_t> EventStore::append_all(const std::vector<Event>& events) {
  for (const Event& e : events) GALAXY_TRY(validate(e));
  if (events.empty()) return int64_t{0};
  std::lock_guard lock(mu_);
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return make_error(Code::kIoError, 8031,
                      fmt::format("event store path = '{}': appending {} events failed: {}", path_,
                                  events.size(), sqlite3_errmsg(db_)));
  }
  for (const Event& e : events) {
    if (insert_locked(e) != SQLITE_DONE) {
      Error err = make_error(Code::kIoError, 8032,
                             fmt::format("event store path = '{}': appending {} events failed at "
                                         "cause = '{}' (none stored): {}",
                                         path_, events.size(), e.cause, sqlite3_errmsg(db_)));
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      return err;
    }
  }
  const auto last = static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    Error err = make_error(Code::kIoError, 8033,
                           fmt::format("event store path = '{}': committing {} events failed "
                                       "(none stored): {}",
                                       path_, events.size(), sqlite3_errmsg(db_)));
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return err;
  }
  std::lock_guard counts(counts_mu_);
  generation_.fetch_add(1, std::memory_order_release);
  size_ += static_cast<int64_t>(events.size());
  for (const Event& e : events)
    if (!e.acknowledged && is_fault_or_alarm(static_cast<int64_t>(e.kind)))
      add_open(open_, static_cast<int64_t>(e.severity), e.chip, 1);
  return last;
}

Result<std::vector<Event>> EventStore::query(const EventQuery& q) const {
  std::vector<BindValue> binds;
  std::string sql = std::string("SELECT ") + kColumns + " FROM events" + where_clause(q, &binds);
  const char* dir = q.newest_first ? " DESC" : " ASC";
  if (q.after_id > 0) {
    sql += std::string(" ORDER BY id") + dir;
  } else {
    sql += std::string(" ORDER BY time_us") + dir + ", id" + dir;
  }
  sql += " LIMIT ?";
  binds.emplace_back(static_cast<int64_t>(
      q.limit > static_cast<size_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(q.limit)));

  std::lock_guard lock(mu_);
  auto stmt = prepare(sql);
  if (!stmt.ok()) return stmt.error();
  sqlite3_stmt* s = stmt->get();
  if (bind_all(s, binds) != SQLITE_OK) {
    return make_error(Code::kIoError, 8040,
                      fmt::format("event store path = '{}': binding the query failed: {}", path_,
                                  sqlite3_errmsg(db_)));
  }
  std::vector<Event> events;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    Event e;
    e.id = sqlite3_column_int64(s, 0);
    e.time_us = sqlite3_column_int64(s, 1);
    const int64_t kind = sqlite3_column_int64(s, 2);
    const int64_t severity = sqlite3_column_int64(s, 3);
    if (kind < 0 || kind >= static_cast<int64_t>(kKindNames.size()) || severity < 0 ||
        severity >= static_cast<int64_t>(kSeverityNames.size())) {
      return make_error(Code::kMalformed, 8041,
                        fmt::format("event store path = '{}': event id = {} has kind = {}, "
                                    "severity = {}, outside the known values",
                                    path_, e.id, kind, severity));
    }
    e.kind = static_cast<EventKind>(kind);
    e.severity = static_cast<EventSeverity>(severity);
    e.location = column_text(s, 4);
    e.chip = sqlite3_column_int64(s, 5);
    e.port = sqlite3_column_int(s, 6);
    e.cause = column_text(s, 7);
    e.detail = column_text(s, 8);
    e.acknowledged = sqlite3_column_int(s, 9) != 0;
    e.acknowledged_by = column_text(s, 10);
    e.acknowledged_us = sqlite3_column_int64(s, 11);
    events.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8042,
                      fmt::format("event store path = '{}': reading events failed: {}", path_,
                                  sqlite3_errmsg(db_)));
  }
  return events;
}

Status EventStore::acknowledge(int64_t id, const std::string& by, int64_t time_us) {
  if (by.size() > kMaxEventAcknowledgedByChars) {
    return make_error(Code::kInvalidArgument, 8050,
                      fmt::format("acknowledged_by = '{}...' is {} characters, more than {}",
                                  by.substr(0, 40), by.size(), kMaxEventAcknowledgedByChars));
  }
  std::lock_guard lock(mu_);
  sqlite3_stmt* s = ack_.get();
  sqlite3_reset(s);
  int rc = SQLITE_OK;
  if ((rc = bind_text(s, 1, by)) == SQLITE_OK &&
      (rc = sqlite3_bind_int64(s, 2, time_us)) == SQLITE_OK &&
      (rc = sqlite3_bind_int64(s, 3, id)) == SQLITE_OK) {
    rc = sqlite3_step(s);
  }
  bool changed = false;
  int64_t kind = 0, severity = 0, chip = -1;
  if (rc == SQLITE_ROW) {
    changed = true;
    kind = sqlite3_column_int64(s, 0);
    severity = sqlite3_column_int64(s, 1);
    chip = sqlite3_column_int64(s, 2);
    rc = sqlite3_step(s);
  }
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8051,
                      fmt::format("event store path = '{}': acknowledging event id = {} failed: {}",
                                  path_, id, sqlite3_errmsg(db_)));
  }
  if (changed) {
    generation_.fetch_add(1, std::memory_order_release);
    if (is_fault_or_alarm(kind)) {
      std::lock_guard counts(counts_mu_);
      add_open(open_, severity, chip, -1);
    }
    return Status();
  }

  // Nothing changed: either already acknowledged (keep the first) or no such event.
  s = exists_.get();
  sqlite3_reset(s);
  sqlite3_bind_int64(s, 1, id);
  rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc == SQLITE_ROW) return Status();
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8052,
                      fmt::format("event store path = '{}': looking up event id = {} failed: {}",
                                  path_, id, sqlite3_errmsg(db_)));
  }
  return make_error(Code::kNotFound, 8053,
                    fmt::format("event id = {} does not exist in the event store", id));
}

Result<int64_t> EventStore::count(const EventQuery& q) const {
  std::vector<BindValue> binds;
  const std::string sql = "SELECT COUNT(*) FROM events" + where_clause(q, &binds);
  std::lock_guard lock(mu_);
  auto stmt = prepare(sql);
  if (!stmt.ok()) return stmt.error();
  sqlite3_stmt* s = stmt->get();
  if (bind_all(s, binds) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
    return make_error(Code::kIoError, 8060,
                      fmt::format("event store path = '{}': counting events failed: {}", path_,
                                  sqlite3_errmsg(db_)));
  }
  return static_cast<int64_t>(sqlite3_column_int64(s, 0));
}

Result<std::map<std::string, int64_t>> EventStore::counts_by_severity(
    std::optional<bool> acknowledged) const {
  std::string sql = "SELECT severity, COUNT(*) FROM events";
  if (acknowledged) sql += " WHERE acknowledged = ?";
  sql += " GROUP BY severity";
  std::lock_guard lock(mu_);
  auto stmt = prepare(sql);
  if (!stmt.ok()) return stmt.error();
  sqlite3_stmt* s = stmt->get();
  if (acknowledged) sqlite3_bind_int(s, 1, *acknowledged ? 1 : 0);
  std::map<std::string, int64_t> counts;
  for (std::string_view name : kSeverityNames) counts[std::string(name)] = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const int64_t severity = sqlite3_column_int64(s, 0);
    counts[std::string(event_severity_name(static_cast<EventSeverity>(severity)))] +=
        sqlite3_column_int64(s, 1);
  }
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8061,
                      fmt::format("event store path = '{}': counting by severity failed: {}", path_,
                                  sqlite3_errmsg(db_)));
  }
  return counts;
}

OpenFaultCounts EventStore::open_fault_counts() const {
  std::lock_guard lock(counts_mu_);
  return open_;
}

std::array<int64_t, 4> EventStore::open_faults_by_severity() const {
  std::lock_guard lock(counts_mu_);
  return open_.by_severity;
}

int64_t EventStore::size() const {
  std::lock_guard lock(counts_mu_);
  return size_;
}

Result<int64_t> EventStore::prune_older_than(int64_t time_us) {
  int64_t deleted = 0;
  while (true) {
    // The lock is taken per batch: appends and queries go on between batches.
    std::lock_guard lock(mu_);
    sqlite3_stmt* s = prune_.get();
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, time_us);
    sqlite3_bind_int64(s, 2, kPruneBatch);
    OpenFaultCounts gone;
    int64_t n = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      ++n;
      if (sqlite3_column_int64(s, 3) == 0 && is_fault_or_alarm(sqlite3_column_int64(s, 0)))
        add_open(gone, sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2), 1);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
      return make_error(Code::kIoError, 8070,
                        fmt::format("event store path = '{}': pruning events older than time_us = "
                                    "{} failed after {} deleted: {}",
                                    path_, time_us, deleted, sqlite3_errmsg(db_)));
    }
    {
      std::lock_guard counts(counts_mu_);
      subtract_open(open_, gone);
      size_ -= n;
      generation_.fetch_add(1, std::memory_order_release);
    }
    deleted += n;
    if (n < kPruneBatch) return deleted;
  }
}

nlohmann::json to_json(const Event& e) {
  return nlohmann::json{{"id", e.id},
                        {"time_us", e.time_us},
                        {"kind", std::string(event_kind_name(e.kind))},
                        {"severity", std::string(event_severity_name(e.severity))},
                        {"location", e.location},
                        {"chip", e.chip},
                        {"port", e.port},
                        {"cause", e.cause},
                        {"detail", e.detail},
                        {"acknowledged", e.acknowledged},
                        {"acknowledged_by", e.acknowledged_by},
                        {"acknowledged_us", e.acknowledged_us}};
}

}  // namespace galaxy::nmd
