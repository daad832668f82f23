// POST /api/inject from either end of a link (docs/api.md "Faults, events, log"): a link-down can
// cut a NIC off, and the link-up that undoes it names the same NIC, which discovery no longer
// sees; the scan and sweep intervals are refused when not finite or out of range, at start and
// through PUT /api/config.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "nmd_fixture.h"

namespace galaxy::nmd::api_test {
namespace {

using namespace std::chrono_literals;

// In the k = 4 fat tree, nic00015 (chip 29, nic:15) hangs on l1/sw00013 (chip 27) port 1 by its
// port 0, its only link.
constexpr int kNic = 29;
constexpr int kNicPort = 0;
constexpr int kSwitch = 27;
constexpr int kSwitchPort = 1;

Reply inject(const NmdInstance& nmd, const std::string& action, const std::string& chip, int port) {
  return nmd.post("/api/inject", {{"action", action}, {"chip", chip}, {"port", port}});
}

// Waits until the daemon has handled the loss of the NIC's link: the switch end reported it (the
// NIC cannot), the fabric was re-discovered without the NIC and re-routed around it.
bool wait_nic_cut_off(const NmdInstance& nmd, int64_t faults_before) {
  return wait_until(
      [&] {
        if (nmd.get("/api/status").json.value("faults_received", int64_t{0}) <= faults_before)
          return false;
        bool reported = false;
        const Reply faults = nmd.get("/api/faults");
        for (const auto& e : faults.json["faults"])
          reported |= is_critical_at(e, kSwitch, kSwitchPort);
        return reported && nmd.get("/api/routes").json["reachable_pairs"] == 210;
      },
      5s);
}

// Waits until a sweep finds the link back and the NIC answers in-band again.
bool wait_nic_back(const NmdInstance& nmd) {
  return wait_until(
      [&] {
        Reply sweep = nmd.post("/api/discover");
        if (sweep.status != 200) return false;
        Reply status = nmd.get("/api/status");
        return status.json["links_down"] == 0 && status.json["links"] == 48 &&
               nmd.get("/api/chips/nic:15/registers/SCRATCH").status == 200;
      },
      5s);
}

TEST_F(NmdApiTest, LinkUpThroughTheNicEndAfterALinkDownThroughIt) {
  ASSERT_EQ(get("/api/chips/nic:15/registers/SCRATCH").status, 200);
  int64_t faults = get("/api/status").json.value("faults_received", int64_t{0});
  Reply down = inject(*nmd_, "link-down", "nic:15", kNicPort);
  ASSERT_EQ(down.status, 200) << down.describe();
  ASSERT_TRUE(wait_nic_cut_off(*nmd_, faults)) << get("/api/faults").body;
  // The NIC is out of the map: in-band access to it fails.
  Reply lost = get("/api/chips/nic:15/registers/SCRATCH");
  EXPECT_TRUE(lost.status == 404 || lost.status == 502) << lost.describe();

  // Named as the link-down named it, the NIC's link comes back.
  Reply up = inject(*nmd_, "link-up", "nic:15", kNicPort);
  ASSERT_EQ(up.status, 200) << up.describe();
  EXPECT_TRUE(wait_nic_back(*nmd_)) << get("/api/status").body;

  // Both injections are logged at the NIC's port: nic:15 is chip 29.
  Reply log = get("/api/log?kind=log");
  int at_nic = 0;
  for (const auto& e : log.json["events"])
    if ((e["cause"] == "injected link-down" || e["cause"] == "injected link-up") &&
        e["chip"] == kNic && e["port"] == kNicPort)
      ++at_nic;
  EXPECT_EQ(at_nic, 2) << log.body;

  // Down from the switch end, up from the NIC end by its chip id (not discovered by then).
  faults = get("/api/status").json.value("faults_received", int64_t{0});
  Reply down2 = inject(*nmd_, "link-down", std::to_string(kSwitch), kSwitchPort);
  ASSERT_EQ(down2.status, 200) << down2.describe();
  ASSERT_TRUE(wait_nic_cut_off(*nmd_, faults)) << get("/api/faults").body;
  Reply up2 = inject(*nmd_, "link-up", std::to_string(kNic), kNicPort);
  ASSERT_EQ(up2.status, 200) << up2.describe();
  EXPECT_TRUE(wait_nic_back(*nmd_)) << get("/api/status").body;
}

TEST_F(NmdApiTest, InjectNamingAChipOutsideTheFabricOrAPortWithoutALinkIsRefused) {
  for (const auto& [chip, port, status] :
       {std::tuple{std::string("36"), 0, 404}, std::tuple{std::string("nic:16"), 0, 400},
        std::tuple{std::string("nic:15"), 1, 400}, std::tuple{std::string("nobody"), 0, 404}}) {
    Reply r = inject(*nmd_, "link-down", chip, port);
    EXPECT_EQ(r.status, status) << chip << ":" << port << ": " << r.describe();
    EXPECT_FALSE(r.error_id().empty()) << r.describe();
  }
  EXPECT_EQ(get("/api/status").json["links_down"], 0);
}

TEST(NmdIntervalsTest, NonFiniteOrOutOfRangeIntervalsAreRefusedAtStart) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, inf, -inf, 1e300, 86400.5, -1.0}) {
    for (bool scan : {true, false}) {
      DaemonOptions o = NmdInstance::default_options();
      (scan ? o.scan_interval_s : o.sweep_interval_s) = bad;
      auto d = Daemon::create(o);
      ASSERT_FALSE(d.ok()) << (scan ? "scan " : "sweep ") << bad;
      EXPECT_EQ(d.error().id, 8210);
      EXPECT_NE(d.error().message.find(scan ? "scan_interval_s" : "sweep_interval_s"),
                std::string::npos)
          << d.error().to_string();
    }
  }
}

TEST_F(NmdApiTest, ConfigPutRefusesIntervalsBeyondADouble) {
  const Json before = get("/api/config").json;
  for (const char* body : {R"({"scan_interval_s": 1e400})", R"({"sweep_interval_s": -1e400})",
                           R"({"scan_interval_s": NaN})", R"({"sweep_interval_s": Infinity})"}) {
    Reply r = nmd_->request("PUT", "/api/config", body, kToken);
    EXPECT_EQ(r.status, 400) << body << ": " << r.describe();
  }
  EXPECT_EQ(get("/api/config").json["scan_interval_s"], before["scan_interval_s"]);
  EXPECT_EQ(get("/api/config").json["sweep_interval_s"], before["sweep_interval_s"]);
}

}  // namespace
}  // namespace galaxy::nmd::api_test

namespace galaxy::nmd::api_test {

// POST /api/inject runs `galaxy inject`'s operation (nmd/inject.h): a chip's links all cut, and a
// fault code raised and latched in FAULT_STATUS; a bad code is refused by name.
TEST_F(NmdApiTest, InjectTakesAChipDownAndRaisesAFaultCodeAsTheCliDoes) {
  Reply bad =
      post("/api/inject", {{"action", "fault"}, {"chip", "3"}, {"port", 1}, {"code", "boil"}});
  EXPECT_EQ(bad.status, 400) << bad.describe();
  EXPECT_EQ(bad.error_id(), "E9234") << bad.describe();
  Reply fault =
      post("/api/inject",
           {{"action", "fault"}, {"chip", "3"}, {"port", 1}, {"code", "crc_error_burst"}});
  ASSERT_EQ(fault.status, 200) << fault.describe();
  EXPECT_EQ(fault.json["fault"], "crc_error_burst");
  EXPECT_TRUE(fault.json["links_changed"].empty());
  EXPECT_EQ(fault.json["fault_status"], "0x04") << "bit 2 latched, read back in band";
  Reply down = post("/api/inject", {{"action", "chip-down"}, {"chip", "0"}});
  ASSERT_EQ(down.status, 200) << down.describe();
  EXPECT_EQ(down.json["links_changed"].size(), 4u) << down.body;
  for (const Json& l : down.json["links_changed"]) EXPECT_EQ(l["after"], "down") << l.dump();
}

}  // namespace galaxy::nmd::api_test
