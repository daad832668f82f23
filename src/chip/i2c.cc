#include "chip/i2c.h"

namespace galaxy::chip {

using Kind = I2cEvent::Kind;

void I2cTransfer::append(const I2cTransfer& t) {
  acked = t.acked;
  events.insert(events.end(), t.events.begin(), t.events.end());
  bits += t.bits;
  stretch_ns += t.stretch_ns;
}

void I2cBus::attach(uint8_t address, I2cTarget* target) {
  targets_[address & 0x7F] = target;
}

I2cTarget* I2cBus::target(uint8_t address) const {
  return targets_[address & 0x7F];
}

bool I2cBus::send_address(I2cTransfer& t, I2cTarget* target, uint8_t address, bool read) {
  t.events.push_back(
      {Kind::kAddress, static_cast<uint8_t>((address & 0x7F) << 1 | (read ? 1 : 0))});
  t.bits += kI2cByteBits;
  // Nobody pulls SDA low for an address no target has: the master reads a NACK.
  const bool ack = target != nullptr && target->select(read);
  t.events.push_back({ack ? Kind::kAck : Kind::kNack});
  return ack;
}

bool I2cBus::send_byte(I2cTransfer& t, I2cTarget* target, uint8_t byte) {
  t.events.push_back({Kind::kByte, byte});
  t.bits += kI2cByteBits;
  const bool ack = target->write(byte);
  t.events.push_back({ack ? Kind::kAck : Kind::kNack});
  return ack;
}

void I2cBus::stop(I2cTransfer& t, I2cTarget* target) {
  t.events.push_back({Kind::kStop});
  t.bits += 1;
  if (target != nullptr) target->stop();
}

// START, address+W and `bytes` while each is acknowledged.
bool I2cBus::start_write(I2cTransfer& t, I2cTarget* target, uint8_t address,
                         std::span<const uint8_t> bytes) {
  t.events.push_back({Kind::kStart});
  t.bits += 1;
  bool ack = send_address(t, target, address, false);
  for (size_t i = 0; ack && i < bytes.size(); ++i) ack = send_byte(t, target, bytes[i]);
  return ack;
}

I2cTransfer I2cBus::write(uint8_t address, std::span<const uint8_t> bytes) {
  I2cTransfer t;
  I2cTarget* target = targets_[address & 0x7F];
  const bool ack = start_write(t, target, address, bytes);
  stop(t, target);
  t.acked = ack;
  return t;
}

I2cTransfer I2cBus::write_read(uint8_t address, std::span<const uint8_t> out,
                               std::span<uint8_t> in) {
  I2cTransfer t;
  I2cTarget* target = targets_[address & 0x7F];
  bool ack = start_write(t, target, address, out);
  if (ack) {
    t.events.push_back({Kind::kRepeatedStart});
    t.bits += 1;
    ack = send_address(t, target, address, true);
  }
  for (size_t i = 0; ack && i < in.size(); ++i) {
    uint64_t stretch = 0;
    in[i] = target->read(&stretch);
    if (stretch > 0) {
      t.events.push_back({Kind::kStretch, 0, stretch});
      t.stretch_ns += stretch;
    }
    t.events.push_back({Kind::kByte, in[i]});
    t.bits += kI2cByteBits;
    // The master acknowledges every byte it wants another after, and NACKs the last.
    t.events.push_back({i + 1 < in.size() ? Kind::kAck : Kind::kNack});
  }
  stop(t, target);
  t.acked = ack;
  return t;
}

}  // namespace galaxy::chip
