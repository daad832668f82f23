// The fault path under lost reports and overlapping faults (nm/fault_ledger.h): a link change
// whose reports are all lost is found by the audit of the chips' report counts, or proved by the
// next report of the link; a storm of flaps is recorded exactly once per change, streamed and
// alarmed; a re-route that fails raises an alarm and is retried until it succeeds.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "chip/registers.h"
#include "nmd_fixture.h"

namespace galaxy::nmd::api_test {
namespace {

using namespace std::chrono_literals;

// A switch-to-switch link whose far end (b) sends its fault reports out of that very link, so
// a report of the link going down leaves by the dead link and is lost.
struct LostLink {
  uint32_t a = 0, b = 0;
  uint8_t a_port = 0, b_port = 0;
};

std::optional<LostLink> find_lost_link(Daemon& d) {
  return d.with_session([](Session& s) -> std::optional<LostLink> {
    const nm::FabricMap& map = s.discovery.map;
    const fabric::Topology& plan = s.plan();
    for (uint32_t v = 0; v < plan.num_nodes(); ++v) {
      if (plan.is_nic(v)) continue;
      auto node = map.node_of.find(static_cast<uint16_t>(v));
      if (node == map.node_of.end()) continue;
      const wire::SourceRoute& back = map.target[node->second].backward;
      if (back.hop_num == 0) continue;
      auto peer = plan.peer({v, back.hops[0]});
      if (!peer || plan.is_nic(peer->node)) continue;
      return LostLink{peer->node, v, peer->port, back.hops[0]};
    }
    return std::nullopt;
  });
}

// Link events (faults) at either end of the link since event `after`: (downs, ups, inferred).
struct Tally {
  int downs = 0, ups = 0, inferred = 0;
  std::string detail_of_first_inferred;
};
Tally tally(Daemon& d, const LostLink& l, int64_t after) {
  Tally t;
  auto events = d.events().query(EventQuery{
      .kind = EventKind::kFault, .limit = 100000, .newest_first = false, .after_id = after});
  if (!events.ok()) return t;
  for (const Event& e : *events) {
    const bool here =
        (e.chip == l.a && e.port == l.a_port) || (e.chip == l.b && e.port == l.b_port);
    if (!here) continue;
    t.downs += e.cause == "link_down";
    t.ups += e.cause == "link_up";
    if (e.detail.find("\"inferred\":true") != std::string::npos) {
      if (t.inferred++ == 0) t.detail_of_first_inferred = e.detail;
    }
  }
  return t;
}

std::unique_ptr<NmdInstance> start(double audit_s) {
  DaemonOptions o = NmdInstance::default_options();
  o.scan_interval_s = 60;  // the scan at start tells the ledger every link's state
  o.fault_audit_s = audit_s;
  auto n = std::make_unique<NmdInstance>(o);
  EXPECT_TRUE(n->ok()) << n->error();
  // The scan at start has run once the status counts it.
  EXPECT_TRUE(wait_until([&] { return n->get("/api/status").json["scan"]["count"] >= 1; }, 5s));
  return n;
}

Reply inject(const NmdInstance& nmd, const char* action, uint32_t chip, uint8_t port) {
  return nmd.post("/api/inject",
                  {{"action", action}, {"chip", std::to_string(chip)}, {"port", port}});
}

// Takes down a link no report of which arrives: the near end reports nothing (FAULT_ENABLE 0),
// the far end's report leaves through the dead link. `before`: the newest event before.
void take_down_unheard(NmdInstance& nmd, LostLink& l, int64_t& before) {
  auto found = find_lost_link(nmd.daemon());
  ASSERT_TRUE(found.has_value());
  l = *found;
  ASSERT_EQ(nmd.put("/api/chips/" + std::to_string(l.a) + "/registers/FAULT_ENABLE", {{"value", 0}})
                .status,
            200);
  before = nmd.daemon().wait_for_event(INT64_MAX, 0);
  ASSERT_EQ(inject(nmd, "link-down", l.a, l.a_port).status, 200);
}

TEST(NmdFaultPath, ALinkDownWhoseReportsAreAllLostIsFoundByTheAudit) {
  auto nmd = start(0.3);
  ASSERT_TRUE(nmd->ok());
  LostLink lost;
  int64_t before = 0;
  ASSERT_NO_FATAL_FAILURE(take_down_unheard(*nmd, lost, before));
  const LostLink* l = &lost;
  ASSERT_TRUE(wait_until([&] { return tally(nmd->daemon(), *l, before).downs == 1; }, 5s))
      << "the audit did not find the lost link-down; " << nmd->get("/api/log?limit=15").body;
  Tally t = tally(nmd->daemon(), *l, before);
  EXPECT_EQ(t.inferred, 1);
  // The chip's report count was ahead: it was checked, and (its route crossing the dead link)
  // did not answer, so a discovery sweep found the link down.
  EXPECT_NE(t.detail_of_first_inferred.find("\"found_by\":\"discovery\""), std::string::npos)
      << t.detail_of_first_inferred;
  // The counters are published when the sweep that found it ends.
  EXPECT_TRUE(wait_until([&] {
    const Reply status = nmd->get("/api/status");
    return status.json["fault_ledger"]["audits"] >= 1 &&
           status.json["fault_ledger"]["changes_inferred"] >= 1;
  })) << nmd->get("/api/status").body;
  // The alarm follows as for a reported link-down.
  EXPECT_TRUE(wait_until([&] {
    const Reply faults = nmd->get("/api/faults");
    for (const auto& e : faults.json["faults"])
      if (e["kind"] == "alarm" && e["cause"] == "link down") return true;
    return false;
  }));
  // The link comes back: the far end's report now arrives and is recorded as reported.
  ASSERT_EQ(inject(*nmd, "link-up", l->a, l->a_port).status, 200);
  ASSERT_TRUE(wait_until([&] { return tally(nmd->daemon(), *l, before).ups == 1; }, 5s));
  std::this_thread::sleep_for(700ms);  // two more audits: nothing else to find
  t = tally(nmd->daemon(), *l, before);
  EXPECT_EQ(t.downs, 1);
  EXPECT_EQ(t.ups, 1);
  EXPECT_EQ(t.inferred, 1);
}

TEST(NmdFaultPath, ALostLinkDownIsProvedByTheNextReportOfTheLink) {
  auto nmd = start(0);  // no audit: only the next report can tell
  ASSERT_TRUE(nmd->ok());
  LostLink lost;
  int64_t before = 0;
  ASSERT_NO_FATAL_FAILURE(take_down_unheard(*nmd, lost, before));
  const LostLink* l = &lost;
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(tally(nmd->daemon(), *l, before).downs, 0) << "the reports were not lost after all";
  ASSERT_EQ(inject(*nmd, "link-up", l->a, l->a_port).status, 200);
  ASSERT_TRUE(wait_until([&] { return tally(nmd->daemon(), *l, before).ups == 1; }, 5s));
  Tally t = tally(nmd->daemon(), *l, before);
  EXPECT_EQ(t.downs, 1) << "the link-up's training number proves the link went down";
  EXPECT_EQ(t.inferred, 1);
  EXPECT_NE(t.detail_of_first_inferred.find("a later report"), std::string::npos)
      << t.detail_of_first_inferred;
}

TEST(NmdFaultPath, AStormOfFlapsIsRecordedExactlyOnceStreamedAndCleared) {
  auto nmd = start(0.3);
  ASSERT_TRUE(nmd->ok());
  Daemon& d = nmd->daemon();
  // Every switch-to-switch link, flapped in turn, 5 ms between changes.
  std::vector<LostLink> links;
  {
    auto v = d.view();
    for (uint32_t c = 0; c < v->chips.size(); ++c)
      for (uint8_t p = 0; p < v->chips[c].ports; ++p) {
        const PortView& pv = v->port(c, p);
        if (v->chips[c].kind == fabric::NodeKind::kNrc && pv.peer != fabric::kNoNode &&
            pv.peer > c && v->chips[pv.peer].kind == fabric::NodeKind::kNrc)
          links.push_back({c, pv.peer, p, pv.peer_port});
      }
  }
  ASSERT_GE(links.size(), 8u);
  const int64_t before = d.wait_for_event(INT64_MAX, 0);
  SseReader sse(*nmd, {{"Last-Event-ID", std::to_string(before)}});
  constexpr int kFlaps = 60;
  std::map<size_t, int> flaps;
  for (int i = 0; i < kFlaps; ++i) {
    const size_t k = static_cast<size_t>(i) % links.size();
    ASSERT_EQ(inject(*nmd, "link-down", links[k].a, links[k].a_port).status, 200);
    std::this_thread::sleep_for(5ms);
    ASSERT_EQ(inject(*nmd, "link-up", links[k].a, links[k].a_port).status, 200);
    std::this_thread::sleep_for(5ms);
    ++flaps[k];
  }
  // Settled: every change recorded (the audit finds what the reports did not tell).
  auto all_recorded = [&] {
    for (auto [k, n] : flaps) {
      Tally t = tally(d, links[k], before);
      if (t.downs < n || t.ups < n) return false;
    }
    return true;
  };
  ASSERT_TRUE(wait_until(all_recorded, 10s));
  std::this_thread::sleep_for(1s);  // anything recorded twice would show by now
  int64_t faults = 0;
  for (auto [k, n] : flaps) {
    Tally t = tally(d, links[k], before);
    EXPECT_EQ(t.downs, n) << "link " << k;
    EXPECT_EQ(t.ups, n) << "link " << k;
    faults += t.downs + t.ups;
  }
  EXPECT_EQ(faults, 2 * kFlaps);
  // The stream sent every fault the store holds.
  ASSERT_TRUE(wait_until(
      [&] {
        int64_t streamed = 0;
        for (const auto& f : sse.frames()) streamed += f.event == "fault";
        return streamed == faults;
      },
      5s))
      << sse.text().size();
  // The view ends with no link down (the link-ups bring a sweep that finds them).
  EXPECT_TRUE(wait_until([&] { return nmd->get("/api/status").json["links_down"] == 0; }, 10s));
  sse.close();
}

TEST(NmdFaultPath, AFailedRerouteRaisesAnAlarmAndIsRetriedUntilItSucceeds) {
  auto nmd = start(0);
  ASSERT_TRUE(nmd->ok());
  Daemon& d = nmd->daemon();
  auto l = find_lost_link(d);
  ASSERT_TRUE(l.has_value());
  // Every switch refuses writes without its key: the re-route's table writes are refused.
  auto protect = [&](uint64_t level) {
    d.with_session([&](Session& s) {
      for (uint32_t v = 0; v < s.plan().num_nodes(); ++v)
        if (!s.plan().is_nic(v)) {
          s.fabric->chip(v).write_register(chip::reg::kMKey, 0x5eed);
          s.fabric->chip(v).write_register(chip::reg::kChipCtrl, level);
        }
      return 0;
    });
  };
  protect(1);
  const int64_t before = d.wait_for_event(INT64_MAX, 0);
  ASSERT_EQ(inject(*nmd, "link-down", l->b, l->b_port).status, 200);
  auto count = [&](EventKind kind, const std::string& cause, const std::string& text = "") {
    int n = 0;
    auto events = d.events().query(EventQuery{.kind = kind, .limit = 10000, .after_id = before});
    if (events.ok())
      for (const Event& e : *events)
        n += e.cause == cause && e.detail.find(text) != std::string::npos;
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return count(EventKind::kAlarm, "re-route failed") >= 1; }, 5s));
  EXPECT_EQ(count(EventKind::kLog, "re-routed"), 0);
  protect(0);
  ASSERT_TRUE(
      wait_until([&] { return count(EventKind::kLog, "re-routed", "failed attempts") == 1; }, 10s))
      << "the re-route was not retried to success";
  EXPECT_GE(nmd->get("/api/status").json["fault_ledger"]["reroute_failures"], 1);
}

}  // namespace
}  // namespace galaxy::nmd::api_test
