#include "nmd/event_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <array>
#include <utility>
#include <variant>

namespace galaxy::nmd {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 2000;

constexpr std::array<std::string_view, 5> kKindNames = {"fault", "alarm", "config_change",
                                                        "scan_summary", "log"};
constexpr std::array<std::string_view, 4> kSeverityNames = {"info", "minor", "major", "critical"};

// kind and severity are stored as their enum values: severity so that min_severity is a plain
// integer comparison on an indexed column.
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
CREATE INDEX IF NOT EXISTS events_chip ON events(chip);
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
  // acknowledged = 0 in the WHERE keeps the first acknowledgement.
  auto ack = prepare(
      "UPDATE events SET acknowledged = 1, acknowledged_by = ?, acknowledged_us = ? "
      "WHERE id = ? AND acknowledged = 0");
  if (!ack.ok()) return ack.error();
  ack_ = std::move(ack.value());
  auto exists = prepare("SELECT 1 FROM events WHERE id = ?");
  if (!exists.ok()) return exists.error();
  exists_ = std::move(exists.value());
  auto prune = prepare("DELETE FROM events WHERE time_us < ?");
  if (!prune.ok()) return prune.error();
  prune_ = std::move(prune.value());
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

Result<int64_t> EventStore::append(Event e) {
  GALAXY_TRY(validate(e));
  std::lock_guard lock(mu_);
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
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8030,
                      fmt::format("event store path = '{}': appending event cause = '{}' failed: "
                                  "{}",
                                  path_, e.cause, sqlite3_errmsg(db_)));
  }
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
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
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8051,
                      fmt::format("event store path = '{}': acknowledging event id = {} failed: {}",
                                  path_, id, sqlite3_errmsg(db_)));
  }
  if (sqlite3_changes(db_) > 0) return Status();

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

Status EventStore::prune_older_than(int64_t time_us) {
  std::lock_guard lock(mu_);
  sqlite3_stmt* s = prune_.get();
  sqlite3_reset(s);
  sqlite3_bind_int64(s, 1, time_us);
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) {
    return make_error(Code::kIoError, 8070,
                      fmt::format("event store path = '{}': pruning events older than time_us = "
                                  "{} failed: {}",
                                  path_, time_us, sqlite3_errmsg(db_)));
  }
  return Status();
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
