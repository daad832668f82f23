// galaxy reg / galaxy eeprom — one in-band register or EEPROM access to a chip (docs/system.md 2.2,
// 2.8): discovery (pipelined) finds the route, then the request goes through the Requester
// (nmd/ops.h, the same code as the daemon's /api/chips/{chip}/registers and /eeprom); the
// simulated latency is reported, and an NMA's refusal with its reason.
#include <algorithm>
#include <cstdio>

#include "chip/register_names.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"
#include "nmd/ops.h"

namespace galaxy::cli {

using chip::parse_u64;

namespace {

struct AccessOptions {
  SessionOptions session;
  std::string action;
  std::string chip;
  std::string addr;
  std::string value;
  unsigned count = 1;
  std::string bytes;
};

Status check_action(const AccessOptions& o) {
  if (o.action == "read" || o.action == "write") return {};
  return make_error(Code::kInvalidArgument, 9164,
                    fmt::format("action = '{}' is not read or write", o.action));
}

// Opens a discovered session and runs op on the chip named by --chip.
template <class Op>
Result<nlohmann::json> on_chip_here(const AccessOptions& o, Op&& op) {
  auto s = open_discovered_session(o.session);
  if (!s.ok()) return s.error();
  auto node = find_node(*s, o.chip);
  if (!node.ok()) return node.error();
  GALAXY_TRY(nmd::require_remote(*s, *node, o.chip));
  return op(*s, *node);
}

void print(const Result<nlohmann::json>& j, bool json, void (*text)(const nlohmann::json&)) {
  if (!j.ok()) return report_error(j.error(), json);
  if (json)
    std::printf("%s\n", j->dump(2).c_str());
  else
    text(*j);
}

void run_reg(AccessOptions& o) {
  const bool json = o.session.json;
  if (Status a = check_action(o); !a.ok()) return report_error(a.error(), json);
  const bool write = o.action == "write";
  if (write && o.value.empty())
    return report_error(make_error(Code::kInvalidArgument, 9166, "reg write needs --value"), json);
  Result<nlohmann::json> j = nlohmann::json();
  if (is_remote()) {
    const std::string target =
        fmt::format("/api/chips/{}/registers/{}", url_encode(o.chip), url_encode(o.addr));
    const nlohmann::json body{{"value", o.value}};
    j = write ? call_first("PUT", target, &body) : call_first("GET", target);
  } else {
    j = on_chip_here(o, [&](nmd::Session& s, uint32_t node) {
      return nmd::register_op(s, node, o.addr, write ? &o.value : nullptr);
    });
  }
  print(j, json, [](const nlohmann::json& r) {
    const uint64_t value = r["value"].get<uint64_t>();
    std::printf("%s chip %u (%s) %s %s = 0x%llx (%llu); %.3f us simulated\n",
                r["action"] == "read" ? "read" : "wrote", r["chip"].get<unsigned>(),
                r["name"].get<std::string>().c_str(), r["addr"].get<std::string>().c_str(),
                r["register"].get<std::string>().c_str(), static_cast<unsigned long long>(value),
                static_cast<unsigned long long>(value), r["latency_us"].get<double>());
  });
}

void run_eeprom(AccessOptions& o) {
  const bool json = o.session.json;
  if (Status a = check_action(o); !a.ok()) return report_error(a.error(), json);
  const bool write = o.action == "write";
  auto addr = parse_u64("--addr", o.addr, 0xFFFF);
  if (!addr.ok()) return report_error(addr.error(), json);
  std::vector<uint8_t> data;
  if (write) {
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
  Result<nlohmann::json> j = nlohmann::json();
  if (is_remote()) {
    const std::string target = fmt::format("/api/chips/{}/eeprom", url_encode(o.chip));
    const nlohmann::json body{{"addr", o.addr}, {"bytes", data}};
    j = write ? call_first("PUT", target, &body)
              : call_first("GET",
                           fmt::format("{}?addr={}&count={}", target, url_encode(o.addr), o.count));
  } else {
    j = on_chip_here(o, [&](nmd::Session& s, uint32_t node) {
      return nmd::eeprom_op(s, node, *addr, o.count, write ? &data : nullptr);
    });
  }
  print(j, json, [](const nlohmann::json& r) {
    std::printf("%s %zu bytes at %s of chip %u (%s): %s; %zu packets, %.1f us simulated\n",
                r["action"] == "read" ? "read" : "wrote", r["count"].get<size_t>(),
                r["addr"].get<std::string>().c_str(), r["chip"].get<unsigned>(),
                r["name"].get<std::string>().c_str(), r["hex"].get<std::string>().c_str(),
                r["packets"].get<size_t>(), r["sim_time_us"].get<double>());
  });
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
  c->add_option("--count", o->count, "read: bytes to read (1-256)")
      ->capture_default_str()
      ->check(integer_in(1, 256));
  c->add_option("--bytes", o->bytes, "write: comma-separated byte values");
  c->callback([o]() { run_eeprom(*o); });
}

const CommandRegistrar kRegRegistrar("reg", add_reg_command, true);
const CommandRegistrar kEepromRegistrar("eeprom", add_eeprom_command, true);

}  // namespace
}  // namespace galaxy::cli
