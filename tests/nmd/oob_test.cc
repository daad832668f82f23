// The out-of-band path end to end on every back end (nmd/oob.h): a chip switched off through its
// chassis's monitor board vanishes from discovery and comes back when switched on; a reset
// loses what was written in band; temperature and voltage read over I2C; the board's refusals.
#include "nmd/oob.h"

#include <gtest/gtest.h>

#include <optional>

#include "../integration/live_fixture.h"
#include "chip/registers.h"
#include "nmd/ops.h"

namespace galaxy::nmd {
namespace {

constexpr const char* kTopology = "fattree:k=4,levels=2";

// A fabric of the back end and a discovered session on it (null, with the reason, if either
// did not come up).
struct OobFabric {
  std::unique_ptr<live::testing::LiveFabricUnderTest> live;
  SessionOptions options;
  std::optional<Session> session;
  std::string why;
};

OobFabric make_fabric(const std::string& kind) {
  OobFabric f;
  if (kind == "live") {
    f.live = std::make_unique<live::testing::LiveFabricUnderTest>(2, kTopology);
    if (!f.live->wait_up()) {
      f.why = "the live fabric did not come up";
      return f;
    }
    f.options.fabric = f.live->spec();
    f.options.host = "h1";
  } else {
    f.options.fabric = std::string("sim:") + kTopology;
  }
  auto s = open_discovered_session(f.options);
  if (s.ok())
    f.session = std::move(*s);
  else
    f.why = s.error().to_string();
  return f;
}

// A top switch: no NIC hangs on it, so switching it off leaves every other chip reachable.
uint32_t a_spine(const fabric::Topology& t) {
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    bool nic_below = false;
    for (uint8_t p = 0; p < t.num_ports(v); ++p)
      if (auto peer = t.peer({v, p}); peer && t.is_nic(peer->node)) nic_below = true;
    if (!nic_below) return v;
  }
  return fabric::kNoNode;
}

bool discovered(const Session& s, uint32_t plan_node) {
  return s.discovery.map.node_of.count(static_cast<uint16_t>(plan_node)) != 0;
}

Result<nlohmann::json> oob(Session& s, uint32_t chip, std::string_view op,
                           const std::string* reg = nullptr, const std::string* value = nullptr) {
  return oob_op(s, std::to_string(chip), op, reg, value);
}

class OobTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OobTest, AChipSwitchedOffVanishesFromDiscoveryAndComesBackWhenSwitchedOn) {
  OobFabric f = make_fabric(GetParam());
  ASSERT_TRUE(f.session) << f.why;
  auto& s = f.session;
  const uint32_t spine = a_spine(s->plan());
  ASSERT_NE(spine, fabric::kNoNode);
  const size_t chips = s->discovery.map.num_nodes();
  ASSERT_EQ(chips, s->plan().num_nodes());
  ASSERT_TRUE(discovered(*s, spine));

  auto off = oob(*s, spine, "power-off");
  ASSERT_TRUE(off.ok()) << off.error().to_string();
  EXPECT_FALSE((*off)["powered"].get<bool>());
  // Bit times of the mux select and the regulator's OPERATION command at 100 kbit/s.
  EXPECT_DOUBLE_EQ((*off)["bus_us"].get<double>(), (20 + 29) * 10.0);
  ASSERT_TRUE(discover(*s, f.options).ok());
  EXPECT_FALSE(discovered(*s, spine)) << "a chip switched off answers nothing in band";
  EXPECT_EQ(s->discovery.map.num_nodes(), chips - 1);
  // Its register port is off with it; its regulator still answers.
  const std::string scratch = "SCRATCH";
  auto read_off = oob(*s, spine, "read", &scratch);
  ASSERT_FALSE(read_off.ok());
  EXPECT_EQ(read_off.error().id, 2202);
  auto volts_off = oob(*s, spine, "voltage");
  ASSERT_TRUE(volts_off.ok()) << volts_off.error().to_string();
  EXPECT_EQ((*volts_off)["voltage_mv"].get<uint64_t>(), 0u);

  auto on = oob(*s, spine, "power-on");
  ASSERT_TRUE(on.ok()) << on.error().to_string();
  EXPECT_TRUE((*on)["powered"].get<bool>());
  // A live link trains again over its own protocol: rediscover until the chip is back.
  bool back = false;
  for (int i = 0; i < 50 && !back; ++i) {
    ASSERT_TRUE(discover(*s, f.options).ok());
    back = discovered(*s, spine) && s->discovery.map.num_nodes() == chips;
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(back) << "switched on, the chip boots from its EEPROM and is found again";
  auto volts = oob(*s, spine, "voltage");
  ASSERT_TRUE(volts.ok());
  EXPECT_GT((*volts)["voltage_mv"].get<uint64_t>(), 800u);
  const std::string cycles = "POWER_CYCLES";
  auto n = oob(*s, spine, "read", &cycles);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_EQ((*n)["value"].get<std::string>(), "0x1");
}

TEST_P(OobTest, AResetLosesWhatWasWrittenInBandAndTheBoardNamesWhatItRefuses) {
  OobFabric f = make_fabric(GetParam());
  ASSERT_TRUE(f.session) << f.why;
  auto& s = f.session;
  const uint32_t spine = a_spine(s->plan());
  auto node = find_node(*s, std::to_string(spine));
  ASSERT_TRUE(node.ok());
  const std::string value = "0x5a5a";
  ASSERT_TRUE(register_op(*s, *node, "SCRATCH", &value).ok());
  const std::string scratch = "SCRATCH";
  auto before = oob(*s, spine, "read", &scratch);
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  EXPECT_EQ((*before)["value"].get<std::string>(), "0x5a5a") << "I2C reads what management wrote";
  // A register read: mux select (20 bit times), then START, address+W, two address bytes,
  // repeated START, address+R, eight data bytes, STOP (111), and the chip's register fetch.
  EXPECT_GE((*before)["bus_us"].get<double>(), 1310.0);

  ASSERT_TRUE(oob(*s, spine, "reset").ok());
  auto after = oob(*s, spine, "read", &scratch);
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_EQ((*after)["value"].get<std::string>(), "0x0");
  const std::string id = "CHIP_ID";
  auto chip_id = oob(*s, spine, "read", &id);
  ASSERT_TRUE(chip_id.ok());
  EXPECT_EQ((*chip_id)["value"].get<std::string>(), fmt::format("0x{:x}", spine | 1u << 16))
      << "the chip booted its id from its EEPROM again";

  auto temp = oob(*s, spine, "temperature");
  ASSERT_TRUE(temp.ok()) << temp.error().to_string();
  EXPECT_GT((*temp)["temperature_c"].get<double>(), 25.0);
  EXPECT_LT((*temp)["temperature_c"].get<double>(), 85.0);

  const std::string ro = "CHIP_IDENT", one = "1", nowhere = "0x7fff";
  auto refused = oob(*s, spine, "write", &ro, &one);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 2204);
  auto missing = oob(*s, spine, "read", &nowhere);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, 2203);
  auto bad = oob(*s, spine, "boil");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().id, 5724);
}

INSTANTIATE_TEST_SUITE_P(Backends, OobTest, ::testing::Values("sim", "live"),
                         [](const auto& i) { return std::string(i.param); });

}  // namespace
}  // namespace galaxy::nmd
