// The event store under a pile of open faults, through the API dispatch (docs/api.md "Faults,
// events, log"): the unacknowledged counts by severity and by chip kept as events are written,
// acknowledged and pruned, correct after a restart, and the status fast with a million of them;
// retention (`galaxy nmd --retention`).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>

#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd_fixture.h"

namespace galaxy::nmd {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using api_test::TempDb;

DaemonOptions options(const std::string& db) {
  DaemonOptions o;
  o.session.fabric = "sim:fattree:k=4";  // 36 chips
  o.db_path = db;
  o.scan_interval_s = 0;
  o.sweep_interval_s = 0;
  o.tick_ms = 5;
  return o;
}

ApiResult call(Daemon& d, const std::string& method, const std::string& path,
               std::map<std::string, std::string> query = {}) {
  ApiCall c;
  c.method = method;
  c.path = path;
  c.query = std::move(query);
  return dispatch(d, c);
}

// The per-chip open fault counts as the chip list shows them (the console's badges).
int64_t chip_faults_sum(Daemon& d) {
  ApiResult r = call(d, "GET", "/api/chips", {{"limit", "10000"}});
  EXPECT_EQ(r.status, 200) << r.body.dump();
  int64_t sum = 0;
  for (const auto& c : r.body["chips"]) sum += c.at("faults").get<int64_t>();
  return sum;
}

int64_t unacknowledged_total(const nlohmann::json& status) {
  int64_t sum = 0;
  for (const char* s : {"info", "minor", "major", "critical"})
    sum += status["unacknowledged"][s].get<int64_t>();
  return sum;
}

constexpr int kChips = 36;

// A million unacknowledged faults and alarms, written by an earlier run of the daemon: the
// restarted daemon counts every one of them, per severity and per chip, and answers the status
// in under 5 ms.
TEST(EventCounts, MillionOpenFaultsStatusStaysFastAndCountsRight) {
  constexpr int kEvents = 1000000;
  TempDb db;
  const int64_t now = wall_us();
  {
    // The store makes the schema; the rows are written by SQLite itself, which is the quickest
    // way to a million (about twice as fast as binding each one).
    ASSERT_TRUE(EventStore::open(db.path()).ok());
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db.path().c_str(), &raw), SQLITE_OK);
    std::unique_ptr<sqlite3, int (*)(sqlite3*)> handle(raw, sqlite3_close);
    // Row i (1-based): alarm when i is odd, else fault; severity (i - 1) % 4; chip (i - 1) % 36.
    const std::string sql = fmt::format(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {0}) "
        "INSERT INTO events (time_us, kind, severity, location, chip, port, cause, detail) "
        "SELECT {1} - {0} + i, CASE i % 2 WHEN 1 THEN {2} ELSE {3} END, (i - 1) % 4, "
        "'chip ' || ((i - 1) % {4}), (i - 1) % {4}, i % 8, 'link_down', '' FROM n",
        kEvents, now, static_cast<int>(EventKind::kAlarm), static_cast<int>(EventKind::kFault),
        kChips);
    const auto t0 = Clock::now();
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
    std::printf("%d events written: %.0f ms\n", kEvents, ms_since(t0));
  }
  const auto t0 = Clock::now();
  auto d = Daemon::create(options(db.path()));
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  std::printf("daemon start on them (counts read once): %.0f ms\n", ms_since(t0));
  Daemon& daemon = **d;

  std::vector<double> ms;
  nlohmann::json status;
  for (int i = 0; i < 21; ++i) {
    const auto t = Clock::now();
    ApiResult r = call(daemon, "GET", "/api/status");
    ms.push_back(ms_since(t));
    ASSERT_EQ(r.status, 200) << r.body.dump();
    status = std::move(r.body);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("GET /api/status with %d open faults: median %.3f ms, max %.3f ms\n", kEvents, median,
              ms.back());
  EXPECT_LT(median, 5.0);
  for (const char* s : {"info", "minor", "major", "critical"})
    EXPECT_EQ(status["unacknowledged"][s], kEvents / 4) << s;
  EXPECT_EQ(chip_faults_sum(daemon), kEvents);

  // One acknowledgement: every count drops by exactly one, at once.
  ApiResult ack = call(daemon, "POST", "/api/faults/1/ack");
  ASSERT_EQ(ack.status, 200) << ack.body.dump();
  EXPECT_EQ(ack.body["acknowledged"], true);
  status = call(daemon, "GET", "/api/status").body;
  EXPECT_EQ(status["unacknowledged"]["info"], kEvents / 4 - 1);  // event 1: alarm, info, chip 0
  EXPECT_EQ(unacknowledged_total(status), kEvents - 1);
  EXPECT_EQ(chip_faults_sum(daemon), kEvents - 1);
  ApiResult chip0 = call(daemon, "GET", "/api/chips/0");
  ASSERT_EQ(chip0.status, 200) << chip0.body.dump();
  EXPECT_EQ(chip0.body["faults"], (kEvents + kChips - 1) / kChips - 1);

  // The other readers of the pile stay quick too (not asserted: they read a page of rows).
  for (const char* path :
       {"/api/faults", "/api/log", "/api/scans", "/api/topology", "/api/chips/5"}) {
    const auto t = Clock::now();
    EXPECT_EQ(call(daemon, "GET", path).status, 200) << path;
    std::printf("GET %s: %.3f ms\n", path, ms_since(t));
  }
  ApiResult log = call(daemon, "GET", "/api/log", {{"limit", "1"}});
  EXPECT_GE(log.body["total"].get<int64_t>(), kEvents);
}

TEST(EventCounts, RetentionPrunesOldEventsAndTheCountsFollow) {
  DaemonOptions o = options(":memory:");
  o.retention_s = 3600;
  auto d = Daemon::create(o);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  Daemon& daemon = **d;
  const int64_t now = wall_us();
  std::vector<Event> events;
  for (int i = 0; i < 1500; ++i) {
    Event e;
    const bool old = i < 1000;
    e.time_us = old ? now - 7200 * int64_t{1000000} + i : now + i;
    e.kind = EventKind::kFault;
    e.severity = old ? EventSeverity::kCritical : EventSeverity::kMinor;
    e.chip = old ? 1 : 2;
    e.cause = "link_down";
    events.push_back(e);
  }
  ASSERT_TRUE(daemon.events().append_all(events).ok());
  daemon.refresh_fault_counts();
  EXPECT_EQ(chip_faults_sum(daemon), 1500);

  daemon.start();  // the loop prunes at once, then every 60 s
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline &&
         *daemon.events().count(EventQuery{.until_us = now - 3600 * int64_t{1000000}}) > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(*daemon.events().count(EventQuery{.until_us = now - 3600 * int64_t{1000000}}), 0);
  // The view's per-chip counts are refreshed right after the prune.
  const auto view_deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < view_deadline && chip_faults_sum(daemon) != 500)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  daemon.stop();

  const nlohmann::json status = call(daemon, "GET", "/api/status").body;
  EXPECT_EQ(status["unacknowledged"]["critical"], 0);
  EXPECT_EQ(status["unacknowledged"]["minor"], 500);
  EXPECT_EQ(chip_faults_sum(daemon), 500);
  auto pruned = daemon.events().query(EventQuery{.kind = EventKind::kLog});
  ASSERT_TRUE(pruned.ok());
  bool logged = false;
  for (const Event& e : *pruned)
    if (e.cause == "events pruned" && e.detail.find("1000 events") != std::string::npos)
      logged = true;
  EXPECT_TRUE(logged) << "a log event says how many events were pruned";
}

TEST(EventCounts, DaemonRefusesAnUnusableRetention) {
  for (double bad : {-1.0, 0.5, std::nan(""), std::numeric_limits<double>::infinity(), 1e300}) {
    DaemonOptions o = options(":memory:");
    o.retention_s = bad;
    auto d = Daemon::create(o);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.error().id, 8082) << bad;
    EXPECT_NE(d.error().message.find("retention"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace galaxy::nmd
