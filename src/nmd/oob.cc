#include "nmd/oob.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/time_units.h"
#include "chip/monitor_board.h"
#include "chip/register_names.h"

namespace galaxy::nmd {

namespace {

constexpr int kLiveTimeoutMs = 3000;  // a board's bus takes milliseconds; this is far beyond

const std::vector<OobCommand> kCommands = {
    {"status", wire::OobOp::kStatus, false, false, "is the chip powered (no bus traffic)"},
    {"power-on", wire::OobOp::kPowerOn, false, false,
     "switch the chip's regulator on: it boots from its EEPROM and its links train"},
    {"power-off", wire::OobOp::kPowerOff, false, false,
     "switch the chip's regulator off: its links go down, it answers nothing in band"},
    {"reset", wire::OobOp::kReset, false, false,
     "pulse the chip's reset line: volatile state lost, boots again from its EEPROM"},
    {"temperature", wire::OobOp::kReadTemperature, false, false,
     "read the chip's temperature sensor (degrees Celsius)"},
    {"voltage", wire::OobOp::kReadVoltage, false, false,
     "read the chip's core voltage from its regulator (millivolts)"},
    {"read", wire::OobOp::kReadRegister, true, false, "read one register over I2C"},
    {"write", wire::OobOp::kWriteRegister, true, true, "write one register over I2C"},
};

// A blocking exchange with a live host's board, bounded by kLiveTimeoutMs in all.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

Result<wire::OobResponse> oob_tcp_call(const live::LiveHost& h, const wire::OobRequest& r) {
  const std::string where = fmt::format("{}:{} (host {})", h.ip, h.port, h.name);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(h.port);
  if (inet_pton(AF_INET, h.ip.c_str(), &a.sin_addr) != 1)
    return make_error(
        Code::kInvalidArgument, 5728,
        fmt::format("monitor board of host {}: ip = '{}' is not an IPv4 address", h.name, h.ip));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_error(Code::kIoError, 5729, fmt::format("socket: {}", std::strerror(errno)));
  FdCloser closer(fd);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{kLiveTimeoutMs / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return make_error(Code::kIoError, 5720,
                      fmt::format("no monitor board answers at {}: {} (is the host's fabric "
                                  "daemon running?)",
                                  where, std::strerror(errno)));
  const auto req = wire::encode_oob_request(r);
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return make_error(Code::kIoError, 5721,
                      fmt::format("monitor board at {}: send: {}", where, std::strerror(errno)));
  std::array<uint8_t, wire::kOobResponseBytes> buf{};
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = recv(fd, buf.data() + got, buf.size() - got, 0);
    if (n == 0)
      return make_error(Code::kIoError, 5730,
                        fmt::format("monitor board at {} closed the connection after {} of {} "
                                    "bytes",
                                    where, got, buf.size()));
    if (n < 0)
      return make_error(errno == EAGAIN || errno == EWOULDBLOCK ? Code::kTimeout : Code::kIoError,
                        5722,
                        fmt::format("monitor board at {}: no answer within {} ms ({})", where,
                                    kLiveTimeoutMs, std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  auto resp = wire::decode_oob_response(buf);
  if (!resp.ok()) return resp.error();
  if (resp->tag != r.tag || resp->chip != r.chip || resp->op != r.op)
    return make_error(Code::kMalformed, 5723,
                      fmt::format("monitor board at {} answered tag {} chip {} {} to tag {} chip "
                                  "{} {}",
                                  where, resp->tag, resp->chip, wire::oob_op_name(resp->op), r.tag,
                                  r.chip, wire::oob_op_name(r.op)));
  return *resp;
}

const std::vector<OobCommand>& oob_commands() {
  return kCommands;
}

Result<const OobCommand*> find_oob_command(std::string_view name) {
  std::string known;
  for (const OobCommand& c : kCommands) {
    if (c.name == name) return &c;
    known += known.empty() ? "" : ", ";
    known += c.name;
  }
  return make_error(Code::kInvalidArgument, 5724,
                    fmt::format("out-of-band operation '{}' is unknown; known: {}", name, known));
}

Result<wire::OobResponse> oob_call(Session& s, const wire::OobRequest& r, uint64_t* elapsed_ns) {
  if (s.fabric) {
    const sim::Time t0 = s.fabric->sim().now();
    auto out = s.fabric->oob(wire::encode_oob_request(r));
    *elapsed_ns = (s.fabric->sim().now() - t0) / units::kNanosecond;
    if (!out.ok()) return out.error();
    return wire::decode_oob_response(*out);
  }
  if (r.chip >= s.live_host_of.size())
    return make_error(Code::kNotFound, 5727,
                      fmt::format("out-of-band request for chip {}: the fabric has {} chips",
                                  r.chip, s.live_host_of.size()));
  const auto t0 = std::chrono::steady_clock::now();
  auto out = oob_tcp_call(s.live_hosts[s.live_host_of[r.chip]], r);
  *elapsed_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return out;
}

Result<nlohmann::json> oob_op(Session& s, const std::string& chip, std::string_view command,
                              const std::string* address, const std::string* value) {
  auto cmd = find_oob_command(command);
  if (!cmd.ok()) return cmd.error();
  auto node = s.plan().resolve(chip);
  if (!node.ok()) return node.error();
  wire::OobRequest r;
  r.op = (*cmd)->op;
  r.chip = *node;
  static std::atomic<uint32_t> next_tag{1};
  r.tag = next_tag.fetch_add(1, std::memory_order_relaxed);
  if ((*cmd)->needs_register) {
    if (address == nullptr)
      return make_error(
          Code::kInvalidArgument, 5726,
          fmt::format("out-of-band {} needs a register (a name or an address)", command));
    auto a = chip::parse_register(*address, "register");
    if (!a.ok()) return a.error();
    r.address = *a;
  }
  if ((*cmd)->needs_value) {
    if (value == nullptr)
      return make_error(Code::kInvalidArgument, 5731,
                        fmt::format("out-of-band {} needs a value", command));
    auto v = chip::parse_u64("value", *value, UINT64_MAX);
    if (!v.ok()) return v.error();
    r.value = *v;
  }
  uint64_t elapsed_ns = 0;
  auto resp = oob_call(s, r, &elapsed_ns);
  if (!resp.ok()) return resp.error();
  if (resp->error_id != 0)
    return make_error(
        chip::monitor_board_error_code(resp->error_id), resp->error_id,
        fmt::format("monitor board: {} on chip {} ({}): {}", command, r.chip, s.plan().name(r.chip),
                    chip::monitor_board_error(resp->error_id)));
  nlohmann::json j;
  j["chip"] = r.chip;
  j["name"] = s.plan().name(r.chip);
  j["operation"] = std::string(command);
  j["powered"] = (resp->flags & wire::kOobPowered) != 0;
  switch (r.op) {
    case wire::OobOp::kReadTemperature:
      j["temperature_c"] = static_cast<double>(static_cast<int64_t>(resp->value)) / 1000.0;
      break;
    case wire::OobOp::kReadVoltage:
      j["voltage_mv"] = resp->value;
      break;
    case wire::OobOp::kReadRegister:
    case wire::OobOp::kWriteRegister:
      j["address"] = fmt::format("0x{:03x}", r.address);
      j["register"] = chip::register_name(r.address);
      j["value"] = fmt::format("0x{:x}", resp->value);
      break;
    default:
      break;
  }
  j["bus_us"] = static_cast<double>(resp->bus_ns) / 1000.0;
  j["elapsed_us"] = static_cast<double>(elapsed_ns) / 1000.0;
  return j;
}

}  // namespace galaxy::nmd
