// galaxy reg / galaxy eeprom — one in-band register or EEPROM access to a chip (SYSTEM.md 2.2,
// 2.8): discovery (pipelined) finds the route, then the request goes through the Requester; the
// simulated latency is reported, and an NMA's refusal with its reason.
#include <algorithm>
#include <cstdio>

#include "chip/register_names.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"

namespace galaxy::cli {

using chip::parse_register;
using chip::parse_u64;
using chip::register_name;

namespace {

// An NMA's refusal: the error with its id, plus the NMA's reason and the address it names.
void report_refusal(const nm::MgmtReply& reply, bool json) {
  const Error& e = reply.status.error();
  if (!json) return report_error(e, false);
  nlohmann::json j{{"error",
                    {{"id", fmt::format("E{:04}", e.id)},
                     {"code", code_name(e.code)},
                     {"message", e.message},
                     {"nma_error", wire::nmp_error_name(reply.response.data.error)},
                     {"error_address", reply.response.data.error_address},
                     {"latency_us", static_cast<double>(reply.latency) / nm::kUs}}}};
  std::printf("%s\n", j.dump(2).c_str());
  set_exit_code(2);
}

struct AccessOptions {
  SessionOptions session;
  std::string action;
  std::string chip;
  std::string addr;
  std::string value;
  unsigned count = 1;
  std::string bytes;
};

// Checks the action, opens the session with pipelined discovery and resolves --chip to a remote
// chip's node.
struct Prepared {
  Session session;
  uint32_t node = 0;
};
Result<Prepared> prepare(const AccessOptions& o) {
  if (o.action != "read" && o.action != "write")
    return make_error(Code::kInvalidArgument, 9164,
                      fmt::format("action = '{}' is not read or write", o.action));
  auto s = open_discovered_session(o.session);
  if (!s.ok()) return s.error();
  auto node = find_node(*s, o.chip);
  if (!node.ok()) return node.error();
  if (*node == s->discovery.map.server_node)
    return make_error(Code::kInvalidArgument, 9165,
                      fmt::format("--chip = '{}' is the management server's own NIC; in-band "
                                  "access needs a remote chip",
                                  o.chip));
  return Prepared{std::move(*s), *node};
}

nm::MgmtReply run_one(Session& s, const nm::MgmtRequest& q) {
  nm::MgmtReply got;
  s.requester->submit(q, [&](const nm::MgmtReply& r) { got = r; });
  s.requester->run();
  return got;
}

void run_reg(AccessOptions& o) {
  const bool json = o.session.json;
  auto prepared = prepare(o);
  if (!prepared.ok()) return report_error(prepared.error(), json);
  Session& s = prepared->session;
  const uint32_t node = prepared->node;
  auto addr = parse_register(o.addr);
  if (!addr.ok()) return report_error(addr.error(), json);
  const nm::MgmtTarget& t = s.discovery.map.target[node];
  nm::MgmtRequest q;
  uint64_t value = 0;
  if (o.action == "write") {
    if (o.value.empty())
      return report_error(make_error(Code::kInvalidArgument, 9166, "reg write needs --value"),
                          json);
    auto v = parse_u64("--value", o.value, UINT64_MAX);
    if (!v.ok()) return report_error(v.error(), json);
    value = *v;
    q = nm::MgmtRequest::write(t, *addr, value);
  } else {
    q = nm::MgmtRequest::read(t, *addr);
  }
  nm::MgmtReply r = run_one(s, q);
  if (!r.status.ok()) {
    if (r.response.nmp_type == wire::NmpType::kRegError) return report_refusal(r, json);
    return report_error(r.status.error(), json);
  }
  if (o.action == "read") value = r.response.data.value[0];
  const nm::FabricMap& m = s.discovery.map;
  nlohmann::json j{{"action", o.action},
                   {"chip", m.chip_id[node]},
                   {"name", s.plan().name(m.chip_id[node])},
                   {"hops", m.hops[node]},
                   {"addr", fmt::format("0x{:03x}", *addr)},
                   {"register", register_name(*addr)},
                   {"value", value},
                   {"value_hex", fmt::format("0x{:x}", value)},
                   {"latency_us", static_cast<double>(r.latency) / nm::kUs},
                   {"attempts", r.attempts}};
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s chip %u (%s) 0x%03x %s = 0x%llx (%llu); %.3f us simulated\n",
                o.action == "read" ? "read" : "wrote", m.chip_id[node],
                j["name"].get<std::string>().c_str(), *addr, register_name(*addr).c_str(),
                static_cast<unsigned long long>(value), static_cast<unsigned long long>(value),
                j["latency_us"].get<double>());
  }
}

void run_eeprom(AccessOptions& o) {
  const bool json = o.session.json;
  auto prepared = prepare(o);
  if (!prepared.ok()) return report_error(prepared.error(), json);
  Session& s = prepared->session;
  const uint32_t node = prepared->node;
  auto addr = parse_u64("--addr", o.addr, 0xFFFF);
  if (!addr.ok()) return report_error(addr.error(), json);
  std::vector<uint8_t> data;
  if (o.action == "write") {
    if (o.bytes.empty())
      return report_error(
          make_error(Code::kInvalidArgument, 9167, "eeprom write needs --bytes b0,b1,..."), json);
    size_t pos = 0;
    while (pos <= o.bytes.size()) {
      size_t comma = std::min(o.bytes.find(',', pos), o.bytes.size());
      auto b = parse_u64("--bytes", o.bytes.substr(pos, comma - pos), 0xFF);
      if (!b.ok()) return report_error(b.error(), json);
      data.push_back(static_cast<uint8_t>(*b));
      pos = comma + 1;
    }
  }
  const size_t n = o.action == "write" ? data.size() : o.count;
  if (n == 0 || n > 256 || *addr + n > 0x10000)
    return report_error(
        make_error(
            Code::kOutOfRange, 9168,
            fmt::format("{} bytes at 0x{:04x}: 1-256 bytes within the 64 KiB EEPROM", n, *addr)),
        json);
  // At most six bytes per packet (SYSTEM.md 2.2); packets one after another.
  const nm::MgmtTarget& t = s.discovery.map.target[node];
  std::vector<uint8_t> got;
  nlohmann::json latencies = nlohmann::json::array();
  nm::Picoseconds start = s.port->now();
  for (size_t off = 0; off < n; off += wire::kMaxEepromBytesPerPacket) {
    nm::MgmtRequest q;
    q.target = t;
    q.type = o.action == "write" ? wire::NmpType::kEepromWriteRequest
                                 : wire::NmpType::kEepromReadRequest;
    q.data.count = static_cast<uint8_t>(std::min<size_t>(wire::kMaxEepromBytesPerPacket, n - off));
    for (uint8_t i = 0; i < q.data.count; ++i) {
      q.data.address[i] = static_cast<uint16_t>(*addr + off + i);
      if (o.action == "write") q.data.bytes[i] = data[off + i];
    }
    nm::MgmtReply r = run_one(s, q);
    if (!r.status.ok()) {
      if (r.response.nmp_type == wire::NmpType::kEepromError) return report_refusal(r, json);
      return report_error(r.status.error(), json);
    }
    latencies.push_back(static_cast<double>(r.latency) / nm::kUs);
    for (uint8_t i = 0; i < q.data.count && o.action == "read"; ++i)
      got.push_back(r.response.data.bytes[i]);
  }
  const std::vector<uint8_t>& bytes = o.action == "write" ? data : got;
  std::string hex;
  for (uint8_t b : bytes) hex += fmt::format("{:02x}", b);
  const nm::FabricMap& m = s.discovery.map;
  nlohmann::json j{{"action", o.action},
                   {"chip", m.chip_id[node]},
                   {"name", s.plan().name(m.chip_id[node])},
                   {"hops", m.hops[node]},
                   {"addr", fmt::format("0x{:04x}", *addr)},
                   {"count", bytes.size()},
                   {"bytes", bytes},
                   {"hex", hex},
                   {"packets", latencies.size()},
                   {"packet_latency_us", latencies},
                   {"sim_time_us", static_cast<double>(s.port->now() - start) / nm::kUs}};
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s %zu bytes at 0x%04llx of chip %u (%s): %s; %zu packets, %.1f us simulated\n",
                o.action == "read" ? "read" : "wrote", bytes.size(),
                static_cast<unsigned long long>(*addr), m.chip_id[node],
                j["name"].get<std::string>().c_str(), hex.c_str(), latencies.size(),
                j["sim_time_us"].get<double>());
  }
}

void add_common(CLI::App* c, AccessOptions& o) {
  add_session_options(c, o.session);
  c->add_option("action", o.action, "read or write")->required();
  c->add_option("--chip", o.chip, "chip id, chip name or nic:<index>")->required();
}

void add_reg_command(CLI::App& app) {
  auto o = std::make_shared<AccessOptions>();
  auto* c = app.add_subcommand("reg", "Read or write one register of a chip in-band");
  add_common(c, *o);
  c->add_option("--addr", o->addr,
                "address (0x hex or decimal), a name (SCRATCH, CHIP_ID, TEMPERATURE, ...) or "
                "PORT<n>.<NAME> (e.g. PORT3.LINK_STATE)")
      ->required();
  c->add_option("--value", o->value, "write: the 64-bit value (0x hex or decimal)");
  c->callback([o]() { run_reg(*o); });
}

void add_eeprom_command(CLI::App& app) {
  auto o = std::make_shared<AccessOptions>();
  auto* c = app.add_subcommand("eeprom", "Read or write bytes of a chip's EEPROM in-band");
  add_common(c, *o);
  c->add_option("--addr", o->addr, "first byte address (0x hex or decimal)")->required();
  c->add_option("--count", o->count, "read: bytes to read (1-256)")->capture_default_str();
  c->add_option("--bytes", o->bytes, "write: comma-separated byte values");
  c->callback([o]() { run_eeprom(*o); });
}

const CommandRegistrar kRegRegistrar("reg", add_reg_command);
const CommandRegistrar kEepromRegistrar("eeprom", add_eeprom_command);

}  // namespace
}  // namespace galaxy::cli
