#include "nmd/event_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace galaxy::nmd {
namespace {

namespace fs = std::filesystem;

// A path unique to this test and process, removed (with its -wal and -shm files) on exit.
class TempDbPath {
 public:
  TempDbPath() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::path(::testing::TempDir()) / (std::string("galaxy_event_store_") + info->name() +
                                               "_" + std::to_string(::getpid()) + ".db"))
                .string();
    remove_all();
  }
  ~TempDbPath() { remove_all(); }
  const std::string& str() const { return path_; }

 private:
  void remove_all() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix, ec);
  }
  std::string path_;
};

std::unique_ptr<EventStore> open_memory() {
  auto store = EventStore::open(":memory:");
  EXPECT_TRUE(store.ok()) << store.error().to_string();
  return std::move(store.value());
}

Event make_event(int64_t time_us, EventSeverity severity, std::string location,
                 EventKind kind = EventKind::kFault, int64_t chip = -1) {
  Event e;
  e.time_us = time_us;
  e.kind = kind;
  e.severity = severity;
  e.location = std::move(location);
  e.chip = chip;
  e.cause = "link_down";
  return e;
}

std::vector<int64_t> ids_of(const Result<std::vector<Event>>& r) {
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  std::vector<int64_t> ids;
  if (r.ok()) {
    for (const Event& e : r.value()) ids.push_back(e.id);
  }
  return ids;
}

TEST(EventNames, RoundTripAndRejectUnknown) {
  for (EventKind k : {EventKind::kFault, EventKind::kAlarm, EventKind::kConfigChange,
                      EventKind::kScanSummary, EventKind::kLog}) {
    auto parsed = parse_event_kind(event_kind_name(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  for (EventSeverity s : {EventSeverity::kInfo, EventSeverity::kMinor, EventSeverity::kMajor,
                          EventSeverity::kCritical}) {
    auto parsed = parse_event_severity(event_severity_name(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(event_kind_name(EventKind::kConfigChange), "config_change");
  EXPECT_EQ(event_severity_name(EventSeverity::kCritical), "critical");
  auto bad_kind = parse_event_kind("warning");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.error().message.find("'warning'"), std::string::npos);
  auto bad_severity = parse_event_severity("Major");
  ASSERT_FALSE(bad_severity.ok());
  EXPECT_NE(bad_severity.error().message.find("'Major'"), std::string::npos);
}

TEST(EventStore, AppendQueryRoundTripsEveryField) {
  auto store = open_memory();
  Event e;
  e.time_us = 1'700'000'000'123'456;
  e.kind = EventKind::kConfigChange;
  e.severity = EventSeverity::kMajor;
  e.location = "cabinet 3 / chassis 1 / nrc 18304 port 5";
  e.chip = 18304;
  e.port = 5;
  e.cause = "routing engine changed";
  e.detail = R"({"from":"dor","to":"updown"})";
  e.acknowledged = true;
  e.acknowledged_by = "alice";
  e.acknowledged_us = 1'700'000'000'999'999;
  auto id = store->append(e);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  EXPECT_GT(*id, 0);
  auto id2 = store->append(make_event(5, EventSeverity::kInfo, "x"));
  ASSERT_TRUE(id2.ok());
  EXPECT_GT(*id2, *id);

  auto got = store->query(EventQuery{.chip = 18304});
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 1u);
  Event want = e;
  want.id = *id;
  EXPECT_EQ(got->front(), want);

  const auto j = to_json(got->front());
  EXPECT_EQ(j["id"], *id);
  EXPECT_EQ(j["time_us"], e.time_us);
  EXPECT_EQ(j["kind"], "config_change");
  EXPECT_EQ(j["severity"], "major");
  EXPECT_EQ(j["location"], e.location);
  EXPECT_EQ(j["chip"], 18304);
  EXPECT_EQ(j["port"], 5);
  EXPECT_EQ(j["cause"], e.cause);
  EXPECT_EQ(j["detail"], e.detail);
  EXPECT_EQ(j["acknowledged"], true);
  EXPECT_EQ(j["acknowledged_by"], "alice");
  EXPECT_EQ(j["acknowledged_us"], e.acknowledged_us);
}

TEST(EventStore, FiltersByTimeRangeHalfOpen) {
  auto store = open_memory();
  std::vector<int64_t> ids;
  for (int64_t t : {100, 200, 300, 400}) {
    ids.push_back(*store->append(make_event(t, EventSeverity::kInfo, "chip")));
  }
  EXPECT_EQ(ids_of(store->query(EventQuery{.since_us = 200, .until_us = 400})),
            (std::vector<int64_t>{ids[2], ids[1]}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.since_us = 201})),
            (std::vector<int64_t>{ids[3], ids[2]}));
  EXPECT_EQ(*store->count(EventQuery{.until_us = 300}), 2);
}

TEST(EventStore, LocationSubstringTreatsWildcardsLiterally) {
  auto store = open_memory();
  const int64_t percent = *store->append(make_event(1, EventSeverity::kInfo, "rack 100% / a_b"));
  const int64_t plain = *store->append(make_event(2, EventSeverity::kInfo, "rack 1000 / axb"));
  const int64_t slash = *store->append(make_event(3, EventSeverity::kInfo, "dir\\name"));
  EXPECT_EQ(ids_of(store->query(EventQuery{.location_contains = "100%"})),
            std::vector<int64_t>{percent});
  EXPECT_EQ(ids_of(store->query(EventQuery{.location_contains = "a_b"})),
            std::vector<int64_t>{percent});
  EXPECT_EQ(ids_of(store->query(EventQuery{.location_contains = "rack 100"})),
            (std::vector<int64_t>{plain, percent}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.location_contains = "%"})),
            std::vector<int64_t>{percent});
  EXPECT_EQ(ids_of(store->query(EventQuery{.location_contains = "\\"})),
            std::vector<int64_t>{slash});
  // Quote characters are bound as data, not SQL.
  EXPECT_TRUE(ids_of(store->query(EventQuery{.location_contains = "' OR 1=1 --"})).empty());
}

TEST(EventStore, FiltersBySeverityKindAcknowledgedAndChip) {
  auto store = open_memory();
  const int64_t info = *store->append(make_event(1, EventSeverity::kInfo, "a"));
  const int64_t minor =
      *store->append(make_event(2, EventSeverity::kMinor, "a", EventKind::kAlarm, 7));
  const int64_t major = *store->append(make_event(3, EventSeverity::kMajor, "a"));
  const int64_t critical =
      *store->append(make_event(4, EventSeverity::kCritical, "a", EventKind::kAlarm, 7));
  ASSERT_TRUE(store->acknowledge(major, "bob", 10).ok());

  EXPECT_EQ(ids_of(store->query(EventQuery{.min_severity = EventSeverity::kMajor})),
            (std::vector<int64_t>{critical, major}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.min_severity = EventSeverity::kInfo})).size(), 4u);
  EXPECT_EQ(ids_of(store->query(EventQuery{.kind = EventKind::kAlarm})),
            (std::vector<int64_t>{critical, minor}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.acknowledged = true})), std::vector<int64_t>{major});
  EXPECT_EQ(ids_of(store->query(EventQuery{.acknowledged = false})),
            (std::vector<int64_t>{critical, minor, info}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.chip = 7})), (std::vector<int64_t>{critical, minor}));
  EXPECT_EQ(*store->count(EventQuery{
                .min_severity = EventSeverity::kMinor, .acknowledged = false, .chip = 7}),
            2);
}

TEST(EventStore, LimitOrderAndAfterId) {
  auto store = open_memory();
  // Times deliberately out of id order: 30, 10, 20.
  const int64_t a = *store->append(make_event(30, EventSeverity::kInfo, "x"));
  const int64_t b = *store->append(make_event(10, EventSeverity::kInfo, "x"));
  const int64_t c = *store->append(make_event(20, EventSeverity::kInfo, "x"));
  EXPECT_EQ(ids_of(store->query(EventQuery{})), (std::vector<int64_t>{a, c, b}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.newest_first = false})),
            (std::vector<int64_t>{b, c, a}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.limit = 2})), (std::vector<int64_t>{a, c}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.limit = 2, .newest_first = false})),
            (std::vector<int64_t>{b, c}));
  // Streaming pages in id order, so no event is skipped whatever its time.
  EXPECT_EQ(ids_of(store->query(EventQuery{.newest_first = false, .after_id = a})),
            (std::vector<int64_t>{b, c}));
  EXPECT_EQ(ids_of(store->query(EventQuery{.limit = 1, .newest_first = false, .after_id = b})),
            std::vector<int64_t>{c});
  EXPECT_TRUE(ids_of(store->query(EventQuery{.after_id = c})).empty());
  EXPECT_EQ(*store->count(EventQuery{.limit = 1}), 3);  // count ignores the limit
}

TEST(EventStore, AcknowledgeKeepsFirstAndNamesUnknownId) {
  auto store = open_memory();
  const int64_t id = *store->append(make_event(1, EventSeverity::kMajor, "x"));
  ASSERT_TRUE(store->acknowledge(id, "alice", 111).ok());
  ASSERT_TRUE(store->acknowledge(id, "bob", 222).ok());
  auto got = store->query(EventQuery{});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_TRUE(got->front().acknowledged);
  EXPECT_EQ(got->front().acknowledged_by, "alice");
  EXPECT_EQ(got->front().acknowledged_us, 111);

  const Status missing = store->acknowledge(9999, "alice", 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  EXPECT_NE(missing.error().message.find("9999"), std::string::npos);
}

TEST(EventStore, CountsBySeverity) {
  auto store = open_memory();
  const int64_t m1 = *store->append(make_event(1, EventSeverity::kMajor, "x"));
  ASSERT_TRUE(store->append(make_event(2, EventSeverity::kMajor, "x")).ok());
  ASSERT_TRUE(store->append(make_event(3, EventSeverity::kCritical, "x")).ok());
  ASSERT_TRUE(store->acknowledge(m1, "ops", 5).ok());

  const std::map<std::string, int64_t> all{
      {"info", 0}, {"minor", 0}, {"major", 2}, {"critical", 1}};
  EXPECT_EQ(*store->counts_by_severity(), all);
  const std::map<std::string, int64_t> open{
      {"info", 0}, {"minor", 0}, {"major", 1}, {"critical", 1}};
  EXPECT_EQ(*store->counts_by_severity(false), open);
  const std::map<std::string, int64_t> acked{
      {"info", 0}, {"minor", 0}, {"major", 1}, {"critical", 0}};
  EXPECT_EQ(*store->counts_by_severity(true), acked);
}

TEST(EventStore, PruneDeletesOnlyOlderEvents) {
  auto store = open_memory();
  ASSERT_TRUE(store->append(make_event(100, EventSeverity::kInfo, "x")).ok());
  const int64_t kept = *store->append(make_event(200, EventSeverity::kInfo, "x"));
  const int64_t newer = *store->append(make_event(300, EventSeverity::kInfo, "x"));
  ASSERT_TRUE(store->prune_older_than(200).ok());
  EXPECT_EQ(ids_of(store->query(EventQuery{})), (std::vector<int64_t>{newer, kept}));
}

// The counters as the rows say they should be: unacknowledged faults and alarms, by severity and
// by chip (chip >= 0), recomputed here from every row.
OpenFaultCounts counted_from_rows(const EventStore& store) {
  OpenFaultCounts c;
  auto all = store.query(EventQuery{.acknowledged = false, .limit = SIZE_MAX});
  EXPECT_TRUE(all.ok());
  if (!all.ok()) return c;
  for (const Event& e : *all) {
    if (e.kind != EventKind::kFault && e.kind != EventKind::kAlarm) continue;
    ++c.by_severity[static_cast<size_t>(e.severity)];
    if (e.chip >= 0) ++c.by_chip[e.chip];
  }
  return c;
}

TEST(EventStore, OpenFaultCountsFollowAppendAcknowledgePruneAndReopen) {
  TempDbPath path;
  {
    auto opened = EventStore::open(path.str());
    ASSERT_TRUE(opened.ok()) << opened.error().to_string();
    EventStore& store = **opened;
    EXPECT_EQ(store.open_fault_counts(), OpenFaultCounts{});
    EXPECT_EQ(store.size(), 0);

    const int64_t f1 =
        *store.append(make_event(10, EventSeverity::kMajor, "a", EventKind::kFault, 3));
    ASSERT_TRUE(
        store.append(make_event(20, EventSeverity::kMajor, "a", EventKind::kFault, 3)).ok());
    const int64_t a1 =
        *store.append(make_event(30, EventSeverity::kCritical, "b", EventKind::kAlarm, 7));
    // Not counted: a log line, a scan summary, a fault stored acknowledged.
    ASSERT_TRUE(store.append(make_event(40, EventSeverity::kMajor, "c", EventKind::kLog, 3)).ok());
    ASSERT_TRUE(
        store.append(make_event(50, EventSeverity::kMinor, "c", EventKind::kScanSummary, 3)).ok());
    Event acked = make_event(60, EventSeverity::kMinor, "d", EventKind::kFault, 5);
    acked.acknowledged = true;
    acked.acknowledged_by = "ops";
    ASSERT_TRUE(store.append(acked).ok());
    // Counted by severity but not by chip: a fault about no chip.
    ASSERT_TRUE(store.append(make_event(70, EventSeverity::kInfo, "e", EventKind::kFault)).ok());

    OpenFaultCounts want;
    want.by_severity = {1, 0, 2, 1};
    want.by_chip = {{3, 2}, {7, 1}};
    EXPECT_EQ(store.open_fault_counts(), want);
    EXPECT_EQ(store.open_fault_counts(), counted_from_rows(store));
    EXPECT_EQ(store.open_faults_by_severity(), want.by_severity);
    EXPECT_EQ(store.size(), 7);
    EXPECT_EQ(store.open_fault_counts().total(), 4);

    // Acknowledging lowers the counts once; a second acknowledgement changes nothing.
    ASSERT_TRUE(store.acknowledge(f1, "ops", 100).ok());
    ASSERT_TRUE(store.acknowledge(f1, "ops", 101).ok());
    ASSERT_TRUE(store.acknowledge(a1, "ops", 102).ok());
    want.by_severity = {1, 0, 1, 0};
    want.by_chip = {{3, 1}};
    EXPECT_EQ(store.open_fault_counts(), want);
    EXPECT_EQ(store.open_fault_counts(), counted_from_rows(store));

    // Pruning takes the acknowledged f1 and a1, the log line, and the open fault at 20.
    auto pruned = store.prune_older_than(45);
    ASSERT_TRUE(pruned.ok()) << pruned.error().to_string();
    EXPECT_EQ(*pruned, 4);
    want.by_severity = {1, 0, 0, 0};
    want.by_chip = {};
    EXPECT_EQ(store.open_fault_counts(), want);
    EXPECT_EQ(store.open_fault_counts(), counted_from_rows(store));
    EXPECT_EQ(store.size(), 3);
    ASSERT_TRUE(
        store.append(make_event(80, EventSeverity::kMinor, "f", EventKind::kAlarm, 9)).ok());
  }
  // Reopened: the counts come back from the file.
  auto reopened = EventStore::open(path.str());
  ASSERT_TRUE(reopened.ok()) << reopened.error().to_string();
  OpenFaultCounts want;
  want.by_severity = {1, 1, 0, 0};
  want.by_chip = {{9, 1}};
  EXPECT_EQ((*reopened)->open_fault_counts(), want);
  EXPECT_EQ((*reopened)->open_fault_counts(), counted_from_rows(**reopened));
  EXPECT_EQ((*reopened)->size(), 4);
}

TEST(EventStore, AppendAllIsOneTransactionAndCounts) {
  auto store = open_memory();
  std::vector<Event> events;
  for (int i = 0; i < 100; ++i)
    events.push_back(make_event(i, static_cast<EventSeverity>(i % 4), "x",
                                i % 2 ? EventKind::kFault : EventKind::kAlarm, i % 10));
  auto last = store->append_all(events);
  ASSERT_TRUE(last.ok()) << last.error().to_string();
  EXPECT_EQ(*last, 100);
  EXPECT_EQ(store->size(), 100);
  EXPECT_EQ(*store->count(EventQuery{}), 100);
  EXPECT_EQ(store->open_fault_counts(), counted_from_rows(*store));
  EXPECT_EQ(store->open_fault_counts().total(), 100);
  EXPECT_EQ(store->open_fault_counts().by_chip.at(4), 10);

  // One invalid event: none is stored, the counts do not move.
  events.back().port = -5;
  auto bad = store->append_all(events);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("port = -5"), std::string::npos);
  EXPECT_EQ(*store->count(EventQuery{}), 100);
  EXPECT_EQ(store->size(), 100);
  EXPECT_EQ(store->open_fault_counts().total(), 100);
  EXPECT_EQ(*store->append_all({}), 0);
}

// More events than one prune batch: every one goes, and the counts with them.
TEST(EventStore, PruneOverManyBatchesKeepsCountsRight) {
  auto store = open_memory();
  std::vector<Event> events;
  for (int i = 0; i < 25000; ++i)
    events.push_back(make_event(i, static_cast<EventSeverity>(i % 4), "x",
                                i % 3 ? EventKind::kFault : EventKind::kLog, i % 50));
  ASSERT_TRUE(store->append_all(events).ok());
  auto pruned = store->prune_older_than(22000);
  ASSERT_TRUE(pruned.ok()) << pruned.error().to_string();
  EXPECT_EQ(*pruned, 22000);
  EXPECT_EQ(store->size(), 3000);
  EXPECT_EQ(*store->count(EventQuery{}), 3000);
  EXPECT_EQ(store->open_fault_counts(), counted_from_rows(*store));
  EXPECT_EQ(store->open_fault_counts().total(), 2000);
  EXPECT_EQ(*store->prune_older_than(22000), 0);
}

TEST(EventStore, RetentionParsesDurationsAndRefusesTheRest) {
  EXPECT_EQ(*parse_retention("none"), 0);
  EXPECT_EQ(*parse_retention("0"), 0);
  EXPECT_EQ(*parse_retention("0s"), 0);
  EXPECT_EQ(*parse_retention("3600s"), 3600);
  EXPECT_EQ(*parse_retention("3600"), 3600);
  EXPECT_EQ(*parse_retention("90m"), 5400);
  EXPECT_EQ(*parse_retention("12h"), 43200);
  EXPECT_EQ(*parse_retention("30d"), 30 * 86400);
  EXPECT_EQ(*parse_retention("1.5h"), 5400);
  EXPECT_EQ(*parse_retention("36500d"), kMaxRetentionS);
  for (const char* bad : {"", "d", "30x", "30 d", "thirty", "inf", "nan", "1e300", "30dd", "+5s",
                          "none ", "12h30m"}) {
    auto r = parse_retention(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << bad;
    EXPECT_EQ(r.error().id, 8080) << bad;
    EXPECT_NE(r.error().message.find("--retention"), std::string::npos) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << bad;
  }
  for (const char* bad : {"-1d", "0.5s", "36501d", "99999999999999999999d"}) {
    auto r = parse_retention(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Code::kOutOfRange) << bad;
    EXPECT_EQ(r.error().id, 8081) << bad;
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << bad;
  }
}

TEST(EventStore, ValidationNamesFieldAndValue) {
  auto store = open_memory();
  Event e = make_event(1, EventSeverity::kInfo, std::string(257, 'L'));
  auto r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_NE(r.error().message.find("location"), std::string::npos);
  EXPECT_NE(r.error().message.find("257"), std::string::npos);

  e = make_event(1, EventSeverity::kInfo, std::string(256, 'L'));  // at the limit: accepted
  EXPECT_TRUE(store->append(e).ok());

  e.cause = std::string(300, 'c');
  r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cause"), std::string::npos);
  EXPECT_NE(r.error().message.find("300"), std::string::npos);

  e = make_event(1, EventSeverity::kInfo, "x");
  e.detail = std::string(64 * 1024 + 1, 'd');
  r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("detail"), std::string::npos);
  EXPECT_NE(r.error().message.find("65537"), std::string::npos);

  e = make_event(1, static_cast<EventSeverity>(9), "x");
  r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("severity = 9"), std::string::npos);

  e = make_event(1, EventSeverity::kInfo, "x", static_cast<EventKind>(7));
  r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("kind = 7"), std::string::npos);

  e = make_event(1, EventSeverity::kInfo, "x");
  e.port = -5;
  r = store->append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("port = -5"), std::string::npos);

  EXPECT_EQ(*store->count(EventQuery{}), 1);  // only the valid event was stored
}

// The daemon-restart acceptance item: events and acknowledgements survive close and reopen.
TEST(EventStore, PersistsAcrossReopenInWalMode) {
  TempDbPath path;
  int64_t id = 0;
  {
    auto store = EventStore::open(path.str());
    ASSERT_TRUE(store.ok()) << store.error().to_string();
    EXPECT_EQ((*store)->path(), path.str());
    Event e = make_event(42, EventSeverity::kCritical, "cabinet 1 / nrc 3 port 2");
    e.detail = "restart me";
    id = *(*store)->append(e);
    ASSERT_TRUE((*store)->acknowledge(id, "carol", 43).ok());
    EXPECT_TRUE(fs::exists(path.str() + "-wal"));

    // Another connection sees the file's journal mode as WAL.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path.str().c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  auto reopened = EventStore::open(path.str());
  ASSERT_TRUE(reopened.ok()) << reopened.error().to_string();
  auto got = (*reopened)->query(EventQuery{});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().id, id);
  EXPECT_EQ(got->front().severity, EventSeverity::kCritical);
  EXPECT_EQ(got->front().detail, "restart me");
  EXPECT_EQ(got->front().acknowledged_by, "carol");
  // Ids keep growing after a restart.
  auto next = (*reopened)->append(make_event(50, EventSeverity::kInfo, "x"));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, id);
}

TEST(EventStore, NonDatabaseFileIsRefusedNamingThePath) {
  TempDbPath path;
  {
    std::ofstream out(path.str(), std::ios::binary);
    for (int i = 0; i < 256; ++i) out << "this is not an SQLite database, just garbage bytes\n";
  }
  auto store = EventStore::open(path.str());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find(path.str()), std::string::npos);
  EXPECT_NE(store.error().message.find("not a"), std::string::npos);
}

TEST(EventStore, NewerSchemaVersionIsRefused) {
  TempDbPath path;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.str().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 2", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = EventStore::open(path.str());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, Code::kUnsupported);
  EXPECT_NE(store.error().message.find("schema version 2"), std::string::npos);
  EXPECT_NE(store.error().message.find(path.str()), std::string::npos);
}

TEST(EventStore, UnopenablePathIsAnError) {
  auto store = EventStore::open("/nonexistent-galaxy-dir/sub/events.db");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("/nonexistent-galaxy-dir/sub/events.db"), std::string::npos);
}

}  // namespace
}  // namespace galaxy::nmd
