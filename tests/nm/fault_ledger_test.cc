// The fault ledger: one recorded change per link change whichever end reports it, the changes a
// report or a read proves were missed, report sequence gaps, restarts.
#include "nm/fault_ledger.h"

#include <gtest/gtest.h>

#include "fabric/builders.h"

namespace galaxy::nm {
namespace {

// Two switches and their NICs: switch ports 2-3 of l1/sw00000 face l2 switches in a fat tree;
// a line is simpler: chip 0 port 1 <-> chip 1 port 0.
class FaultLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = fabric::build_topology("line:n=3");
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    plan_ = std::move(*t);
    // Find one NRC-to-NRC link and its two ends.
    for (uint32_t v = 0; v < plan_.num_nodes() && !found_; ++v)
      for (uint8_t p = 0; p < plan_.num_ports(v) && !found_; ++p)
        if (auto peer = plan_.peer({v, p}); peer && !plan_.is_nic(v) && !plan_.is_nic(peer->node)) {
          a_ = {v, p};
          b_ = *peer;
          found_ = true;
        }
    ASSERT_TRUE(found_);
  }
  fabric::Topology plan_;
  fabric::PortRef a_{}, b_{};
  bool found_ = false;
};

TEST_F(FaultLedgerTest, BothEndsReportingOneChangeRecordItOnce) {
  FaultLedger l(plan_);
  // The link trained once at power-on (handshakes 1); a read tells the ledger so.
  EXPECT_TRUE(l.observe(a_.node, a_.port, true, 1).empty());
  auto d = l.report(a_.node, a_.port, false, 1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].up);
  EXPECT_FALSE(d[0].inferred);
  EXPECT_TRUE(l.report(b_.node, b_.port, false, 1).empty()) << "the other end's report merges";
  EXPECT_EQ(l.merged(), 1u);
  EXPECT_EQ(l.believed_up(b_.node, b_.port), false);
  auto u = l.report(b_.node, b_.port, true, 2);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0].up);
  EXPECT_EQ(u[0].handshakes, 2u);
  EXPECT_TRUE(l.report(a_.node, a_.port, true, 2).empty());
  EXPECT_EQ(l.believed_up(a_.node, a_.port), true);
  EXPECT_EQ(l.inferred(), 0u);
}

TEST_F(FaultLedgerTest, AReportThatSkipsChangesRecordsThemAsInferred) {
  FaultLedger l(plan_);
  EXPECT_TRUE(l.observe(a_.node, a_.port, true, 1).empty());
  // Both reports of the down were lost; the up (training 2) proves it.
  auto u = l.report(b_.node, b_.port, true, 2);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_FALSE(u[0].up);
  EXPECT_TRUE(u[0].inferred);
  EXPECT_EQ(u[0].handshakes, 1u);
  EXPECT_TRUE(u[1].up);
  EXPECT_FALSE(u[1].inferred);
  // A whole flap lost, then a down: up(3)... down(3) proves down(2) and up(3).
  auto d = l.report(a_.node, a_.port, false, 3);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_FALSE(d[0].up);
  EXPECT_TRUE(d[1].up);
  EXPECT_FALSE(d[2].up);
  EXPECT_TRUE(d[0].inferred && d[1].inferred && !d[2].inferred);
  EXPECT_EQ(l.inferred(), 3u);
}

TEST_F(FaultLedgerTest, AReadFindsWhatNoReportToldAndTheFirstReadOnlySetsTheBaseline) {
  FaultLedger l(plan_);
  EXPECT_TRUE(l.observe(a_.node, a_.port, true, 5).empty()) << "history before the server";
  EXPECT_TRUE(l.observe(b_.node, b_.port, true, 5).empty());
  auto c = l.observe(b_.node, b_.port, false, 5);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].up);
  EXPECT_TRUE(c[0].inferred);
  // The delayed report of that change arrives after the read: merged, not recorded again.
  EXPECT_TRUE(l.report(a_.node, a_.port, false, 5).empty());
  // A chip restarted counts from 1 again: the state the read finds is what counts.
  auto r = l.observe(a_.node, a_.port, true, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].up);
  auto next = l.report(a_.node, a_.port, false, 1);
  ASSERT_EQ(next.size(), 1u) << "the new numbering is followed";
}

// A server's first discovery is all it knows of a link until a report or a read numbers it (a
// standby whose master recorded the changes): the sweep of a takeover that finds the link
// otherwise records one inferred change, and a later report numbers the link from then on.
TEST_F(FaultLedgerTest, ALinkKnownOnlyFromDiscoveryChangesWhenASweepFindsItOtherwise) {
  FaultLedger l(plan_);
  EXPECT_TRUE(l.observe_state(a_.node, a_.port, true).empty()) << "the first state is a baseline";
  EXPECT_EQ(l.believed_up(b_.node, b_.port), true);
  EXPECT_TRUE(l.observe_state(b_.node, b_.port, true).empty());
  auto d = l.observe_state(b_.node, b_.port, false);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].up);
  EXPECT_TRUE(d[0].inferred);
  EXPECT_EQ(l.inferred(), 1u);
  EXPECT_TRUE(l.observe_state(a_.node, a_.port, false).empty()) << "known already";
  // A read that finds it up again (training 2) is a change from what discovery left.
  auto r = l.observe(a_.node, a_.port, true, 2);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].up);
  // From then on the link is numbered: the report of its next down is recorded once.
  ASSERT_EQ(l.report(b_.node, b_.port, false, 2).size(), 1u);
  EXPECT_TRUE(l.report(a_.node, a_.port, false, 2).empty());
}

TEST_F(FaultLedgerTest, AnEndThatRestartedIsRenumberedAndReadsAddNothingAfter) {
  FaultLedger l(plan_);
  // Both ends trained 5 times; the far host dies: the near end reports down(5).
  EXPECT_TRUE(l.observe(a_.node, a_.port, true, 5).empty());
  EXPECT_TRUE(l.observe(b_.node, b_.port, true, 5).empty());
  ASSERT_EQ(l.report(a_.node, a_.port, false, 5).size(), 1u);
  // The far host comes back: its chip trained once since its power-on, the near end a 6th time.
  ASSERT_EQ(l.report(a_.node, a_.port, true, 6).size(), 1u);
  // Scan after scan reads both ends: nothing more happened.
  for (int scan = 0; scan < 5; ++scan) {
    EXPECT_TRUE(l.observe(a_.node, a_.port, true, 6).empty()) << scan;
    EXPECT_TRUE(l.observe(b_.node, b_.port, true, 1).empty()) << scan;
  }
  // And the next flap is one change per report at either end.
  EXPECT_EQ(l.report(b_.node, b_.port, false, 1).size(), 1u);
  EXPECT_TRUE(l.report(a_.node, a_.port, false, 6).empty());
  EXPECT_TRUE(l.observe(b_.node, b_.port, false, 1).empty());
  EXPECT_TRUE(l.observe(a_.node, a_.port, false, 6).empty());
  // A daemon that starts after the restart sees the ends count apart from the first read.
  FaultLedger fresh(plan_);
  EXPECT_TRUE(fresh.observe(a_.node, a_.port, true, 6).empty());
  EXPECT_TRUE(fresh.observe(b_.node, b_.port, true, 1).empty());
  EXPECT_TRUE(fresh.observe(a_.node, a_.port, true, 6).empty());
  EXPECT_TRUE(fresh.observe(b_.node, b_.port, true, 1).empty());
  EXPECT_EQ(fresh.report(b_.node, b_.port, false, 1).size(), 1u);
  EXPECT_TRUE(fresh.report(a_.node, a_.port, false, 6).empty());
}

TEST_F(FaultLedgerTest, ALongUnseenRunIsSummarisedByItsLastChanges) {
  FaultLedger l(plan_);
  EXPECT_TRUE(l.observe(a_.node, a_.port, true, 1).empty());
  auto c = l.observe(a_.node, a_.port, true, 1001);
  EXPECT_EQ(c.size(), kMaxInferredChanges);
  EXPECT_TRUE(c.back().up);
  EXPECT_EQ(c.back().handshakes, 1001u);
}

TEST_F(FaultLedgerTest, SequenceGapsAndAuditsFindLostReports) {
  FaultLedger l(plan_);
  EXPECT_FALSE(l.sequence_gap(7, 10)) << "the first report sets the expectation";
  EXPECT_FALSE(l.sequence_gap(7, 11));
  EXPECT_TRUE(l.sequence_gap(7, 13)) << "12 never arrived";
  EXPECT_FALSE(l.sequence_gap(7, 12)) << "late, not a gap";
  EXPECT_FALSE(l.sequence_gap(7, 14));
  EXPECT_FALSE(l.sequence_gap(9, 0xFFFF));
  EXPECT_FALSE(l.sequence_gap(9, 0)) << "wraps";
  // The chip's count of reports sent (FAULTS_REPORTED) against the next expected number.
  EXPECT_FALSE(l.missing_reports(7, 15));
  EXPECT_TRUE(l.missing_reports(7, 17)) << "15 and 16 were sent, none arrived";
  EXPECT_FALSE(l.missing_reports(7, 17));
  EXPECT_FALSE(l.sequence_gap(7, 15)) << "a report sent before the audit, arriving after it";
  EXPECT_FALSE(l.missing_reports(11, 4)) << "the first audit of a chip only learns its count";
  EXPECT_FALSE(l.sequence_gap(11, 4));
}

}  // namespace
}  // namespace galaxy::nm
