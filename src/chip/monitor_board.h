// A chassis's monitor board (docs/system.md 2.1): the out-of-band path to the chassis's chips.
// The board's I2C master reaches each chip through an I2C multiplexer (address 0x70: one byte
// selects the channel, one channel per chip) and, on that channel, two devices:
//   * the chip's regulator at 0x40, commanded with PMBus codes: OPERATION (0x01; 0x80 on,
//     0x00 off), READ_VOUT (0x8B) and READ_TEMPERATURE_1 (0x8D), each reading two bytes, low
//     byte first (PMBus word order; Galaxy's regulator reports plain millivolts and
//     hundredths of a degree rather than PMBus's LINEAR formats), and the reset line
//     (manufacturer command 0xD0: pulse it);
//   * the chip's register port at 0x50: a 16-bit register address, high byte first, then eight
//     data bytes (write) or a repeated START and eight data bytes read back, most significant
//     first. The chip holds SCL low while it fetches a register (clock stretching).
// The regulator and the sensor sit on the board's standby power: they answer while the chip is
// off; the register port does not.
//
// The board executes one request of the monitor board protocol (wire/oob.h) at a time, as a
// sequence of I2C transfers, and says how long its bus took; both engines call it: the
// simulator adds the bus time to its clock, the live fabric's board waits it out.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "chip/chip.h"
#include "chip/i2c.h"
#include "wire/oob.h"

namespace galaxy::chip {

inline constexpr uint8_t kI2cMuxAddress = 0x70;
inline constexpr uint8_t kI2cRegulatorAddress = 0x40;
inline constexpr uint8_t kI2cRegisterPortAddress = 0x50;
inline constexpr uint8_t kPmbusOperation = 0x01;
inline constexpr uint8_t kPmbusOperationOn = 0x80;
inline constexpr uint8_t kPmbusReadVout = 0x8B;
inline constexpr uint8_t kPmbusReadTemperature1 = 0x8D;
inline constexpr uint8_t kPmbusMfrResetPulse = 0xD0;
inline constexpr unsigned kMonitorBoardChannels = 256;  // one selecting byte

struct MonitorBoardOptions {
  // How long a chip holds SCL before the first byte of a register it reads out (its internal
  // register access). The engine's figure: the simulator's NMA register read time.
  uint64_t register_fetch_ns = 0;
};

// What a board's error id means ("" for an id that is not the board's).
std::string_view monitor_board_error(uint16_t id);
// The status code a caller reports a board's error id with.
Code monitor_board_error_code(uint16_t id);

class MonitorBoard {
 public:
  explicit MonitorBoard(MonitorBoardOptions options = {});
  ~MonitorBoard();
  MonitorBoard(const MonitorBoard&) = delete;
  MonitorBoard& operator=(const MonitorBoard&) = delete;

  // The chip `node` (the fabric's numbering) on the next mux channel; E2200 when all 256 are
  // taken.
  Status add_chip(uint32_t node, Chip* chip);
  bool has(uint32_t node) const;
  size_t num_chips() const { return channels_.size(); }

  // Called after a chip's power changed (its ports are in take_link_control_changes), before
  // the board goes on: a reset takes the links down and up again, so the engine applies each.
  using PowerChanged = std::function<void(uint32_t node)>;

  struct Outcome {
    wire::OobResponse response;
    I2cTransfer bus;  // everything the request put on the bus, in order
  };
  // One request at `now_ps` (the engine's clock, for the thermal model). Errors are answers
  // (response.error_id): E2201 no such chip on this board, E2202 the chip's register port did
  // not acknowledge (the chip is off), E2203 a register the chip does not have, E2204 a value
  // the register refuses, E2205 the chip failed to boot from its EEPROM.
  Outcome execute(const wire::OobRequest& request, uint64_t now_ps,
                  const PowerChanged& power_changed);

 private:
  struct Channel;
  MonitorBoardOptions options_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::pair<uint32_t, size_t>> by_node_;  // sorted by node
  void notify(Channel& ch);
  uint64_t now_ps_ = 0;
  const PowerChanged* power_changed_ = nullptr;  // during execute
  I2cBus root_;
  std::unique_ptr<I2cTarget> mux_;
  size_t selected_ = 0;
  friend class MuxTarget;
};

}  // namespace galaxy::chip
