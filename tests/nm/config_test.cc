#include "nm/config.h"

#include <gtest/gtest.h>

#include "chip/registers.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

namespace reg = chip::reg;

uint16_t port_reg(uint8_t p, uint16_t off) {
  return reg::port_register(p, off);
}

uint64_t read_in_band(Requester& req, const FabricMap& map, uint32_t node, uint16_t addr) {
  uint64_t v = ~uint64_t{0};
  req.submit(MgmtRequest::read(map.target[node], addr), [&](const MgmtReply& r) {
    EXPECT_TRUE(r.status.ok());
    v = r.response.data.value[0];
  });
  req.run();
  return v;
}

class ConfigBackends : public ::testing::TestWithParam<const char*> {};

TEST_P(ConfigBackends, AppliesWritesAndReportsARefusedOneWithoutLosingTheRest) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {256, 6, kSec, 2});
  uint32_t a = map.topology.peer({map.server_node, 0})->node;
  uint32_t b = 0;
  for (uint32_t v = 0; v < map.num_nodes(); ++v)
    if (!map.topology.is_nic(v) && v != a) b = v;
  std::vector<ConfigWrite> writes{
      {a, reg::kScratch, 111, 0},
      {a, reg::kChipIdent, 5, 1},  // read-only: refused
      {a, port_reg(1, reg::port::kLinkParams), 222, 2},
      {a, reg::kFaultMask, 0xF0, 3},
      {b, reg::kScratch, 333, 4},
      {map.server_node, reg::kScratch, 1, 5},  // not a remote chip
  };
  auto r = apply_writes(req, map, writes);
  EXPECT_EQ(r.applied, 4u);
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0].write.entry, 1u);
  EXPECT_EQ(r.failures[0].nma_error, wire::nmp_error_name(wire::NmpError::kReadOnly));
  EXPECT_EQ(r.failures[0].write.addr, reg::kChipIdent);
  EXPECT_EQ(r.failures[1].write.entry, 5u);
  // Chip a: the pair (0,1) refused, 0 and 1 alone, then the pair (2,3); chip b: one packet.
  EXPECT_EQ(r.requests, 5u);
  EXPECT_EQ(read_in_band(req, map, a, reg::kScratch), 111u);
  EXPECT_EQ(read_in_band(req, map, a, port_reg(1, reg::port::kLinkParams)), 222u);
  EXPECT_EQ(read_in_band(req, map, a, reg::kFaultMask), 0xF0u);
  EXPECT_EQ(read_in_band(req, map, b, reg::kScratch), 333u);
}

TEST_P(ConfigBackends, KeepsEachChipsOrder) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {256, 6, kSec, 2});
  uint32_t a = map.topology.peer({map.server_node, 0})->node;
  std::vector<ConfigWrite> writes;
  for (uint64_t i = 0; i < 7; ++i) writes.push_back({a, reg::kScratch, i + 10, i});
  auto r = apply_writes(req, map, writes);
  EXPECT_EQ(r.applied, 7u);
  EXPECT_TRUE(r.failures.empty());
  EXPECT_EQ(r.requests, 4u);
  EXPECT_EQ(read_in_band(req, map, a, reg::kScratch), 16u);
}

TEST_P(ConfigBackends, EepromDefaultsAreWrittenAndVerified) {
  auto s = testing::Backend::make(GetParam(), "line:n=3");
  ASSERT_TRUE(s) << GetParam() << " did not come up";
  auto map = s->oracle();
  Requester req(*s->port, {});
  uint32_t a = map.topology.peer({map.server_node, 0})->node;
  ASSERT_EQ(apply_writes(req, map, {{a, reg::kScratch, 0x1234, 0}}).applied, 1u);
  auto r = write_eeprom_defaults(req, map, a);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->verified);
  const size_t linked = default_registers(map, a).size() - 5;
  size_t peers = 0;
  for (uint8_t p = 0; p < map.topology.num_ports(a); ++p)
    peers += map.topology.peer({a, p}) ? 1 : 0;
  EXPECT_EQ(linked, peers);
  EXPECT_GE(linked, 2u);
  ASSERT_EQ(r->image.registers.size(), 5 + linked);
  EXPECT_EQ(r->image.registers[0].address, reg::kChipId);
  EXPECT_EQ(r->image.registers[0].value & 0xFFFF, a);
  EXPECT_EQ(r->image.registers[4], (chip::BootRegister{reg::kScratch, 0x1234}));
  EXPECT_EQ(r->bytes, 8 + 11 * r->image.registers.size() + 2);
  // The image as the chip model stored it; the timing is the simulator's (about 3 ms of I2C
  // time per byte written), a live chip writes at the machine's pace.
  if (s->kind == "sim") {
    EXPECT_GT(r->write_time, r->bytes * 2 * kMs);
    EXPECT_LT(r->verify_time, r->write_time);
    auto stored = chip::read_boot_image(s->sim_fabric->chip(a).eeprom());
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(*stored, r->image);
  }
}

GALAXY_OVER_BACKENDS(ConfigBackends);

}  // namespace
}  // namespace galaxy::nm

namespace galaxy::nm {
namespace {

TEST(ConfigParseTest, EntriesAndErrorsNameTheField) {
  auto ok = parse_config(R"({"writes":[{"chip":"7","addr":"SCRATCH","value":5},
                                      {"chip":"all-nrc","addr":"PORT3.LINK_PARAMS","value":"0x10"}]})");
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].chip, "7");
  EXPECT_EQ((*ok)[1].value, 16u);
  EXPECT_EQ((*ok)[1].index, 1u);
  EXPECT_FALSE(parse_config("not json").ok());
  EXPECT_FALSE(parse_config(R"({"writes": 3})").ok());
  auto missing = parse_config(R"({"writes":[{"chip":"1","addr":"SCRATCH"}]})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("writes[0]"), std::string::npos);
  auto bad_addr = parse_config(R"({"writes":[{"chip":"1","addr":"NOPE","value":1}]})");
  ASSERT_FALSE(bad_addr.ok());
  EXPECT_NE(bad_addr.error().message.find("writes[0].addr"), std::string::npos);
}

}  // namespace
}  // namespace galaxy::nm
