#include "chip/register_names.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "chip/registers.h"

namespace galaxy::chip {

namespace {

struct NamedRegister {
  const char* name;
  uint16_t addr;
};
constexpr NamedRegister kCommonRegisters[] = {
    {"CHIP_IDENT", reg::kChipIdent},
    {"CHIP_ID", reg::kChipId},
    {"CHIP_CTRL", reg::kChipCtrl},
    {"M_KEY", reg::kMKey},
    {"MKEY_VIOLATIONS", reg::kMKeyViolations},
    {"TEMPERATURE", reg::kTemperature},
    {"FAULT_ENABLE", reg::kFaultEnable},
    {"FAULT_MASK", reg::kFaultMask},
    {"FAULT_ROUTE_LO", reg::kFaultRouteLo},
    {"FAULT_ROUTE_HI", reg::kFaultRouteHi},
    {"FAULT_DEST", reg::kFaultDest},
    {"FAULT_STATUS", reg::kFaultStatus},
    {"FAULTS_REPORTED", reg::kFaultsReported},
    {"NMA_DROPPED", reg::kNmaDropped},
    {"NMA_REQUESTS", reg::kNmaRequests},
    {"NMA_ERRORS", reg::kNmaErrors},
    {"BOOT_STATUS", reg::kBootStatus},
    {"DIRTY_DISCARDS", reg::kDirtyDiscards},
    {"SCRATCH", reg::kScratch},
    {"FAULT_ROUTE_EXT", reg::kFaultRouteExt},
    {"MKEY_LEASE", reg::kMKeyLease},
    {"TEMP_LIMIT", reg::kTempLimit},
    {"VOLTAGE", reg::kVoltage},
    {"POWER_CYCLES", reg::kPowerCycles},
    {"RT_SELECT", reg::kRtSelect},
    {"RT_DATA", reg::kRtData},
    {"RT_ENTRIES_WRITTEN", reg::kRtEntriesWritten},
    {"RT_STATUS", reg::kRtStatus},
    {"VC_RULES", reg::kVcRules},
};
constexpr NamedRegister kPortRegisters[] = {
    {"PORT_IDENT", reg::port::kIdent},
    {"PEER_IDENT", reg::port::kPeerIdent},
    {"LINK_STATE", reg::port::kLinkState},
    {"HANDSHAKES", reg::port::kHandshakes},
    {"RETRANSMISSIONS", reg::port::kRetransmissions},
    {"RETRANS_RATE", reg::port::kRetransRate},
    {"CRC_ERRORS", reg::port::kCrcErrors},
    {"TX_FLITS", reg::port::kTxFlits},
    {"RX_FLITS", reg::port::kRxFlits},
    {"DIRTY_DISCARDS", reg::port::kDirtyDiscards},
    {"TX_PACKETS", reg::port::kTxPackets},
    {"RX_PACKETS", reg::port::kRxPackets},
    {"OUTPUT_LOAD", reg::port::kOutputLoad},
    {"VC_BUFFERED", reg::port::kVcBuffered},
    {"VC_CREDITS", reg::port::kVcCredits},
    {"CREDIT_STALLS", reg::port::kCreditStalls},
    {"PORT_CTRL", reg::port::kPortCtrl},
    {"BIST_CTRL", reg::port::kBistCtrl},
    {"BIST_STATUS", reg::port::kBistStatus},
    {"BIST_ERRORS", reg::port::kBistErrors},
    {"LINK_PARAMS", reg::port::kLinkParams},
    {"VC0_TX_PACKETS", reg::port::kVcTxPackets + 0},
    {"VC1_TX_PACKETS", reg::port::kVcTxPackets + 1},
    {"VC2_TX_PACKETS", reg::port::kVcTxPackets + 2},
    {"VC3_TX_PACKETS", reg::port::kVcTxPackets + 3},
    {"VC4_TX_PACKETS", reg::port::kVcTxPackets + 4},
    {"VC5_TX_PACKETS", reg::port::kVcTxPackets + 5},
};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<uint64_t> parse_u64(const std::string& field, const std::string& text, uint64_t max) {
  uint64_t v = 0;
  bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const char* b = text.data() + (hex ? 2 : 0);
  const char* e = text.data() + text.size();
  auto [p, ec] = std::from_chars(b, e, v, hex ? 16 : 10);
  if (text.empty() || ec != std::errc() || p != e)
    return make_error(Code::kInvalidArgument, 9160,
                      fmt::format("{} = '{}' is not a number (decimal or 0x hex)", field, text));
  if (v > max)
    return make_error(Code::kOutOfRange, 9161, fmt::format("{} = {} exceeds {}", field, text, max));
  return v;
}

Result<uint16_t> parse_register(const std::string& text, const std::string& field) {
  std::string u = upper(text);
  for (const auto& r : kCommonRegisters)
    if (u == r.name) return r.addr;
  if (u.rfind("PORT", 0) == 0 && u.find('.') != std::string::npos) {
    auto dot = u.find('.');
    auto port = parse_u64(field + " port", u.substr(4, dot - 4), kMaxSwitchPorts - 1);
    if (!port.ok()) return port.error();
    for (const auto& r : kPortRegisters)
      if (u.substr(dot + 1) == r.name) return reg::port_register(*port, r.addr);
    return make_error(
        Code::kNotFound, 9162,
        fmt::format("{} = '{}': no port register named '{}'", field, text, text.substr(dot + 1)));
  }
  if (!u.empty() && std::isdigit(static_cast<unsigned char>(u[0]))) {
    auto v = parse_u64(field, text, reg::kNrcAddressSpace - 1);
    if (!v.ok()) return v.error();
    return static_cast<uint16_t>(*v);
  }
  std::string names;
  for (const auto& r : kCommonRegisters) names += fmt::format("{} ", r.name);
  return make_error(
      Code::kNotFound, 9163,
      fmt::format("{} = '{}' is not a number, PORT<n>.<NAME> or one of: {}", field, text, names));
}

std::string register_name(uint16_t addr) {
  for (const auto& r : kCommonRegisters)
    if (r.addr == addr) return r.name;
  if (addr >= reg::kPortBase && addr < reg::kPortBase + kMaxSwitchPorts * reg::kPortStride) {
    unsigned p = (addr - reg::kPortBase) / reg::kPortStride;
    unsigned off = (addr - reg::kPortBase) % reg::kPortStride;
    for (const auto& r : kPortRegisters)
      if (r.addr == off) return fmt::format("PORT{}.{}", p, r.name);
  }
  return "";
}

}  // namespace galaxy::chip
