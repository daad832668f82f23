// The out-of-band hardware (chip/i2c.h, chip/monitor_board.h, chip/thermal.h): the bus's framing
// bit by bit, what the board does to a chip's power, and the thermal model's response to load.
#include "chip/monitor_board.h"

#include <gtest/gtest.h>

#include "chip/nrc.h"
#include "wire/oob.h"

namespace galaxy::chip {
namespace {

using K = I2cEvent::Kind;
constexpr uint64_t kSecond = 1'000'000'000'000;  // ps

// A target that answers a fixed byte and holds SCL `stretch` ns before each.
struct Echo final : I2cTarget {
  uint64_t stretch = 0;
  std::vector<uint8_t> written;
  bool stopped = false;
  bool select(bool) override { return true; }
  bool write(uint8_t b) override {
    written.push_back(b);
    return true;
  }
  uint8_t read(uint64_t* s) override {
    *s = stretch;
    return 0xA5;
  }
  void stop() override { stopped = true; }
};

TEST(I2cBus, ARegisterReadIsFramedAsTheStandardSays) {
  I2cBus bus;
  Echo t;
  bus.attach(0x50, &t);
  const uint8_t ptr[2] = {0x00, 0x12};
  uint8_t in[2] = {};
  I2cTransfer x = bus.write_read(0x50, ptr, in);
  ASSERT_TRUE(x.acked);
  const std::vector<I2cEvent> want = {
      {K::kStart},      {K::kAddress, 0xA0}, {K::kAck},           {K::kByte, 0x00},    {K::kAck},
      {K::kByte, 0x12}, {K::kAck},           {K::kRepeatedStart}, {K::kAddress, 0xA1}, {K::kAck},
      {K::kByte, 0xA5}, {K::kAck},           {K::kByte, 0xA5},    {K::kNack},          {K::kStop}};
  EXPECT_EQ(x.events, want) << "the master NACKs the last byte it reads, then STOP";
  EXPECT_EQ(x.bits, 1u + 9 + 18 + 1 + 9 + 18 + 1);
  EXPECT_EQ(x.ns(), x.bits * 10'000) << "100 kbit/s: 10 us a bit";
  EXPECT_EQ(t.written, std::vector<uint8_t>({0x00, 0x12}));
  EXPECT_TRUE(t.stopped);
}

TEST(I2cBus, AnAbsentTargetIsANackAndAStretchingTargetTakesLonger) {
  I2cBus bus;
  const uint8_t b = 1;
  I2cTransfer none = bus.write(0x33, std::span(&b, 1));
  EXPECT_FALSE(none.acked);
  EXPECT_EQ(none.events,
            (std::vector<I2cEvent>{{K::kStart}, {K::kAddress, 0x66}, {K::kNack}, {K::kStop}}));
  Echo slow;
  slow.stretch = 7'000;
  bus.attach(0x33, &slow);
  uint8_t in[1];
  I2cTransfer x = bus.write_read(0x33, {}, in);
  EXPECT_EQ(x.stretch_ns, 7'000u);
  EXPECT_EQ(x.ns(), x.bits * kI2cBitNs + 7'000);
  ASSERT_EQ(x.events.size(), 10u);
  EXPECT_EQ(x.events[6].kind, K::kStretch) << "the hold comes before the byte it delays";
  EXPECT_EQ(x.events[7].kind, K::kByte);
}

struct Board {
  Nrc chip{24};
  MonitorBoard board{MonitorBoardOptions{700}};
  std::vector<uint32_t> changed;
  Board() {
    BootImage img;
    img.registers.push_back({reg::kChipId, 7 | uint64_t{1} << 16});
    chip.eeprom().write_block(0, encode_boot_image(img));
    EXPECT_TRUE(chip.power_on().ok());
    EXPECT_TRUE(board.add_chip(7, &chip).ok());
  }
  wire::OobResponse run(wire::OobOp op, uint16_t addr = 0, uint64_t value = 0, uint64_t now = 0) {
    return board.execute({op, 7, 1, addr, value}, now, [&](uint32_t n) { changed.push_back(n); })
        .response;
  }
};

TEST(MonitorBoard, ARegisterReadCostsItsFramingAndTheChipsFetch) {
  Board b;
  b.chip.write_register(reg::kScratch, 0x1122334455667788);
  auto r = b.run(wire::OobOp::kReadRegister, reg::kScratch);
  EXPECT_EQ(r.error_id, 0);
  EXPECT_EQ(r.value, 0x1122334455667788u);
  // Mux select (START, address, channel, STOP: 20) + the read (111) = 131 bit times.
  EXPECT_EQ(r.bus_ns, 131 * kI2cBitNs + 700);
  auto w = b.run(wire::OobOp::kWriteRegister, reg::kScratch, 42);
  EXPECT_EQ(w.error_id, 0);
  EXPECT_EQ(b.chip.read_register(reg::kScratch).value, 42u);
  EXPECT_EQ(w.bus_ns, (20 + 1 + 9 + 9 * 10 + 1) * kI2cBitNs) << "no repeated START, no fetch";
  EXPECT_EQ(b.run(wire::OobOp::kReadRegister, 0x7FFF).error_id, 2203);
  EXPECT_EQ(b.run(wire::OobOp::kWriteRegister, reg::kChipIdent, 1).error_id, 2204);
  EXPECT_EQ(b.board.execute({wire::OobOp::kStatus, 8, 1, 0, 0}, 0, {}).response.error_id, 2201);
}

TEST(MonitorBoard, PowerOffHoldsTheLinksDownAndPowerOnBootsFromTheEeprom) {
  Board b;
  b.chip.link_up(3, {true, wire::ChipType::kNrc, 9, 1, 24});
  b.chip.write_register(reg::kScratch, 5);
  auto off = b.run(wire::OobOp::kPowerOff);
  EXPECT_EQ(off.error_id, 0);
  EXPECT_EQ(off.flags & wire::kOobPowered, 0u);
  EXPECT_EQ(b.changed, std::vector<uint32_t>{7}) << "the engine applies the port changes";
  EXPECT_TRUE(b.chip.port_forced_down(3));
  EXPECT_FALSE(b.chip.port_usable(3));
  EXPECT_TRUE(b.chip.take_link_control_changes().test(3));
  EXPECT_EQ(b.run(wire::OobOp::kReadRegister, reg::kScratch).error_id, 2202);
  EXPECT_EQ(b.run(wire::OobOp::kReadVoltage).value, 0u) << "the regulator answers; it is off";
  EXPECT_EQ(b.run(wire::OobOp::kReset).error_id, 2202) << "nothing to reset";
  auto on = b.run(wire::OobOp::kPowerOn);
  EXPECT_EQ(on.error_id, 0);
  EXPECT_TRUE(on.flags & wire::kOobPowered);
  EXPECT_EQ(b.chip.chip_id(), 7) << "booted from its EEPROM";
  EXPECT_EQ(b.chip.read_register(reg::kScratch).value, 0u) << "volatile state is lost";
  EXPECT_EQ(b.chip.read_register(reg::kPowerCycles).value, 1u);
  EXPECT_FALSE(b.chip.port_forced_down(3));
  b.chip.write_register(reg::kScratch, 5);
  EXPECT_EQ(b.run(wire::OobOp::kReset).error_id, 0);
  EXPECT_EQ(b.chip.read_register(reg::kScratch).value, 0u);
  EXPECT_EQ(b.chip.read_register(reg::kPowerCycles).value, 2u);
}

TEST(MonitorBoard, LoadHeatsAChipAndCrossingItsLimitRaisesTheFault) {
  Board b;
  b.chip.link_up(0, {true, wire::ChipType::kNrc, 9, 1, 24});
  b.chip.advance_thermal(0);
  const auto idle = static_cast<int64_t>(b.run(wire::OobOp::kReadTemperature, 0, 0, kSecond).value);
  EXPECT_NEAR(idle, thermal::kAmbientMc + thermal::kIdleRiseMc, 10);
  // Port 0 sends at its full rate for 30 s (six time constants): the chip settles near
  // ambient + idle + load rise; the regulator droops.
  const double flits_per_s = wire::kLinkBitsPerSecond / wire::kFlitBits;
  b.chip.port(0).tx_flits += static_cast<uint64_t>(30 * flits_per_s);
  const auto hot =
      static_cast<int64_t>(b.run(wire::OobOp::kReadTemperature, 0, 0, 31 * kSecond).value);
  EXPECT_NEAR(hot, thermal::kAmbientMc + thermal::kIdleRiseMc + thermal::kLoadRiseMc, 300);
  EXPECT_EQ(b.chip.voltage_mv(), thermal::kNominalCoreMv - thermal::kLoadDroopMv);
  EXPECT_FALSE(b.chip.read_register(reg::kFaultStatus).value & 1u << 4) << "below 85 °C";
  // An operator lowers TEMP_LIMIT below the temperature: the next step raises the fault once.
  b.chip.write_register(reg::kTempLimit, 60'000);
  b.chip.advance_thermal(32 * kSecond);
  EXPECT_TRUE(b.chip.read_register(reg::kFaultStatus).value & 1u << 4);
  b.chip.write_register(reg::kFaultStatus, 1u << 4);  // acknowledged (RW1C)
  ASSERT_FALSE(b.chip.read_register(reg::kFaultStatus).value & 1u << 4);
  b.chip.advance_thermal(33 * kSecond);
  EXPECT_FALSE(b.chip.read_register(reg::kFaultStatus).value & 1u << 4) << "not again while hot";
  // Switched off it cools toward ambient.
  b.run(wire::OobOp::kPowerOff, 0, 0, 34 * kSecond);
  const auto cold =
      static_cast<int64_t>(b.run(wire::OobOp::kReadTemperature, 0, 0, 64 * kSecond).value);
  EXPECT_NEAR(cold, thermal::kAmbientMc, 200);
}

TEST(OobFrames, RoundTripAndEveryRefusalHasItsId) {
  wire::OobRequest r{wire::OobOp::kWriteRegister, 70000, 9, 0x123, 0xDEADBEEF00112233};
  auto bytes = wire::encode_oob_request(r);
  EXPECT_EQ(bytes[0], 'G');
  EXPECT_EQ(bytes[3], '1');
  auto back = wire::decode_oob_request(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
  wire::OobResponse a{wire::OobOp::kReadVoltage, 2202, 3, 4, 1, 870, 680000};
  auto ab = wire::encode_oob_response(a);
  ASSERT_TRUE(wire::decode_oob_response(ab).ok());
  EXPECT_EQ(*wire::decode_oob_response(ab), a);
  auto refused = [](std::span<const uint8_t> b) {
    auto d = wire::decode_oob_request(b);
    return d.ok() ? 0 : d.error().id;
  };
  EXPECT_EQ(refused(std::span(bytes).first(31)), 1950);
  auto bad = bytes;
  bad[0] = 'X';
  EXPECT_EQ(refused(bad), 1951);
  bad = bytes;
  bad[4] = 2;
  EXPECT_EQ(refused(bad), 1952);
  bad = bytes;
  bad[5] = wire::kOobOpCount;
  EXPECT_EQ(refused(bad), 1953);
  bad = bytes;
  bad[20] = 1;
  EXPECT_EQ(refused(bad), 1954);
  EXPECT_FALSE(wire::decode_oob_response(bytes).ok()) << "a request is no response";
}

}  // namespace
}  // namespace galaxy::chip
