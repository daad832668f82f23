#include "chip/monitor_board.h"

#include <algorithm>
#include <array>

namespace galaxy::chip {

namespace {

// Why a request failed, as the board learnt it from the bus.
enum BoardError : uint16_t {
  kNoChip = 2201,
  kChipOff = 2202,
  kNoRegister = 2203,
  kRefused = 2204,
  kBootFailed = 2205,
};

}  // namespace

Code monitor_board_error_code(uint16_t id) {
  switch (id) {
    case kNoChip:
      return Code::kNotFound;
    case kChipOff:
      return Code::kIoError;
    case kNoRegister:
      return Code::kOutOfRange;
    case kRefused:
      return Code::kInvalidArgument;
    default:
      return Code::kMalformed;
  }
}

std::string_view monitor_board_error(uint16_t id) {
  switch (id) {
    case kNoChip:
      return "the chip is not on this monitor board";
    case kChipOff:
      return "the chip's register port did not acknowledge: the chip is switched off";
    case kNoRegister:
      return "the chip has no such register";
    case kRefused:
      return "the register refused the value";
    case kBootFailed:
      return "the chip did not boot from its EEPROM (BOOT_STATUS says why)";
    default:
      return "";
  }
}

// One mux channel: a chip, its regulator and its register port.
struct MonitorBoard::Channel {
  uint32_t node = 0;
  Chip* chip = nullptr;
  I2cBus bus;
  uint16_t error = 0;  // set by a target that refused, read by execute
  bool changed = false;

  // The regulator: PMBus commands; power and reset act at STOP.
  struct Regulator final : I2cTarget {
    Channel& ch;
    MonitorBoard& board;
    int command = -1;
    std::vector<uint8_t> data;
    std::array<uint8_t, 2> word{};
    size_t next = 0;
    Regulator(Channel& c, MonitorBoard& b) : ch(c), board(b) {}
    bool select(bool read) override {
      if (read) {
        next = 0;
        return command == kPmbusReadVout || command == kPmbusReadTemperature1;
      }
      command = -1;
      data.clear();
      return true;
    }
    bool write(uint8_t byte) override {
      if (command < 0) {
        command = byte;
        return byte == kPmbusOperation || byte == kPmbusReadVout ||
               byte == kPmbusReadTemperature1 || byte == kPmbusMfrResetPulse;
      }
      data.push_back(byte);
      return data.size() == 1;
    }
    uint8_t read(uint64_t* stretch_ns) override {
      *stretch_ns = 0;
      if (next == 0) {
        ch.chip->advance_thermal(board.now_ps_);
        // Hundredths of a degree or millivolts, as a 16-bit word (the sensor's range).
        const int64_t v = command == kPmbusReadTemperature1
                              ? ch.chip->temperature_mc() / 10
                              : static_cast<int64_t>(ch.chip->voltage_mv());
        const auto w = static_cast<uint16_t>(static_cast<int16_t>(
            std::clamp<int64_t>(v, command == kPmbusReadTemperature1 ? INT16_MIN : 0,
                                command == kPmbusReadTemperature1 ? INT16_MAX : UINT16_MAX)));
        word = {static_cast<uint8_t>(w), static_cast<uint8_t>(w >> 8)};
      }
      return next < word.size() ? word[next++] : 0xFF;
    }
    void stop() override {
      if (data.size() != 1) return;
      const uint64_t now = board.now_ps_;
      if (command == kPmbusOperation) {
        if (data[0] & kPmbusOperationOn) {
          if (!ch.chip->switch_on(now).ok()) ch.error = kBootFailed;
        } else {
          ch.chip->switch_off(now);
        }
        ch.changed = true;
      } else if (command == kPmbusMfrResetPulse && data[0] == 1 && ch.chip->powered()) {
        // The reset line: the links drop while it is held, and the chip boots again.
        ch.chip->switch_off(now);
        board.notify(ch);
        if (!ch.chip->switch_on(now).ok()) ch.error = kBootFailed;
        ch.changed = true;
      }
      data.clear();
    }
  };

  // The chip's register port: a 16-bit address, then 8 data bytes in or out.
  struct RegisterPort final : I2cTarget {
    Channel& ch;
    MonitorBoard& board;
    std::vector<uint8_t> bytes;
    uint16_t address = 0;
    uint64_t value = 0;
    size_t next = 0;
    RegisterPort(Channel& c, MonitorBoard& b) : ch(c), board(b) {}
    bool select(bool read) override {
      if (!ch.chip->powered()) {
        ch.error = kChipOff;
        return false;
      }
      if (read) {
        next = 0;
        return bytes.size() == 2;
      }
      bytes.clear();
      return true;
    }
    bool write(uint8_t byte) override {
      bytes.push_back(byte);
      if (bytes.size() == 2) {
        address = static_cast<uint16_t>(bytes[0] << 8 | bytes[1]);
        if (address >= ch.chip->address_space()) {
          ch.error = kNoRegister;
          return false;
        }
        return true;
      }
      if (bytes.size() == 10) {
        value = 0;
        for (size_t i = 2; i < 10; ++i) value = value << 8 | bytes[i];
        if (const wire::NmpError e = ch.chip->check_write(address, value);
            e != wire::NmpError::kNone) {
          ch.error = e == wire::NmpError::kAddressOutOfRange ? kNoRegister : kRefused;
          return false;
        }
        return true;
      }
      return bytes.size() < 10;
    }
    uint8_t read(uint64_t* stretch_ns) override {
      *stretch_ns = 0;
      if (next == 0) {
        ch.chip->advance_thermal(board.now_ps_);
        const RegAccess r = ch.chip->read_register(address);
        if (r.error != wire::NmpError::kNone) ch.error = kNoRegister;
        value = r.value;
        *stretch_ns = board.options_.register_fetch_ns;
      }
      return next < 8 ? static_cast<uint8_t>(value >> (8 * (7 - next++))) : 0xFF;
    }
    void stop() override {
      if (bytes.size() == 10) {
        ch.chip->write_register(address, value);
        ch.changed = true;  // PORT_CTRL may hold links down
      }
      bytes.resize(std::min<size_t>(bytes.size(), 2));  // the address stays for a read
    }
  };

  std::unique_ptr<Regulator> regulator;
  std::unique_ptr<RegisterPort> port;
};

// The mux: one byte selects the channel the board talks to next.
class MuxTarget final : public I2cTarget {
 public:
  explicit MuxTarget(MonitorBoard& b) : board_(b) {}
  bool select(bool read) override { return !read; }
  bool write(uint8_t byte) override {
    if (byte >= board_.channels_.size()) return false;
    board_.selected_ = byte;
    return true;
  }
  uint8_t read(uint64_t* stretch_ns) override {
    *stretch_ns = 0;
    return static_cast<uint8_t>(board_.selected_);
  }

 private:
  MonitorBoard& board_;
};

MonitorBoard::MonitorBoard(MonitorBoardOptions options)
    : options_(options), mux_(std::make_unique<MuxTarget>(*this)) {
  root_.attach(kI2cMuxAddress, mux_.get());
}

MonitorBoard::~MonitorBoard() = default;

Status MonitorBoard::add_chip(uint32_t node, Chip* chip) {
  if (channels_.size() >= kMonitorBoardChannels)
    return make_error(Code::kResourceExhausted, 2200,
                      fmt::format("monitor board: chip {} does not fit: all {} mux channels are "
                                  "taken",
                                  node, kMonitorBoardChannels));
  auto ch = std::make_unique<Channel>();
  ch->node = node;
  ch->chip = chip;
  ch->regulator = std::make_unique<Channel::Regulator>(*ch, *this);
  ch->port = std::make_unique<Channel::RegisterPort>(*ch, *this);
  ch->bus.attach(kI2cRegulatorAddress, ch->regulator.get());
  ch->bus.attach(kI2cRegisterPortAddress, ch->port.get());
  auto at = std::lower_bound(by_node_.begin(), by_node_.end(), std::pair{node, size_t{0}});
  by_node_.insert(at, {node, channels_.size()});
  channels_.push_back(std::move(ch));
  return {};
}

bool MonitorBoard::has(uint32_t node) const {
  auto at = std::lower_bound(by_node_.begin(), by_node_.end(), std::pair{node, size_t{0}});
  return at != by_node_.end() && at->first == node;
}

void MonitorBoard::notify(Channel& ch) {
  if (power_changed_ != nullptr && *power_changed_) (*power_changed_)(ch.node);
}

MonitorBoard::Outcome MonitorBoard::execute(const wire::OobRequest& r, uint64_t now_ps,
                                            const PowerChanged& power_changed) {
  Outcome out;
  out.response.op = r.op;
  out.response.chip = r.chip;
  out.response.tag = r.tag;
  auto at = std::lower_bound(by_node_.begin(), by_node_.end(), std::pair{r.chip, size_t{0}});
  if (at == by_node_.end() || at->first != r.chip) {
    out.response.error_id = kNoChip;
    return out;
  }
  now_ps_ = now_ps;
  power_changed_ = &power_changed;
  Channel& ch = *channels_[at->second];
  ch.error = 0;
  ch.changed = false;
  auto on_channel = [&](auto&& transfer) {
    out.bus.append(transfer);
    return out.bus.acked;
  };
  if (r.op != wire::OobOp::kStatus) {
    const uint8_t select = static_cast<uint8_t>(at->second);
    on_channel(root_.write(kI2cMuxAddress, std::span(&select, 1)));
  }
  std::array<uint8_t, 8> in{};
  switch (r.op) {
    case wire::OobOp::kStatus:
      break;
    case wire::OobOp::kPowerOn:
    case wire::OobOp::kPowerOff: {
      const std::array<uint8_t, 2> cmd{
          kPmbusOperation,
          static_cast<uint8_t>(r.op == wire::OobOp::kPowerOn ? kPmbusOperationOn : 0)};
      on_channel(ch.bus.write(kI2cRegulatorAddress, cmd));
      break;
    }
    case wire::OobOp::kReset: {
      const std::array<uint8_t, 2> cmd{kPmbusMfrResetPulse, 1};
      if (!ch.chip->powered()) {
        ch.error = kChipOff;  // nothing to reset; the board does not touch the line
        break;
      }
      on_channel(ch.bus.write(kI2cRegulatorAddress, cmd));
      break;
    }
    case wire::OobOp::kReadTemperature:
    case wire::OobOp::kReadVoltage: {
      const uint8_t cmd =
          r.op == wire::OobOp::kReadTemperature ? kPmbusReadTemperature1 : kPmbusReadVout;
      if (on_channel(ch.bus.write_read(kI2cRegulatorAddress, std::span(&cmd, 1),
                                       std::span(in.data(), 2)))) {
        const auto w = static_cast<uint16_t>(in[0] | in[1] << 8);
        out.response.value = r.op == wire::OobOp::kReadTemperature
                                 ? static_cast<uint64_t>(int64_t{static_cast<int16_t>(w)} * 10)
                                 : w;
      }
      break;
    }
    case wire::OobOp::kReadRegister: {
      const std::array<uint8_t, 2> addr{static_cast<uint8_t>(r.address >> 8),
                                        static_cast<uint8_t>(r.address)};
      if (on_channel(ch.bus.write_read(kI2cRegisterPortAddress, addr, in)))
        for (uint8_t b : in) out.response.value = out.response.value << 8 | b;
      break;
    }
    case wire::OobOp::kWriteRegister: {
      std::array<uint8_t, 10> bytes{static_cast<uint8_t>(r.address >> 8),
                                    static_cast<uint8_t>(r.address)};
      for (size_t i = 0; i < 8; ++i) bytes[2 + i] = static_cast<uint8_t>(r.value >> (8 * (7 - i)));
      on_channel(ch.bus.write(kI2cRegisterPortAddress, bytes));
      out.response.value = r.value;
      break;
    }
  }
  if (ch.changed) notify(ch);
  power_changed_ = nullptr;
  out.response.error_id = ch.error;
  if (ch.error == 0 && r.op != wire::OobOp::kStatus && !out.bus.acked)
    out.response.error_id = kChipOff;  // a NACK no target explained: nobody answered
  out.response.flags = ch.chip->powered() ? wire::kOobPowered : 0;
  out.response.bus_ns = out.bus.ns();
  if (out.response.error_id != 0) out.response.value = 0;
  return out;
}

}  // namespace galaxy::chip
