#include "chip/nrc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "chip/forwarding.h"
#include "chip/nic.h"
#include "chip/registers.h"
#include "chip/rt_select.h"
#include "chip_test_util.h"

namespace galaxy::chip {
namespace {

using wire::NmpType;

TEST(RouteTableTest, RangesPaletteAndGrowth) {
  RouteTable t;
  EXPECT_EQ(t.get(5), 0u);
  ASSERT_TRUE(t.set_range(0, 100, 0b11).ok());
  ASSERT_TRUE(t.set_range(50, 10, 0b100).ok());
  EXPECT_EQ(t.get(49), 0b11u);
  EXPECT_EQ(t.get(55), 0b100u);
  EXPECT_EQ(t.get(60), 0b11u);
  EXPECT_EQ(t.get(100), 0u);
  EXPECT_EQ(t.palette_size(), 3u);
  EXPECT_FALSE(t.set_range(kMaxRouteDestinations - 6, 10, 1).ok());
  EXPECT_FALSE(t.set_range(0, 0, 1).ok());
  EXPECT_EQ(t.runs(), 3u);
  // More than kMaxRouteRuns runs change the table to one index per destination, and more than
  // 256 distinct sets to wide indices, without changing any entry.
  for (uint32_t d = 0; d < 2 * kMaxRouteRuns; ++d) ASSERT_TRUE(t.set_range(d, 1, d + 1).ok());
  EXPECT_EQ(t.runs(), 0u);
  for (uint32_t d = 0; d < 2 * kMaxRouteRuns; ++d) ASSERT_EQ(t.get(d), d + 1);
  EXPECT_EQ(t.get(2 * kMaxRouteRuns), 0u);
}

// Random range writes against a plain array, through both forms of the table.
TEST(RouteTableTest, MatchesAPlainArrayUnderRandomRangeWrites) {
  std::mt19937 rng(7);
  for (uint32_t span : {64u, 5000u, 65536u}) {
    RouteTable t;
    std::vector<PortSet> model;
    bool saw_runs = false;
    for (int w = 0; w < 4000; ++w) {
      const uint32_t start = rng() % span;
      const uint32_t count = 1 + rng() % std::min<uint32_t>(span - start, w % 3 ? 8 : 3000);
      const PortSet ports = rng() % 5 ? (1u << (rng() % 24)) : rng() & 0xFFFFFF;
      ASSERT_TRUE(t.set_range(start, count, ports).ok());
      if (model.size() < start + count) model.resize(start + count, 0);
      std::fill(model.begin() + start, model.begin() + start + count, ports);
      saw_runs = saw_runs || t.runs() > 0;
      if (w % 97 == 0 || w == 3999) {
        ASSERT_EQ(t.size(), model.size());
        for (uint32_t d = 0; d < model.size() + 3; ++d)
          ASSERT_EQ(t.get(d), d < model.size() ? model[d] : 0u) << "write " << w << " dest " << d;
      }
    }
    EXPECT_TRUE(saw_runs);
  }
}

TEST(RouteTableTest, AStructuredTableStaysAFewRuns) {
  // A fat-tree edge switch: its own 12 NICs down, every other destination up over 12 ports.
  RouteTable t;
  ASSERT_TRUE(t.set_range(0, 18304, 0xFFF000).ok());
  for (uint32_t i = 0; i < 12; ++i) ASSERT_TRUE(t.set_range(600 + i, 1, 1u << i).ok());
  EXPECT_EQ(t.runs(), 14u);
  EXPECT_EQ(t.get(599), 0xFFF000u);
  EXPECT_EQ(t.get(605), 1u << 5);
  EXPECT_EQ(t.get(612), 0xFFF000u);
  // 14 runs of a 128-port set each, against 18 KiB for one index per destination.
  EXPECT_LT(t.memory_bytes(), 1024u);
  // Writing the same set again over a boundary merges the runs.
  ASSERT_TRUE(t.set_range(600, 12, 0xFFF000).ok());
  EXPECT_EQ(t.runs(), 1u);
  EXPECT_EQ(t.palette_size(), 2u);
}

// for_each_run walks both representations in order, covering every entry exactly once.
TEST(RouteTableTest, ForEachRunCoversEveryEntryInBothForms) {
  for (uint32_t runs : {3u, 3000u}) {  // 3000 alternating runs: one index per destination
    RouteTable t;
    for (uint32_t i = 0; i < runs; ++i)
      ASSERT_TRUE(t.set_range(2 * i, 2, PortSet::of(i % 2 ? 5 : 100)).ok());
    EXPECT_EQ(t.runs() == 0, runs > kMaxRouteRuns);
    uint32_t next = 0, seen = 0;
    t.for_each_run([&](uint32_t first, uint32_t end, PortSet ports) {
      EXPECT_EQ(first, next);
      EXPECT_LT(first, end);
      for (uint32_t d = first; d < end; ++d) EXPECT_EQ(t.get(d), ports) << d;
      next = end;
      ++seen;
    });
    EXPECT_EQ(next, t.size());
    EXPECT_EQ(seen, runs);  // equal neighbours coalesced, none split
  }
}

TEST(NrcTest, InputPortsShareTablesCopyOnWrite) {
  Nrc n;
  ASSERT_TRUE(n.set_routes(0xFFFFFF, 0, 64, 1u << 20).ok());
  EXPECT_EQ(n.distinct_tables(), 1u);
  ASSERT_TRUE(n.set_routes(0b1, 10, 1, 1u << 3).ok());  // port 0 only
  EXPECT_EQ(n.distinct_tables(), 2u);
  EXPECT_EQ(n.allowed_ports(0, 10), 1u << 3);
  EXPECT_EQ(n.allowed_ports(1, 10), 1u << 20);
  EXPECT_FALSE(n.set_routes(1u << 24, 0, 1, 1).ok());  // no port 24
  EXPECT_FALSE(n.set_routes(1, 0, 1, 1u << 30).ok());
}

TEST(NrcTest, RouteTableThroughIndirectRegistersTwoPerPacket) {
  Nrc n;
  n.set_chip_id(7);
  uint64_t select = 0xF | (uint64_t{100} << 24) | (uint64_t{20} << 40);  // ports 0-3, 100..119
  auto w =
      testing::serve(n, testing::request(NmpType::kRegWriteRequest, {reg::kRtSelect, reg::kRtData},
                                         {select, (1u << 5) | (1u << 6)}));
  EXPECT_EQ(w.nmp_type, NmpType::kRegWriteResponse);
  EXPECT_EQ(n.allowed_ports(2, 119), (1u << 5) | (1u << 6));
  EXPECT_EQ(n.allowed_ports(4, 119), 0u);
  EXPECT_EQ(n.read_register(reg::kRtEntriesWritten).value, 80u);
  // Read back one entry through the same registers.
  uint64_t one = (1u << 3) | (uint64_t{110} << 24) | (uint64_t{1} << 40);
  testing::serve(n, testing::request(NmpType::kRegWriteRequest, {reg::kRtSelect}, {one}));
  auto r = testing::serve(n, testing::request(NmpType::kRegReadRequest, {reg::kRtData}));
  EXPECT_EQ(r.data.value[0], (1u << 5) | (1u << 6));
  // A port set naming port 24 is refused and changes nothing.
  auto bad =
      testing::serve(n, testing::request(NmpType::kRegWriteRequest, {reg::kRtSelect, reg::kRtData},
                                         {select, 1u << 24}));
  EXPECT_EQ(bad.nmp_type, NmpType::kRegError);
  EXPECT_EQ(n.allowed_ports(2, 119), (1u << 5) | (1u << 6));
}

// The one forwarding rule both engines call (chip/forwarding.h).
TEST(NrcTest, ChoiceBreaksEqualLoadsByDestination) {
  const PortSet allowed = (1u << 2) | (1u << 5) | (1u << 7);
  auto all_up = [](uint8_t) { return true; };
  auto idle = [](uint8_t) { return uint64_t{0}; };
  // Equal loads: destination d takes the (d mod 3)-th allowed port, every time.
  EXPECT_EQ(choose_data_output(allowed, 0, all_up, idle), 2);
  EXPECT_EQ(choose_data_output(allowed, 1, all_up, idle), 5);
  EXPECT_EQ(choose_data_output(allowed, 2, all_up, idle), 7);
  EXPECT_EQ(choose_data_output(allowed, 3, all_up, idle), 2);
  EXPECT_EQ(choose_data_output(allowed, 4, all_up, idle), 5);
  // Its port down: the next allowed one after it.
  auto five_down = [](uint8_t p) { return p != 5; };
  EXPECT_EQ(choose_data_output(allowed, 1, five_down, idle), 7);
  // A lighter output wins over the destination's own.
  auto seven_light = [](uint8_t p) { return p == 7 ? uint64_t{1} : uint64_t{9}; };
  EXPECT_EQ(choose_data_output(allowed, 0, all_up, seven_light), 7);
  EXPECT_EQ(choose_data_output(0, 0, all_up, idle), kNoDataRoute);
  EXPECT_EQ(choose_data_output(
                allowed, 0, [](uint8_t) { return false; }, idle),
            kNoUsableRoute);
  // Ports 31, 64 and 127 (the highest a set names).
  EXPECT_EQ(choose_data_output(PortSet::of(31), 12345, all_up, idle), 31);
  EXPECT_EQ(choose_data_output(PortSet::of(64), 12345, all_up, idle), 64);
  EXPECT_EQ(choose_data_output(PortSet::of(127), 12345, all_up, idle), 127);
  // Equal loads over ports on both sides of 64: the destination picks among all of them.
  const PortSet wide = PortSet::of(3) | PortSet::of(70) | PortSet::of(127);
  EXPECT_EQ(choose_data_output(wide, 0, all_up, idle), 3);
  EXPECT_EQ(choose_data_output(wide, 1, all_up, idle), 70);
  EXPECT_EQ(choose_data_output(wide, 2, all_up, idle), 127);
}

TEST(NrcTest, AdaptiveChoiceByOutputLoad) {
  Nrc n;
  for (uint8_t p = 0; p < 24; ++p) n.link_up(p, {true, wire::ChipType::kNrc, p, 0});
  ASSERT_TRUE(n.set_routes(0xFFFFFF, 0, 1, (1u << 4) | (1u << 9)).ok());
  n.port(4).output_load = 10;
  n.port(9).output_load = 2;
  EXPECT_EQ(n.route_data(0, 0).value(), 9);
  n.port(9).output_load = 50;
  EXPECT_EQ(n.route_data(0, 0).value(), 4);
  n.link_down(4);
  EXPECT_EQ(n.route_data(0, 0).value(), 9);  // the only usable one left
  n.link_down(9);
  EXPECT_FALSE(n.route_data(0, 0).ok());
  EXPECT_FALSE(n.route_data(0, 1).ok());  // no route at all
  EXPECT_EQ(n.read_register(reg::kDirtyDiscards).value, 2u);
}

// CHIP_CTRL bit 2: the fixed choice (the destination's tie-break, as static d-mod-k routing)
// whatever the loads; an NRC's bit only; clearing it brings the adaptive choice back.
TEST(NrcTest, FixedChoiceIgnoresTheLoad) {
  Nrc n;
  for (uint8_t p = 0; p < 24; ++p) n.link_up(p, {true, wire::ChipType::kNrc, p, 0});
  ASSERT_TRUE(n.set_routes(0xFFFFFF, 0, 2, (1u << 4) | (1u << 9)).ok());
  n.port(4).output_load = 50;  // destination 0 picks port 4 on a tie, destination 1 port 9
  ASSERT_EQ(n.check_write(reg::kChipCtrl, reg::kCtrlFixedChoice), wire::NmpError::kNone);
  n.write_register(reg::kChipCtrl, reg::kCtrlFixedChoice);
  EXPECT_EQ(n.route_data(0, 0).value(), 4);
  EXPECT_EQ(n.route_data(0, 1).value(), 9);
  n.link_down(4);  // a usable port is still required
  EXPECT_EQ(n.route_data(0, 0).value(), 9);
  n.link_up(4, {true, wire::ChipType::kNrc, 4, 0});
  n.write_register(reg::kChipCtrl, 0);
  EXPECT_EQ(n.route_data(0, 0).value(), 9);  // adaptive: the idle one
  Nic nic;
  EXPECT_EQ(nic.check_write(reg::kChipCtrl, reg::kCtrlFixedChoice), wire::NmpError::kBadValue);
  EXPECT_EQ(n.check_write(reg::kChipCtrl, 8), wire::NmpError::kBadValue);
}

// What an NRC sends itself (a refusal) goes straight to a neighbour it names, else by the first
// input port's table, from the port it answers through, that leads somewhere usable.
// VC classes (chip/data_vc.h): the rule each port holds in VC_RULES moves a packet to class 1
// over a dateline and back to class 0 where it changes ring; each kind keeps its own VC.
TEST(NrcTest, VcRulesMovePacketsBetweenClasses) {
  using wire::PacketKind;
  EXPECT_EQ(data_vc(PacketKind::kRdmaWrite, 0), 0);
  EXPECT_EQ(data_vc(PacketKind::kRdmaReadResponse, 0), 1);
  EXPECT_EQ(data_vc(PacketKind::kAck, 0), 2);
  EXPECT_EQ(data_vc(PacketKind::kMp, 1), 4);
  EXPECT_EQ(data_vc(PacketKind::kRdmaReadRequest, 1), 4);
  EXPECT_EQ(data_vc(PacketKind::kRdmaReadResponse, 1), 5);
  EXPECT_EQ(data_vc(PacketKind::kAck, 1), 5);
  Nrc n(36);  // three registers' worth of ports
  for (uint8_t p = 0; p < 36; ++p) EXPECT_EQ(n.vc_rule(p), 0) << "power-on: no rules";
  EXPECT_EQ(n.data_vc_out(PacketKind::kRdmaWrite, 0, 1, 2), 0);
  // Port 2: ring 1, dateline; port 3: ring 1; port 4: ring 2; port 33: ring 1, dateline.
  const uint64_t w0 = (uint64_t{vc_rule(true, 1)} << 8) | (uint64_t{vc_rule(false, 1)} << 12) |
                      (uint64_t{vc_rule(false, 2)} << 16);
  const uint64_t w2 = uint64_t{vc_rule(true, 1)} << 4;
  ASSERT_EQ(n.check_write(reg::kVcRules, w0), wire::NmpError::kNone);
  n.write_register(reg::kVcRules, w0);
  n.write_register(reg::kVcRules + 2, w2);
  EXPECT_EQ(n.read_register(reg::kVcRules).value, w0);
  EXPECT_EQ(n.vc_rule(2), vc_rule(true, 1));
  EXPECT_EQ(n.vc_rule(33), vc_rule(true, 1));
  // Into the dateline: class 1, whatever the class before; along the ring: kept; a turn into
  // another ring: class 0 again.
  EXPECT_EQ(n.data_vc_out(PacketKind::kRdmaWrite, 0, 3, 2), 4);
  EXPECT_EQ(n.data_vc_out(PacketKind::kAck, 2, 3, 33), 5);
  EXPECT_EQ(n.data_vc_out(PacketKind::kRdmaWrite, 4, 3, 3), 4);
  EXPECT_EQ(n.data_vc_out(PacketKind::kRdmaReadResponse, 5, 3, 4), 1);
  EXPECT_EQ(n.data_vc_out(PacketKind::kAck, 5, 3, 4), 2) << "the kind picks the class-0 VC";
  EXPECT_EQ(n.data_vc_out(PacketKind::kRdmaWrite, 0, 0, 3), 0) << "from a NIC's ring 0";
  // A rule for a port the switch does not have is refused, and changes nothing.
  EXPECT_EQ(n.check_write(reg::kVcRules + 2, uint64_t{1} << 16), wire::NmpError::kBadValue);
  EXPECT_EQ(n.check_write(reg::kVcRules + 3, 1), wire::NmpError::kBadValue);
  EXPECT_EQ(n.read_register(reg::kVcRules + 2).value, w2);
  EXPECT_EQ(n.check_write(reg::kVcRules + reg::kVcRulesWords, 0),
            wire::NmpError::kAddressOutOfRange);
  Nrc th2;  // 24 ports: the second register holds ports 16-23
  EXPECT_EQ(th2.check_write(reg::kVcRules + 1, 0xFFFFFFFFull), wire::NmpError::kNone);
  EXPECT_EQ(th2.check_write(reg::kVcRules + 1, 0x1FFFFFFFFull), wire::NmpError::kBadValue);
}

TEST(NrcTest, ItsOwnPacketsGoToANeighbourOrByTheFirstTableThatLeadsOn) {
  Nrc n;
  for (uint8_t p = 0; p < 24; ++p)
    n.link_up(p, p == 6 ? PeerIdentity{true, wire::ChipType::kNic, 300, 0}
                        : PeerIdentity{true, wire::ChipType::kNrc, p, 0});
  EXPECT_EQ(n.route_own(2, 300).value(), 6);  // no table, but the link leads there
  EXPECT_FALSE(n.route_own(2, 301).ok());
  // Port 2's table has nothing for 301 (a port from above, say); port 5's leads by port 11.
  ASSERT_TRUE(n.set_routes(1u << 5, 301, 1, 1u << 11).ok());
  ASSERT_TRUE(n.set_routes(1u << 20, 301, 1, 1u << 13).ok());
  EXPECT_EQ(n.route_own(2, 301).value(), 11);
  EXPECT_EQ(n.route_own(15, 301).value(), 13);  // from 15 on, port 20's table comes first
  n.link_down(11);
  EXPECT_EQ(n.route_own(2, 301).value(), 13);
  n.link_down(13);
  EXPECT_FALSE(n.route_own(2, 301).ok());
  n.link_down(6);
  EXPECT_FALSE(n.route_own(2, 300).ok());
  EXPECT_EQ(n.read_register(reg::kDirtyDiscards).value, 0u);  // nothing it received was lost
}

TEST(NrcTest, SourceRoutedForwardAbsorbDrop) {
  Nrc n;
  n.set_chip_id(7);
  for (uint8_t p = 0; p < 24; ++p) n.link_up(p, {true, wire::ChipType::kNrc, p, 0});
  auto req = testing::request(NmpType::kRegReadRequest, {reg::kScratch});
  ASSERT_TRUE(req.forward_route.push(11).ok());
  ASSERT_TRUE(req.forward_route.push(2).ok());
  auto b = testing::bytes_of(req);
  auto d = n.route_mgmt(0, b);  // hop 0 of 2: forward out of port 11
  EXPECT_EQ(d.action, MgmtRouting::Action::kForward);
  EXPECT_EQ(d.out_port, 11);
  EXPECT_EQ(wire::decode_mgmt_packet(b).value().hop_count, 1);  // CRC still valid
  d = n.route_mgmt(0, b);
  EXPECT_EQ(d.out_port, 2);
  d = n.route_mgmt(0, b);  // route used up: for this chip
  EXPECT_EQ(d.action, MgmtRouting::Action::kAbsorb);
  // Next port down: dropped and counted.
  auto b2 = testing::bytes_of(req);
  n.link_down(11);
  EXPECT_EQ(n.route_mgmt(3, b2).action, MgmtRouting::Action::kDrop);
  EXPECT_EQ(n.port(3).dirty_discards, 1u);
  // Garbage is dropped as dirty.
  wire::MgmtPacketBytes junk{};
  EXPECT_EQ(n.route_mgmt(4, junk).action, MgmtRouting::Action::kDrop);
}

TEST(NrcTest, PeerIdentityLearntAndSummarisedTwoPortsPerRegister) {
  Nrc n;
  n.link_up(0, {true, wire::ChipType::kNic, 1234, 0});
  n.link_up(1, {true, wire::ChipType::kNrc, 77, 13});
  uint64_t v = n.read_register(reg::kPeerSummary).value;
  EXPECT_EQ(v & 0xFFFFFFFF, reg::encode_peer(true, false, 0, true, 1234));
  EXPECT_EQ(v >> 32, reg::encode_peer(true, true, 13, true, 77));
  EXPECT_EQ(n.read_register(reg::kPortBase + reg::kPortStride + reg::port::kPeerIdent).value,
            v >> 32);
  EXPECT_EQ(n.read_register(reg::kPortBase + reg::port::kHandshakes).value, 1u);
  // The block covers 32 ports: a 24-port chip's registers 12-15 read "no peer"; beyond is unmapped.
  EXPECT_EQ(n.read_register(reg::kPeerSummary + 12).value, 0u);
  EXPECT_EQ(n.read_register(reg::kPeerSummary + 16).error, wire::NmpError::kAddressOutOfRange);
}

// 17-bit chip ids (wire/chip_id.h, docs/registers.md): CHIP_ID keeps TH-2's [15:0] and [16] valid
// and takes bit 16 in [17] and the fabric's wide-id mode in [18]; PORT_IDENT names the chip's
// bit 16 in [26]; the peer identities keep 16 bits and PEER_SUMMARY_HIGH holds each peer's bit 16;
// FAULT_DEST the server NIC's in [22]; RT_SELECT first and count theirs in [61] and [62].
TEST(NrcTest, SeventeenBitChipIdsInTheRegisters) {
  Nrc n;
  BootImage img;
  img.registers = {{reg::kChipId, reg::encode_chip_id(0x1ABCD, true, true)}};
  // A range past destination 65,535: the far route record.
  img.routes = {{PortSet::first(24), 0xFFF0, 0x20, PortSet::from_words(1u << 3)}};
  auto bytes = encode_boot_image(img);
  EXPECT_EQ(decode_boot_image(bytes).value(), img);
  n.eeprom().write_block(0, bytes);
  ASSERT_TRUE(n.power_on().ok());
  EXPECT_EQ(n.chip_id(), 0x1ABCDu);
  const uint64_t id = n.read_register(reg::kChipId).value;
  EXPECT_EQ(id, 0xABCDu | 1u << 16 | 1u << 17 | 1u << 18);
  EXPECT_TRUE(reg::chip_id_wide(id));
  EXPECT_EQ((n.read_register(reg::kPortBase + reg::port::kIdent).value >> 8) & 0xFFFF, 0xABCDu);
  EXPECT_EQ((n.read_register(reg::kPortBase + reg::port::kIdent).value >> 26) & 1, 1u);
  EXPECT_EQ(n.allowed_ports(0, 0x1000F), PortSet::from_words(1u << 3));
  EXPECT_EQ(n.allowed_ports(0, 0xFFEF), PortSet{});
  // Bit 16 of a written id takes; the unconfigured id and bits above 18 are refused.
  EXPECT_EQ(n.check_write(reg::kChipId, reg::encode_chip_id(wire::kUnconfiguredId)),
            wire::NmpError::kBadValue);
  EXPECT_EQ(n.check_write(reg::kChipId, uint64_t{1} << 19), wire::NmpError::kBadValue);
  EXPECT_EQ(n.check_write(reg::kChipId, reg::encode_chip_id(0xFFFF)), wire::NmpError::kNone);

  n.link_up(0, {true, wire::ChipType::kNic, 0x10007, 0, 1});
  n.link_up(1, {true, wire::ChipType::kNrc, 0xFFFF, 13, 24});
  n.link_up(23, {true, wire::ChipType::kNic, 0x1FFFE, 0, 1});
  const uint64_t wide = n.read_register(reg::kPeerSummaryWide).value;
  EXPECT_EQ(reg::decode_wide_peer(static_cast<uint32_t>(wide)).chip, 0x0007u);  // 16 bits only
  const uint64_t high = n.read_register(reg::kPeerSummaryHigh).value;
  EXPECT_EQ(high, (1u << 0) | (1u << 23));
  EXPECT_EQ(reg::with_high_bit(reg::decode_wide_peer(static_cast<uint32_t>(wide)), 0, high).chip,
            0x10007u);
  EXPECT_EQ(
      reg::with_high_bit(reg::decode_wide_peer(static_cast<uint32_t>(wide >> 32)), 1, high).chip,
      0xFFFFu);
  EXPECT_EQ(n.read_register(reg::kPeerSummaryHigh + 1).value, 0u);  // ports 64-127: none here
  EXPECT_EQ(n.check_write(reg::kPeerSummaryHigh, 0), wire::NmpError::kReadOnly);
  n.link_down(0);
  EXPECT_EQ(n.read_register(reg::kPeerSummaryHigh).value, 1u << 23);  // only linked peers

  ASSERT_EQ(n.check_write(reg::kFaultDest, reg::encode_fault_dest(0x1ABCD, 5)),
            wire::NmpError::kNone);
  EXPECT_EQ(reg::fault_dest_nic(reg::encode_fault_dest(0x1ABCD, 5)), 0x1ABCDu);
  EXPECT_EQ(reg::fault_dest_vp(reg::encode_fault_dest(0x1ABCD, 5)), 5u);

  RtSelect sel;
  sel.all_inputs = true;
  sel.first = 0x1FF00;
  sel.count = 0x1FFFF - 0x1FF00 + 1;
  const uint64_t v = sel.encode();
  EXPECT_EQ((v >> 61) & 3, 1u);  // first's bit 16
  EXPECT_EQ(RtSelect::decode(v).first, 0x1FF00u);
  EXPECT_EQ(RtSelect::decode(v).count, 0x100u);
  EXPECT_TRUE(RtSelect::valid(v, 64));
  sel.count = 0x101;  // one entry past the last destination
  EXPECT_FALSE(RtSelect::valid(sel.encode(), 64));
  sel.first = 1;
  sel.count = kMaxRtCount;                  // every destination but 0
  EXPECT_EQ((sel.encode() >> 61) & 3, 2u);  // count's bit 16
  EXPECT_EQ(RtSelect::decode(sel.encode()).count, 0x1FFFFu);
  EXPECT_TRUE(RtSelect::valid(sel.encode(), 64));
}

TEST(EepromTest, BootImageLoadsRegistersAndRoutesAtPowerOn) {
  Nrc n;
  BootImage img;
  img.registers = {{reg::kChipId, 42 | (1u << 16)}, {reg::kScratch, 9}};
  img.routes = {{0xFFFFFF, 0, 32, 1u << 7}};
  auto bytes = encode_boot_image(img);
  EXPECT_EQ(decode_boot_image(bytes).value(), img);
  n.eeprom().write_block(0, bytes);
  ASSERT_TRUE(n.power_on().ok());
  EXPECT_TRUE(n.configured());
  EXPECT_EQ(n.chip_id(), 42);
  EXPECT_EQ(n.allowed_ports(5, 31), 1u << 7);
  EXPECT_EQ(n.read_register(reg::kBootStatus).value & 1, 1u);
  EXPECT_LT(n.eeprom().allocated_bytes(), 1024u);
}

TEST(EepromTest, BadBootImagesChangeNothing) {
  BootImage img;
  img.registers = {{reg::kScratch, 1}, {reg::kTemperature, 5}};  // read-only register
  Nrc n;
  n.eeprom().write_block(0, encode_boot_image(img));
  EXPECT_FALSE(n.power_on().ok());
  EXPECT_EQ(n.read_register(reg::kScratch).value, 0u);
  EXPECT_FALSE(n.configured());

  auto good = encode_boot_image({{{reg::kScratch, 1}}, {}});
  auto corrupt = good;
  corrupt[9] ^= 1;
  EXPECT_EQ(decode_boot_image(corrupt).error().code, Code::kCrcMismatch);
  EXPECT_NE(decode_boot_image(std::span(good).first(12)).error().message.find("offset"),
            std::string::npos);
  auto unknown = good;
  unknown[8] = 0x7;
  EXPECT_NE(decode_boot_image(unknown).error().message.find("record type"), std::string::npos);
  // Blank EEPROM: no error, chip stays unconfigured.
  Nrc blank;
  EXPECT_TRUE(blank.power_on().ok());
  EXPECT_FALSE(blank.configured());
}

// Found by fuzz_boot_image: a route record whose range runs past the last destination passed the
// pre-check, so the registers before it were applied and then set_routes() failed.
TEST(EepromTest, RouteRangeBeyondTheTableChangesNothing) {
  BootImage img;
  img.registers = {{reg::kChipId, 7 | (1u << 16)}, {reg::kScratch, 0x1234}};
  img.routes = {{0x3, kMaxRouteDestinations - 1, 2, 0x4}};
  Nrc n;
  n.eeprom().write_block(0, encode_boot_image(img));
  auto s = n.power_on();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("first=131071 count=2"), std::string::npos) << s.error().message;
  EXPECT_FALSE(n.configured());
  EXPECT_EQ(n.read_register(reg::kScratch).value, 0u);
  EXPECT_EQ(n.read_register(reg::kRtEntriesWritten).value, 0u);
  EXPECT_EQ((n.read_register(reg::kBootStatus).value >> 8) & 0xFF, 0x31u);
  // The last destination itself is a valid range.
  img.routes = {{0x3, 65535, 1, 0x4}};
  Nrc ok;
  ok.eeprom().write_block(0, encode_boot_image(img));
  ASSERT_TRUE(ok.power_on().ok());
  EXPECT_EQ(ok.allowed_ports(1, 65535), 0x4u);
}

}  // namespace
}  // namespace galaxy::chip
