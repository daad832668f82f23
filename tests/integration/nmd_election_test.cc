// Three `galaxy nmd` servers on one live fabric (two hosts, forked fabric daemons, UDP links on
// loopback), sharing one event store: one master, two standbys that know it; a standby refuses
// to route; the master's death makes its named successor master within the polls it may miss,
// the other standby follows it, and the fault history runs on in the shared store (a link-down
// the old master recorded is not recorded again, one after the takeover is).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "chip/registers.h"
#include "live_fixture.h"
#include "nmd/daemon.h"

namespace galaxy {
namespace {

using Clock = std::chrono::steady_clock;

class NmdElection : public ::testing::Test {
 protected:
  void SetUp() override {
    live_ = std::make_unique<live::testing::LiveFabricUnderTest>(2, "fattree:k=4,levels=2");
    ASSERT_TRUE(live_->wait_up()) << "live daemons did not come up";
    db_ = std::filesystem::temp_directory_path() /
          ("galaxy-election-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(db_);
  }
  void TearDown() override {
    for (auto& d : daemons_)
      if (d) d->stop();
    daemons_.clear();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db_.string() + suffix);
  }

  // A server at the NIC of index `nic` (on whichever host holds it) with `priority`.
  nmd::Daemon* add(uint32_t nic, unsigned priority) {
    const live::LiveFabric& f = live_->fabric();
    nmd::DaemonOptions o;
    o.session.fabric = live_->spec();
    o.session.server_nic = nic;
    o.session.host = f.hosts[static_cast<size_t>(f.host_of[f.topology.nic_node(nic)])].name;
    o.db_path = db_.string();
    o.scan_interval_s = 0;
    o.sweep_interval_s = 0;
    o.fault_audit_s = 0;
    o.tick_ms = 5;
    o.sm_priority = priority;
    o.sm_poll_s = 0.05;
    o.sm_poll_retries = 3;
    auto d = nmd::Daemon::create(o);
    EXPECT_TRUE(d.ok()) << d.error().to_string();
    if (!d.ok()) return nullptr;
    daemons_.push_back(std::move(*d));
    daemons_.back()->start();
    return daemons_.back().get();
  }

  unsigned masters() const {
    unsigned n = 0;
    for (const auto& d : daemons_)
      if (d) n += d->sm_json().value("state", "") == "master";
    return n;
  }

  // Waits (real time) until `done`, checking at every step that at most one server is master.
  template <class F>
  bool wait_for(F done, double seconds) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      EXPECT_LE(masters(), 1u);
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }

  // Takes a link of the fabric down (PORT_CTRL "force link down") through `d`'s session.
  static Status force_down(nmd::Daemon& d, uint32_t node, uint8_t port) {
    return d.with_session([&](nmd::Session& s) -> Status {
      auto it = s.discovery.map.node_of.find(static_cast<uint16_t>(node));
      if (it == s.discovery.map.node_of.end()) return make_error(Code::kNotFound, 1, "node");
      nm::MgmtReply r = nm::call(
          *s.requester,
          nm::MgmtRequest::write(s.discovery.map.target[it->second],
                                 chip::reg::port_register(port, chip::reg::port::kPortCtrl), 3));
      return r.status;
    });
  }

  int64_t link_downs(uint32_t chip) {
    nmd::EventQuery q;
    q.kind = nmd::EventKind::kFault;
    auto all = daemons_[1]->events().query(q);
    int64_t n = 0;
    if (all.ok())
      for (const nmd::Event& e : *all) n += e.chip == chip && e.cause == "link_down";
    return n;
  }

  std::unique_ptr<live::testing::LiveFabricUnderTest> live_;
  std::filesystem::path db_;
  std::vector<std::unique_ptr<nmd::Daemon>> daemons_;
};

TEST_F(NmdElection, OneMasterStandbysFailoverAndAContinuousFaultHistory) {
  const fabric::Topology& plan = live_->fabric().topology;
  const uint32_t nics = plan.num_nics();
  nmd::Daemon* a = add(0, 5);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->sm_json()["state"], "master");
  nmd::Daemon* b = add(nics - 1, 2);
  nmd::Daemon* c = add(nics / 2, 1);
  ASSERT_TRUE(b && c);
  for (nmd::Daemon* d : {b, c}) {
    const nlohmann::json j = d->sm_json();
    EXPECT_EQ(j["state"], "standby") << j.dump();
    EXPECT_EQ(j["master"]["guid"], a->sm_json()["guid"]) << j.dump();
  }
  // The master learns its standbys from their polls and names b (priority 2) its successor.
  ASSERT_TRUE(wait_for([&] { return a->sm_json()["standbys"].size() == 2; }, 10))
      << a->sm_json().dump();
  EXPECT_EQ(a->sm_json()["standbys"][0]["guid"], b->sm_json()["guid"]);
  ASSERT_TRUE(wait_for([&] { return b->sm_json().contains("successor"); }, 10));
  EXPECT_EQ(b->sm_json()["successor"]["guid"], b->sm_json()["guid"]);
  EXPECT_EQ(a->sm_json()["master"], nullptr);
  // Writes of the fabric are the master's.
  auto refused = b->route_now("minhop", "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 8411);
  EXPECT_NE(refused.error().message.find("master"), std::string::npos);

  // A link-down while a is master (a NIC's link, taken down at its NRC, whose way back to the
  // servers does not cross it): a records it once, in the shared store; the standbys follow.
  const auto nic_link = [&](uint32_t index) { return *plan.peer({plan.nic_node(index), 0}); };
  const fabric::PortRef first = nic_link(1), second = nic_link(2);
  const uint32_t nrc = first.node;
  ASSERT_TRUE(force_down(*a, first.node, first.port).ok());
  ASSERT_TRUE(wait_for([&] { return link_downs(nrc) >= 1; }, 10));

  // a dies. b, its successor, is master within its polls (3 x 50 ms, each poll up to 3 x
  // 200 ms of request retries) and the chips report to it; c follows b.
  const auto t0 = Clock::now();
  daemons_[0]->stop();
  daemons_[0].reset();
  ASSERT_TRUE(wait_for([&] { return b->sm_json()["state"] == "master"; }, 20))
      << b->sm_json().dump();
  const double failover_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("failover: b master %.2f s after a stopped\n", failover_s);
  EXPECT_EQ(b->sm_json()["counters"]["takeovers"], 1);
  ASSERT_TRUE(wait_for(
      [&] {
        return c->sm_json().value("master", nlohmann::json{}).value("guid", "") ==
               b->sm_json()["guid"];
      },
      20))
      << c->sm_json().dump();
  EXPECT_EQ(c->sm_json()["state"], "standby");
  EXPECT_TRUE(b->route_now("minhop", "test").ok());

  // The history runs on: the takeover recorded a's link-down no second time, and a link-down
  // now is b's to record.
  EXPECT_EQ(link_downs(nrc), 1);
  ASSERT_TRUE(force_down(*b, second.node, second.port).ok());
  ASSERT_TRUE(
      wait_for([&] { return link_downs(second.node) >= (second.node == nrc ? 2 : 1); }, 10));
  EXPECT_EQ(link_downs(nrc), second.node == nrc ? 2 : 1);
}

}  // namespace
}  // namespace galaxy
