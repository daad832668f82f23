// The same management-daemon test over both back ends (UCX gtest / fabtests habit): a daemon on a
// simulated fabric and a daemon on a live fabric of two hosts (forked per-host daemons, UDP links
// on loopback) answer the same API requests with the same shape and the same facts — the
// topology found, a path trace, a register round trip, a scan, per-port metrics.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <thread>

#include "live_fixture.h"
#include "nmd/daemon.h"
#include "nmd/http_server.h"

namespace galaxy {
namespace {

constexpr const char* kTopology = "fattree:k=4,levels=2";  // 6 NRCs, 8 NICs, 16 links
constexpr const char* kToken = "backend-test-token";

class NmdBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    nmd::DaemonOptions o;
    if (GetParam() == "live") {
      live_ = std::make_unique<live::testing::LiveFabricUnderTest>(2, kTopology);
      ASSERT_TRUE(live_->wait_up()) << "live daemons did not come up";
      o.session.fabric = live_->spec();
      o.session.host = "h1";
    } else {
      o.session.fabric = std::string("sim:") + kTopology;
    }
    o.db_path = ":memory:";
    o.scan_interval_s = 0;
    o.sweep_interval_s = 0;
    o.tick_ms = 5;
    auto d = nmd::Daemon::create(o);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    daemon_ = std::move(*d);
    daemon_->start();
    nmd::HttpOptions h;
    h.port = 0;
    h.token = kToken;
    server_ = std::make_unique<nmd::HttpServer>(*daemon_, h);
    ASSERT_TRUE(server_->bind().ok());
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (daemon_) daemon_->stop();
  }

  nlohmann::json get(const std::string& path, int want = 200) {
    auto r = client_->Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  nlohmann::json send(const std::string& method, const std::string& path, const nlohmann::json& b,
                      int want = 200) {
    httplib::Headers auth{{"Authorization", std::string("Bearer ") + kToken}};
    auto r = method == "PUT" ? client_->Put(path, auth, b.dump(), "application/json")
                             : client_->Post(path, auth, b.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  std::unique_ptr<live::testing::LiveFabricUnderTest> live_;
  std::unique_ptr<nmd::Daemon> daemon_;
  std::unique_ptr<nmd::HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_P(NmdBackend, FindsTheFabricTracesReadsWritesAndScans) {
  nlohmann::json st = get("/api/status");
  EXPECT_EQ(st["kind"], GetParam());
  EXPECT_EQ(st["chips"], 14);
  EXPECT_EQ(st["nics"], 8);
  EXPECT_EQ(st["discovered"], 14);
  EXPECT_EQ(st["links"], 16);
  EXPECT_EQ(st["links_down"], 0);

  nlohmann::json routes = get("/api/routes");
  EXPECT_EQ(routes["loaded"], true);
  EXPECT_EQ(routes["reachable_pairs"], routes["nic_pairs"]);

  nlohmann::json tr = get("/api/trace?src=nic:0&dst=nic:7");
  ASSERT_TRUE(tr["reachable"].get<bool>()) << tr.dump();
  ASSERT_GE(tr["hops"].size(), 1u);
  for (const auto& h : tr["hops"]) EXPECT_TRUE(h.contains("location"));

  // A remote NRC: a register write is read back, through the fabric.
  nlohmann::json chips = get("/api/chips?kind=nrc&limit=100");
  std::string nrc;
  for (const auto& c : chips["chips"])
    if (c["hops"].get<int>() >= 1) nrc = std::to_string(c["chip"].get<int>());
  ASSERT_FALSE(nrc.empty());
  send("PUT", "/api/chips/" + nrc + "/registers/SCRATCH", {{"value", "0x5eed"}});
  nlohmann::json rd = get("/api/chips/" + nrc + "/registers/SCRATCH");
  EXPECT_EQ(rd["value"], 0x5eed);

  nlohmann::json scan = send("POST", "/api/scans", nlohmann::json::object());
  EXPECT_EQ(scan["chips"], 6);
  EXPECT_EQ(scan["non_responding"], 0);
  nlohmann::json one = get("/api/chips/" + nrc);
  size_t scanned = 0;
  for (const auto& p : one["ports"])
    if (p["scanned"].get<bool>()) ++scanned;
  EXPECT_GT(scanned, 0u);

  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("galaxy_port_tx_flits_total{chip="), std::string::npos);
  EXPECT_NE(m->body.find("galaxy_scan_duration_seconds_count 1"), std::string::npos);
}

TEST_P(NmdBackend, LinkFaultInjectionIsForSimulatedFabricsOnly) {
  nlohmann::json body{{"action", "link-down"}, {"chip", "0"}, {"port", 2}};
  if (GetParam() == "live") {
    nlohmann::json e = send("POST", "/api/inject", body, 409);
    EXPECT_EQ(e["error"]["id"], "E9016");
    EXPECT_EQ(get("/api/status")["links_down"], 0);
    return;
  }
  send("POST", "/api/inject", body);
  // The fault is recorded as it arrives; the fabric view counts the link once the region
  // around it has been discovered again, a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  nlohmann::json faults;
  int links_down = 0;
  do {
    faults = get("/api/faults?min_severity=critical&chip=0");
    links_down = get("/api/status")["links_down"].get<int>();
    if (!faults["faults"].empty() && links_down == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_FALSE(faults["faults"].empty()) << "no critical fault at chip 0 within 2 s";
  EXPECT_EQ(faults["faults"][0]["port"], 2);
  EXPECT_EQ(links_down, 1) << "the link is not counted down within 2 s";
}

// A flow-level background load (engine/sim/load.h) shows in the port counters the scans read,
// so the traffic heat map and the utilisation gauges carry it: 50% load reads as 0.5.
TEST(NmdSimLoad, BackgroundLoadShowsInTheTrafficHeatMap) {
  nmd::DaemonOptions o;
  o.session.fabric = std::string("sim:") + kTopology;
  o.session.load = "uniform:util=0.5";
  o.db_path = ":memory:";
  o.scan_interval_s = 0;
  o.sweep_interval_s = 0;
  auto d = nmd::Daemon::create(o);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  ASSERT_TRUE((*d)->scan_now().ok());
  (*d)->with_session([](nmd::Session& s) {
    s.requester->drain_faults(10 * nm::kMs);  // 10 ms of simulated time pass
    return 0;
  });
  auto second = (*d)->scan_now();
  ASSERT_TRUE(second.ok());
  EXPECT_GT((*second)["interval_s"].get<double>(), 0.009);
  auto cells = nmd::traffic_json(*(*d)->view(), "chip");
  ASSERT_TRUE(cells.ok());
  double max_util = 0;
  for (const auto& c : (*cells)["cells"])
    max_util = std::max(max_util, c["utilisation_max"].get<double>());
  EXPECT_NEAR(max_util, 0.5, 0.05);
  auto gauge = (*d)->metrics().find(nmd::kPortUtilisationRatio);
  ASSERT_NE(gauge, nullptr);
  EXPECT_GT(gauge->series_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(SimAndLive, NmdBackend, ::testing::Values("sim", "live"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galaxy
