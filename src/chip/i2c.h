// The I2C bus of the out-of-band path (docs/system.md 2.1), modelled at the level of its
// framing: START, the address byte with its R/W bit, an acknowledge bit after every byte, data
// bytes, repeated START, STOP, and clock stretching when a target holds SCL low before it
// answers. A transfer records what crossed the bus and how long it took at the standard-mode
// rate (NXP UM10204, 100 kbit/s: one bit time per START, STOP and bit, 9 per byte with its
// acknowledge). No clock and no threads: the engine adds the time a transfer reports.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace galaxy::chip {

inline constexpr uint64_t kI2cBitsPerSecond = 100'000;  // standard mode
inline constexpr uint64_t kI2cBitNs = 1'000'000'000 / kI2cBitsPerSecond;
inline constexpr unsigned kI2cByteBits = 9;  // 8 data bits and the acknowledge bit

// One thing seen on the bus, in order.
struct I2cEvent {
  enum class Kind : uint8_t {
    kStart,
    kRepeatedStart,
    kStop,
    kAddress,  // value: 7-bit address << 1 | R/W (1 = read)
    kByte,     // value: a data byte, from the master (write) or the target (read)
    kAck,      // the receiver of the byte before pulled SDA low
    kNack,     // it did not (no target, refused, or the master's last read byte)
    kStretch,  // the target held SCL low for `stretch_ns` before its next bit
  };
  Kind kind = Kind::kStart;
  uint8_t value = 0;
  uint64_t stretch_ns = 0;
  bool operator==(const I2cEvent&) const = default;
};

// A device on the bus. Every call is one framing step; the bus asks in bus order.
class I2cTarget {
 public:
  virtual ~I2cTarget() = default;
  // Its address was sent after a START or repeated START: acknowledge it?
  virtual bool select(bool read) = 0;
  // A byte from the master: acknowledge it?
  virtual bool write(uint8_t byte) = 0;
  // The next byte to send; *stretch_ns: how long it holds SCL first (fetching the data).
  virtual uint8_t read(uint64_t* stretch_ns) = 0;
  // STOP: the transaction ends.
  virtual void stop() {}
};

// What one master operation did on the bus.
struct I2cTransfer {
  bool acked = false;  // the address and every written byte were acknowledged
  std::vector<I2cEvent> events;
  uint64_t bits = 0;        // bit times, START and STOP included
  uint64_t stretch_ns = 0;  // SCL held low by targets
  uint64_t ns() const { return bits * kI2cBitNs + stretch_ns; }
  void append(const I2cTransfer& t);
};

// One bus segment: up to 128 seven-bit addresses, each at most one target.
class I2cBus {
 public:
  void attach(uint8_t address, I2cTarget* target);
  I2cTarget* target(uint8_t address) const;

  // START, address+W, the bytes, STOP. Stops at the first byte not acknowledged.
  I2cTransfer write(uint8_t address, std::span<const uint8_t> bytes);
  // START, address+W, `out` (a register pointer), repeated START, address+R, `in.size()` bytes
  // (the master acknowledges every byte but the last), STOP. A NACK ends it with STOP.
  I2cTransfer write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in);

 private:
  bool start_write(I2cTransfer& t, I2cTarget* target, uint8_t address,
                   std::span<const uint8_t> bytes);
  bool send_address(I2cTransfer& t, I2cTarget* target, uint8_t address, bool read);
  bool send_byte(I2cTransfer& t, I2cTarget* target, uint8_t byte);
  void stop(I2cTransfer& t, I2cTarget* target);
  I2cTarget* targets_[128] = {};
};

}  // namespace galaxy::chip
