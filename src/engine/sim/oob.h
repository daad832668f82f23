// The out-of-band management path (SYSTEM.md 2.1): the server asks the chassis monitor board
// over Ethernet/TCP; the board drives the chip over I2C at 100 kbit/s through an I2C mux. It is
// the slow baseline the in-band path is compared against (SYSTEM.md 2.8: 4,816.66 us, ~716x).
#pragma once

#include "engine/sim/calibration.h"

namespace galaxy::sim {

// I2C bit times of one transaction (START/STOP count one bit each; every byte 8 bits + ACK).
struct I2cTransfer {
  static constexpr unsigned kByte = 9;
  // Select the chip's channel on the board's mux: START, mux address, channel, STOP.
  static constexpr unsigned mux_select() { return 1 + 2 * kByte + 1; }
  // Read `bytes` from a 16-bit-addressed slave: START, address+W, 2 address bytes, repeated
  // START, address+R, data bytes, STOP.
  static constexpr unsigned read(unsigned bytes) {
    return 1 + kByte + 2 * kByte + 1 + kByte + bytes * kByte + 1;
  }
  // Write `bytes`: START, address+W, 2 address bytes, data bytes, STOP.
  static constexpr unsigned write(unsigned bytes) {
    return 1 + kByte + 2 * kByte + bytes * kByte + 1;
  }
};

struct OutOfBand {
  const Timing& timing;
  Time bits(unsigned n) const {
    return static_cast<Time>(static_cast<double>(n) / timing.i2c_kbps * 1e9);  // ps
  }
  // One 64-bit register read or write through the monitor board.
  Time register_read() const {
    return timing.oob_board_overhead + bits(I2cTransfer::mux_select() + I2cTransfer::read(8));
  }
  Time register_write() const {
    return timing.oob_board_overhead + bits(I2cTransfer::mux_select() + I2cTransfer::write(8));
  }
  // EEPROM bytes: the board reaches the chip's EEPROM on the same bus; a write waits for the
  // EEPROM's write cycle per byte.
  Time eeprom_read(unsigned n) const {
    return timing.oob_board_overhead + bits(I2cTransfer::mux_select() + I2cTransfer::read(n));
  }
  Time eeprom_write(unsigned n) const {
    return timing.oob_board_overhead + bits(I2cTransfer::mux_select() + I2cTransfer::write(n)) +
           n * timing.eeprom_write_per_byte;
  }
};

}  // namespace galaxy::sim
