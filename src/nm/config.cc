#include "nm/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "chip/register_names.h"
#include "chip/registers.h"

namespace galaxy::nm {

namespace {

namespace reg = chip::reg;

bool refused(const MgmtReply& r) {
  return r.response.nmp_type == wire::NmpType::kRegError ||
         r.response.nmp_type == wire::NmpType::kEepromError;
}

// One chip's writes, sent as a chain: the next packet goes when the previous one answered.
class Applier {
 public:
  Applier(Requester& requester, const FabricMap& map, const std::vector<ConfigWrite>& writes,
          ConfigApplyResult& result)
      : requester_(requester), map_(map), writes_(writes), result_(result) {}

  void add(uint32_t node, size_t index) { chips_[node].entries.push_back(index); }
  void start() {
    for (auto& [node, chip] : chips_) send(chip);
  }

 private:
  struct Chip {
    std::vector<size_t> entries;
    size_t pos = 0;
    unsigned singles = 0;  // entries to send alone (after a refused pair)
  };

  void send(Chip& c) {
    if (c.pos >= c.entries.size()) return;
    const ConfigWrite& a = writes_[c.entries[c.pos]];
    const MgmtTarget& t = map_.target[a.node];
    if (c.singles == 0 && c.pos + 1 < c.entries.size()) {
      const ConfigWrite& b = writes_[c.entries[c.pos + 1]];
      requester_.submit(MgmtRequest::write2(t, a.addr, a.value, b.addr, b.value),
                        [this, &c](const MgmtReply& r) { answered(c, r, 2); });
    } else {
      requester_.submit(MgmtRequest::write(t, a.addr, a.value),
                        [this, &c](const MgmtReply& r) { answered(c, r, 1); });
    }
  }

  void answered(Chip& c, const MgmtReply& r, unsigned count) {
    if (r.status.ok()) {
      result_.applied += count;
      c.pos += count;
      if (c.singles) --c.singles;
      return send(c);
    }
    if (!refused(r)) {
      // The chip stopped answering (after the Requester's retries): the rest would only wait
      // out the same timeout.
      for (; c.pos < c.entries.size(); ++c.pos) fail(c.entries[c.pos], r.status, "");
      return;
    }
    if (count == 2) {
      c.singles = 2;  // all or nothing: find out which one the NMA refuses
      return send(c);
    }
    fail(c.entries[c.pos], r.status, std::string(wire::nmp_error_name(r.response.data.error)));
    ++c.pos;
    if (c.singles) --c.singles;
    send(c);
  }

  void fail(size_t index, const Status& s, std::string nma) {
    result_.failures.push_back({writes_[index], s, std::move(nma)});
  }

  Requester& requester_;
  const FabricMap& map_;
  const std::vector<ConfigWrite>& writes_;
  ConfigApplyResult& result_;
  std::map<uint32_t, Chip> chips_;  // node order: stable addresses for the callbacks
};

}  // namespace

ConfigApplyResult apply_writes(Requester& requester, const FabricMap& map,
                               const std::vector<ConfigWrite>& writes) {
  ConfigApplyResult result;
  const uint64_t sent0 = requester.stats().sent;
  const Picoseconds t0 = requester.port().now();
  Applier applier(requester, map, writes, result);
  for (size_t i = 0; i < writes.size(); ++i) {
    const ConfigWrite& w = writes[i];
    if (w.node >= map.num_nodes() || w.node == map.server_node) {
      result.failures.push_back(
          {w,
           make_error(Code::kNotFound, 5440,
                      fmt::format("config entry {}: node {} is not a remote chip of the map",
                                  w.entry, w.node)),
           ""});
      continue;
    }
    applier.add(w.node, i);
  }
  applier.start();
  requester.run();
  std::stable_sort(result.failures.begin(), result.failures.end(),
                   [](const auto& a, const auto& b) { return a.write.entry < b.write.entry; });
  result.requests = requester.stats().sent - sent0;
  result.elapsed = requester.port().now() - t0;
  return result;
}

std::vector<uint16_t> default_registers(const FabricMap& map, uint32_t node) {
  std::vector<uint16_t> out{reg::kChipId, reg::kChipCtrl, reg::kFaultEnable, reg::kFaultMask,
                            reg::kScratch};
  if (node >= map.num_nodes()) return out;
  for (uint8_t p = 0; p < map.topology.num_ports(node); ++p)
    if (map.topology.peer({node, p})) out.push_back(reg::port_register(p, reg::port::kLinkParams));
  return out;
}

Result<chip::BootImage> read_defaults(Requester& requester, const FabricMap& map, uint32_t node) {
  if (node >= map.num_nodes() || node == map.server_node)
    return make_error(
        Code::kNotFound, 5441,
        fmt::format("EEPROM defaults: node {} is not a remote chip of the map", node));
  std::vector<uint16_t> addrs = default_registers(map, node);
  chip::BootImage image;
  for (size_t i = 0; i < addrs.size(); i += 2) {
    const MgmtTarget& t = map.target[node];
    MgmtReply r =
        call(requester, i + 1 < addrs.size() ? MgmtRequest::read2(t, addrs[i], addrs[i + 1])
                                             : MgmtRequest::read(t, addrs[i]));
    if (!r.status.ok()) return r.status.error();
    image.registers.push_back({addrs[i], r.response.data.value[0]});
    if (i + 1 < addrs.size()) image.registers.push_back({addrs[i + 1], r.response.data.value[1]});
  }
  return image;
}

Status write_eeprom(Requester& requester, const FabricMap& map, uint32_t node, uint16_t addr,
                    std::span<const uint8_t> bytes) {
  if (node >= map.num_nodes() || node == map.server_node ||
      addr + bytes.size() > chip::kEepromBytes)
    return make_error(Code::kOutOfRange, 5442,
                      fmt::format("EEPROM write of {} bytes at 0x{:04x} to node {}: not a remote "
                                  "chip or beyond the 64 KiB EEPROM",
                                  bytes.size(), addr, node));
  for (size_t off = 0; off < bytes.size(); off += wire::kMaxEepromBytesPerPacket) {
    MgmtRequest q;
    q.target = map.target[node];
    q.type = wire::NmpType::kEepromWriteRequest;
    q.data.count =
        static_cast<uint8_t>(std::min<size_t>(wire::kMaxEepromBytesPerPacket, bytes.size() - off));
    for (uint8_t i = 0; i < q.data.count; ++i) {
      q.data.address[i] = static_cast<uint16_t>(addr + off + i);
      q.data.bytes[i] = bytes[off + i];
    }
    MgmtReply r = call(requester, q);
    if (!r.status.ok()) return r.status.error();
  }
  return {};
}

Result<std::vector<uint8_t>> read_eeprom(Requester& requester, const FabricMap& map, uint32_t node,
                                         uint16_t addr, size_t count) {
  if (node >= map.num_nodes() || node == map.server_node || addr + count > chip::kEepromBytes)
    return make_error(Code::kOutOfRange, 5443,
                      fmt::format("EEPROM read of {} bytes at 0x{:04x} from node {}: not a remote "
                                  "chip or beyond the 64 KiB EEPROM",
                                  count, addr, node));
  std::vector<uint8_t> out;
  out.reserve(count);
  for (size_t off = 0; off < count; off += wire::kMaxEepromBytesPerPacket) {
    MgmtRequest q;
    q.target = map.target[node];
    q.type = wire::NmpType::kEepromReadRequest;
    q.data.count =
        static_cast<uint8_t>(std::min<size_t>(wire::kMaxEepromBytesPerPacket, count - off));
    for (uint8_t i = 0; i < q.data.count; ++i)
      q.data.address[i] = static_cast<uint16_t>(addr + off + i);
    MgmtReply r = call(requester, q);
    if (!r.status.ok()) return r.status.error();
    for (uint8_t i = 0; i < q.data.count; ++i) out.push_back(r.response.data.bytes[i]);
  }
  return out;
}

Result<chip::BootImage> read_boot_image(Requester& requester, const FabricMap& map, uint32_t node) {
  return chip::read_boot_image(
      [&](uint16_t addr, size_t count, std::vector<uint8_t>* out) -> Status {
        auto bytes = read_eeprom(requester, map, node, addr, count);
        if (!bytes.ok()) return bytes.error();
        *out = std::move(*bytes);
        return {};
      });
}

Result<EepromDefaultsResult> write_eeprom_defaults(Requester& requester, const FabricMap& map,
                                                   uint32_t node) {
  auto image = read_defaults(requester, map, node);
  if (!image.ok()) return image.error();
  EepromDefaultsResult out;
  out.image = std::move(*image);
  std::vector<uint8_t> bytes = chip::encode_boot_image(out.image);
  out.bytes = bytes.size();
  const uint64_t sent0 = requester.stats().sent;
  Picoseconds t0 = requester.port().now();
  Status w = write_eeprom(requester, map, node, 0, bytes);
  if (!w.ok()) return w.error();
  Picoseconds t1 = requester.port().now();
  auto back = read_eeprom(requester, map, node, 0, bytes.size());
  if (!back.ok()) return back.error();
  out.write_time = t1 - t0;
  out.verify_time = requester.port().now() - t1;
  out.packets = requester.stats().sent - sent0;
  auto decoded = chip::decode_boot_image(*back);
  out.verified = *back == bytes && decoded.ok() && *decoded == out.image;
  return out;
}

}  // namespace galaxy::nm

namespace galaxy::nm {

namespace {
// A field given as a string or as a number, as text.
std::string field_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : galaxy::json_text(v);
}
}  // namespace

Result<std::vector<ConfigEntry>> parse_config(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("writes") || !j["writes"].is_array())
    return make_error(Code::kMalformed, 5450, "config: not JSON of the form {\"writes\": [...]}");
  std::vector<ConfigEntry> out;
  size_t i = 0;
  for (const auto& e : j["writes"]) {
    if (!e.is_object() || !e.contains("chip") || !e.contains("addr") || !e.contains("value"))
      return make_error(
          Code::kMalformed, 5451,
          fmt::format("config: writes[{}] needs \"chip\", \"addr\" and \"value\"", i));
    auto addr = chip::parse_register(field_text(e.at("addr")), fmt::format("writes[{}].addr", i));
    if (!addr.ok()) return addr.error();
    auto value =
        chip::parse_u64(fmt::format("writes[{}].value", i), field_text(e.at("value")), UINT64_MAX);
    if (!value.ok()) return value.error();
    out.push_back({field_text(e.at("chip")), *addr, *value, i});
    ++i;
  }
  return out;
}

}  // namespace galaxy::nm
