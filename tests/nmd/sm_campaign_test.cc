// The SM fault campaign (nmd/sm_campaign.h) on a small fabric: three management servers, the
// master killed in the middle of a sweep while a link is down, links flapped and a chip killed.
// The campaign's own checks must hold (one master at a time, every change re-routed around in
// the held tables, nothing lost from the fault history), and they must be able to fail: with a
// master that never re-routes, the campaign says so.
#include "nmd/sm_campaign.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace galaxy::nmd {
namespace {

class SmCampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("galaxy-smc-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SmCampaignOptions small() const {
    SmCampaignOptions o;
    o.fabric = "sim:fattree:k=4,levels=3";
    o.flaps = 3;
    o.chip_kills = 1;
    o.leaderless_downs = 1;
    o.sm_poll_s = 1;
    o.sm_poll_retries = 3;
    o.path_samples = 16;
    o.db_path = (dir_ / "events.db").string();
    return o;
  }

  std::filesystem::path dir_;
};

TEST_F(SmCampaignTest, ThreeServersThroughKillsAndFlapsKeepOneMasterAndEveryFault) {
  auto r = run_sm_campaign(small());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const nlohmann::json& j = *r;
  EXPECT_TRUE(j["passed"].get<bool>()) << j.dump(2);
  EXPECT_EQ(j["masters"]["max_at_once"], 1);
  EXPECT_GT(j["masters"]["observations"].get<uint64_t>(), 1000u);
  // Bring-up: the first server (highest priority) master, the others standby.
  ASSERT_EQ(j["bringup"].size(), 3u);
  EXPECT_EQ(j["bringup"][0]["role"], "master");
  EXPECT_EQ(j["bringup"][1]["role"], "standby");
  EXPECT_EQ(j["bringup"][2]["role"], "standby");
  // The master was killed inside its sweep; its named successor (the next priority) took over
  // after the polls it may miss: between (retries - 1) and retries intervals, and at most the
  // other standby's two unanswered polls (200 ms each) more, since the servers take turns.
  const nlohmann::json& f = j["failover"];
  EXPECT_LT(f["killed_into_sweep_ms"].get<double>(), f["sweep_sim_ms"].get<double>());
  EXPECT_EQ(f["new_master"], 1);
  EXPECT_GE(f["time_to_new_master_ms"].get<double>(), 2 * 1000.0);
  EXPECT_LE(f["time_to_new_master_ms"].get<double>(), 3 * 1000.0 + 2 * 200 + 50);
  EXPECT_GE(f["time_to_reroute_ms"].get<double>(), 0.0);
  // One leaderless down and its up, two more flaps, one chip: seven changes, all re-routed; the
  // link-down made while nobody was master is in the history all the same.
  EXPECT_EQ(j["changes"]["count"], 7);
  EXPECT_EQ(j["changes"]["not_rerouted"], 0);
  EXPECT_EQ(j["history"]["lost"], 0);
  EXPECT_GE(j["history"]["changes_expected"].get<int>(), 7);
  for (const char* kind : {"link_down", "link_up", "chip_kill"})
    EXPECT_TRUE(j["time_to_reroute_ms"].contains(kind)) << kind;
  for (const auto& p : j["paths"]) EXPECT_EQ(p["failed"], 0) << p.dump();
}

TEST_F(SmCampaignTest, AMasterThatNeverReroutesFailsTheCampaign) {
  SmCampaignOptions o = small();
  o.routing_engine = "none";  // the servers leave the tables as they are
  o.sm_poll_s = 0.2;
  o.flaps = 1;
  o.leaderless_downs = 0;
  o.chip_kills = 0;
  o.change_limit_s = 0.5;
  auto r = run_sm_campaign(o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE((*r)["passed"].get<bool>());
  EXPECT_GT((*r)["changes"]["not_rerouted"].get<int>(), 0);
  bool named = false;
  for (const auto& p : (*r)["problems"])
    named = named || p.get<std::string>().find("not re-routed") != std::string::npos;
  EXPECT_TRUE(named) << r->dump(2);
}

TEST_F(SmCampaignTest, BadOptionsAreRefusedByName) {
  SmCampaignOptions o = small();
  o.servers = 1;
  auto r = run_sm_campaign(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, 8414);
  EXPECT_NE(r.error().message.find("servers = 1"), std::string::npos);
  o = small();
  o.leaderless_downs = 5;
  r = run_sm_campaign(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, 8415);
  o = small();
  o.fabric = "sim:nosuchtopology";
  EXPECT_FALSE(run_sm_campaign(o).ok());
}

}  // namespace
}  // namespace galaxy::nmd
