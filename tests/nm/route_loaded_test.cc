#include "nm/route_loaded.h"

#include <gtest/gtest.h>

#include <string>

#include "chip/data_vc.h"
#include "chip/registers.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

using chip::PortSet;
using testing::SimServer;

// A fat tree whose tables were loaded through in-band management, and a reader of the tables
// its chips hold (through the chip models; the simulator's chip id is its node).
struct Loaded {
  SimServer s;
  FabricMap map;
  RouteSet rs;

  static Loaded make(const std::string& spec, const std::string& engine = "fattree") {
    Loaded l{SimServer::make(spec), {}, {}};
    l.map = l.s.oracle();
    l.rs = compute_routes(l.map, engine).value();
    Requester req(*l.s.port, {64, 6, kSec, 2});
    auto load = load_routes(req, l.map, l.rs);
    EXPECT_TRUE(load.ok());
    EXPECT_EQ(load->failed, 0u);
    return l;
  }
  LoadedTableFn reader() {
    return [this](uint32_t v, uint8_t p) -> const chip::RouteTable* {
      return &s.fabric->nrc(map.chip_id[v]).route_table(p);
    };
  }
  LoadedVcRuleFn rules() {
    return [this](uint32_t v, uint8_t p) { return s.fabric->nrc(map.chip_id[v]).vc_rule(p); };
  }
  // An NRC, one of its linked input ports and a NIC destination it routes onwards.
  struct Entry {
    uint32_t node;
    uint8_t port;
    uint32_t dest;
    PortSet ports;
  };
  Entry some_entry() const {
    const auto& t = map.topology;
    for (uint32_t v = 0; v < map.num_nodes(); ++v) {
      if (t.is_nic(v)) continue;
      for (uint8_t p = 0; p < t.num_ports(v); ++p) {
        if (!t.peer({v, p})) continue;
        for (uint32_t d = 0; d < map.num_nodes(); ++d) {
          if (!t.is_nic(d)) continue;
          const PortSet set = s.fabric->nrc(map.chip_id[v]).allowed_ports(p, map.chip_id[d]);
          if (set.count() >= 1) return {v, p, map.chip_id[d], set};
        }
      }
    }
    ADD_FAILURE() << "no routed entry";
    return {};
  }
};

TEST(LoadedTables, TheChipsHoldWhatWasComputed) {
  Loaded l = Loaded::make("fattree:k=4,levels=3");
  LoadedCheck c = check_loaded_tables(l.map, l.rs, l.reader());
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.nrcs, l.map.topology.num_nrcs());
  EXPECT_GE(c.comparisons, c.nrcs);
  EXPECT_EQ(c.entries_differ, 0u);
  EXPECT_TRUE(c.problems.empty());
}

// The ports' VC rules went in over management with the tables (VC_RULES), and a dateline the
// chip does not hold is a discrepancy that fails the check, as a wrong table entry does.
TEST(LoadedTables, TheVcRulesAreCheckedWithTheTables) {
  Loaded l = Loaded::make("torus:4x4", "dor");
  ASSERT_TRUE(l.rs.has_vc_rules());
  LoadedCheck c = check_loaded_tables(l.map, l.rs, l.reader(), l.rules());
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
  EXPECT_EQ(c.rules_differ, 0u);
  // Clear the first dateline a chip holds.
  uint32_t node = UINT32_MAX;
  uint8_t port = 0;
  for (uint32_t v = 0; v < l.map.num_nodes() && node == UINT32_MAX; ++v)
    for (uint8_t p = 0; p < l.rs.vc_rules[v].size(); ++p)
      if ((l.rs.vc_rule(v, p) & chip::kVcRuleDateline) && node == UINT32_MAX) {
        node = v;
        port = p;
      }
  ASSERT_NE(node, UINT32_MAX);
  chip::Nrc& nrc = l.s.fabric->nrc(l.map.chip_id[node]);
  EXPECT_EQ(nrc.vc_rule(port), l.rs.vc_rule(node, port)) << "loaded over management";
  const uint16_t reg = static_cast<uint16_t>(chip::reg::kVcRules + chip::vc_rules_word(port));
  const uint64_t word = nrc.read_register(reg).value;
  nrc.write_register(reg, word & ~(uint64_t{chip::kVcRuleDateline} << chip::vc_rule_shift(port)));
  c = check_loaded_tables(l.map, l.rs, l.reader(), l.rules());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.rules_differ, 1u);
  EXPECT_EQ(c.entries_differ, 0u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("E5212"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find(fmt::format("port {}: holds VC rule", port)), std::string::npos)
      << c.problems[0];
  // Without a reader of the rules, only the tables are compared.
  EXPECT_TRUE(check_loaded_tables(l.map, l.rs, l.reader()).ok());
}

TEST(LoadedTables, OneCorruptedEntryIsReportedWithItsChipPortAndDestination) {
  Loaded l = Loaded::make("fattree:k=4,levels=3");
  const Loaded::Entry e = l.some_entry();
  // The chip now holds another port for one entry of one input port (as a lost or corrupted
  // write would leave it); its other input ports keep their tables.
  const PortSet wrong = PortSet::of(e.ports.lowest() == 0 ? 1 : 0);
  ASSERT_TRUE(l.s.fabric->nrc(l.map.chip_id[e.node])
                  .set_routes(PortSet::of(e.port), e.dest, 1, wrong)
                  .ok());
  LoadedCheck c = check_loaded_tables(l.map, l.rs, l.reader());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.entries_differ, 1u);
  ASSERT_EQ(c.problems.size(), 1u);
  const std::string& p = c.problems[0];
  EXPECT_NE(p.find("E5210"), std::string::npos) << p;
  EXPECT_NE(p.find(fmt::format("chip {} ({}) input port {}", l.map.chip_id[e.node],
                               l.map.topology.name(e.node), e.port)),
            std::string::npos)
      << p;
  EXPECT_NE(p.find(fmt::format("destination {} holds {} but the computed table has {}", e.dest,
                               chip::to_hex(wrong), chip::to_hex(e.ports))),
            std::string::npos)
      << p;
  // Put back, the tables agree again.
  ASSERT_TRUE(l.s.fabric->nrc(l.map.chip_id[e.node])
                  .set_routes(PortSet::of(e.port), e.dest, 1, e.ports)
                  .ok());
  EXPECT_TRUE(check_loaded_tables(l.map, l.rs, l.reader()).ok());
}

TEST(LoadedTables, AnEntryNoPacketIsAddressedToIsNoDifference) {
  Loaded l = Loaded::make("fattree:k=4,levels=2");
  // Chip ids of NRCs and ids beyond the fabric are never a packet's destination.
  uint32_t nrc = 0;
  while (l.map.topology.is_nic(nrc)) ++nrc;
  for (uint32_t v = 0; v < l.map.num_nodes(); ++v) {
    if (l.map.topology.is_nic(v)) continue;
    auto& chip = l.s.fabric->nrc(l.map.chip_id[v]);
    ASSERT_TRUE(
        chip.set_routes(PortSet::first(chip.num_ports()), l.map.chip_id[nrc], 1, PortSet::of(0))
            .ok());
    ASSERT_TRUE(chip.set_routes(PortSet::first(chip.num_ports()), 60000, 10, PortSet::of(1)).ok());
  }
  LoadedCheck c = check_loaded_tables(l.map, l.rs, l.reader());
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
}

TEST(LoadedTables, AChipWhoseTablesCannotBeReadFailsTheCheck) {
  Loaded l = Loaded::make("fattree:k=4,levels=2");
  uint32_t nrc = 0;
  while (l.map.topology.is_nic(nrc)) ++nrc;
  LoadedTableFn base = l.reader();
  LoadedCheck c = check_loaded_tables(
      l.map, l.rs, [&](uint32_t v, uint8_t p) { return v == nrc ? nullptr : base(v, p); });
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.unreadable, 1u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("E5211"), std::string::npos) << c.problems[0];
}

}  // namespace
}  // namespace galaxy::nm
