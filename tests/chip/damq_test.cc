// DAMQ input buffers, credits and the output's VC arbitration (chip/damq.h).
#include "chip/damq.h"

#include <gtest/gtest.h>

#include <vector>

#include "chip/nrc.h"
#include "chip/register_names.h"

namespace galaxy::chip {
namespace {

TEST(Damq, EachVcKeepsItsShareWhenTheCommonPartIsTaken) {
  Damq b;
  // VC0 fills its share and the whole common part.
  unsigned taken = 0;
  while (b.fits(0, 8)) {
    ASSERT_TRUE(b.take(0, 8));
    taken += 8;
  }
  EXPECT_EQ(taken, kDamqReservedFlits + kDamqSharedFlits);
  EXPECT_FALSE(b.take(0, 1));
  EXPECT_EQ(b.used(0), taken);
  // Every other VC still has its own share, management included, and no more.
  for (uint8_t v = 1; v < kNumVcs; ++v) {
    EXPECT_TRUE(b.fits(v, kDamqReservedFlits)) << int{v};
    EXPECT_FALSE(b.fits(v, kDamqReservedFlits + 1)) << int{v};
    EXPECT_EQ(b.room(v), kDamqReservedFlits);
  }
  EXPECT_EQ(b.room(0), 0u);
  EXPECT_TRUE(b.take(kMgmtVc, 4));
  EXPECT_EQ(b.total(), taken + 4);
}

TEST(Damq, GivingBackRestoresTheExactStateAndRefusesMoreThanHeld) {
  Damq b;
  const Damq empty;
  std::vector<std::pair<uint8_t, unsigned>> held;
  for (unsigned i = 0; i < 200; ++i) {
    const auto v = static_cast<uint8_t>(i % kNumVcs);
    const unsigned f = 2 + i % 7;
    if (!b.take(v, f)) break;
    held.emplace_back(v, f);
  }
  ASSERT_FALSE(held.empty());
  EXPECT_LE(b.total(), kDamqFlits);
  EXPECT_FALSE(b.give(5, b.used(5) + 1));  // a credit returned twice
  for (auto it = held.rbegin(); it != held.rend(); ++it) ASSERT_TRUE(b.give(it->first, it->second));
  EXPECT_EQ(b, empty);
  EXPECT_FALSE(b.take(kNumVcs, 1));  // no VC 6
  EXPECT_FALSE(b.fits(0, kDamqFlits + 1));
}

TEST(Damq, NeverHoldsMoreThanItsFlitsWhateverTheOrder) {
  Damq b;
  unsigned seed = 7;
  for (int i = 0; i < 100000; ++i) {
    seed = seed * 1103515245u + 12345u;
    const auto v = static_cast<uint8_t>((seed >> 8) % kNumVcs);
    const unsigned f = 1 + (seed >> 16) % 8;
    if ((seed >> 4) & 1) {
      (void)b.take(v, f);
    } else {
      (void)b.give(v, std::min(f, b.used(v)));
    }
    ASSERT_LE(b.total(), kDamqFlits);
    for (uint8_t w = 0; w < kNumVcs; ++w)
      ASSERT_EQ(b.fits(w, kDamqReservedFlits), b.room(w) >= kDamqReservedFlits);
  }
}

TEST(VcState, ManagementFirstThenTheDataVcsInTurn) {
  VcState s;
  std::array<unsigned, kNumVcs> head{8, 8, 0, 4, 0, 8};
  auto heads = [&](uint8_t v) { return head[v]; };
  EXPECT_EQ(s.arbitrate(0, heads), kMgmtVc);
  head[kMgmtVc] = 0;
  EXPECT_EQ(s.arbitrate(0, heads), 1);  // after VC0: VC1
  EXPECT_EQ(s.arbitrate(1, heads), 5);  // VC2 empty, VC3 is management, VC4 empty
  EXPECT_EQ(s.arbitrate(5, heads), 0);
  // No room left for VC1 at the peer: its packet waits, the others go on.
  while (s.credits.fits(1, 1)) ASSERT_TRUE(s.credits.take(1, 1));
  EXPECT_EQ(s.arbitrate(0, heads), 5);
  head[0] = head[5] = 0;
  EXPECT_EQ(s.arbitrate(0, heads), -1);
  head[kMgmtVc] = 4;  // management still has its share
  EXPECT_EQ(s.arbitrate(0, heads), kMgmtVc);
}

TEST(VcState, AMalformedHeadNeverCrossesOnManagementsVc) {
  EXPECT_EQ(data_link_vc(0), 0);
  EXPECT_EQ(data_link_vc(1), 1);
  EXPECT_EQ(data_link_vc(2), 2);
  EXPECT_EQ(data_link_vc(5), 5);
  EXPECT_EQ(data_link_vc(kMgmtVc), 0);  // a data head naming VC3
  EXPECT_EQ(data_link_vc(6), 0);        // no such VC
  EXPECT_EQ(data_link_vc(7), 0);
}

TEST(VcRegisters, PortBlockNamesAndReadsTheVcState) {
  Nrc n(4);
  PortState& p = n.port(2);
  ASSERT_TRUE(p.vc.buffered.take(1, 8));
  ASSERT_TRUE(p.vc.buffered.take(kMgmtVc, 4));
  ASSERT_TRUE(p.vc.credits.take(0, 100));
  p.vc.tx_packets[4] = 17;
  p.vc.credit_stalls = 3;
  auto rd = [&](const char* name) {
    auto a = parse_register(std::string("PORT2.") + name);
    EXPECT_TRUE(a.ok()) << name;
    auto r = n.read_register(*a);
    EXPECT_EQ(r.error, wire::NmpError::kNone) << name;
    return r.value;
  };
  const uint64_t buffered = rd("VC_BUFFERED");
  EXPECT_EQ((buffered >> 10) & 0x3FF, 8u);
  EXPECT_EQ((buffered >> 30) & 0x3FF, 4u);
  EXPECT_EQ(buffered & 0x3FF, 0u);
  const uint64_t credits = rd("VC_CREDITS");
  EXPECT_EQ(credits & 0x3FF, kDamqReservedFlits + kDamqSharedFlits - 100);
  EXPECT_EQ((credits >> 10) & 0x3FF, kDamqReservedFlits + kDamqSharedFlits - (100 - 8));
  EXPECT_EQ(rd("CREDIT_STALLS"), 3u);
  EXPECT_EQ(rd("VC4_TX_PACKETS"), 17u);
  EXPECT_EQ(n.check_write(*parse_register("PORT2.VC_CREDITS"), 0), wire::NmpError::kReadOnly);
  EXPECT_EQ(register_name(reg::port_register(3, reg::port::kVcTxPackets + 5)),
            "PORT3.VC5_TX_PACKETS");
}

}  // namespace
}  // namespace galaxy::chip
