// galaxy config — configuration (SYSTEM.md 2.5.1):
//   config apply FILE             bulk register writes from a JSON file, pipelined across chips
//                                  (nm/config.h); every refused entry reported with its chip,
//                                  address and the NMA's reason, the rest still applied.
//   config eeprom-defaults --chip X   the chip's configuration registers as its EEPROM boot
//                                  image, written in-band and read back.
// File: {"writes": [{"chip": "<id|name|nic:i|all-nrc|all-nic>",
//                    "addr": "0x012|SCRATCH|PORT3.LINK_PARAMS", "value": 123 | "0x7b"}, ...]}
#include <cstdio>
#include <fstream>

#include "chip/register_names.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nm/config.h"
#include "nmd/ops.h"

namespace galaxy::cli {

using chip::parse_register;
using chip::parse_u64;
using chip::register_name;

namespace {

struct ConfigOptions {
  SessionOptions session;
  std::string file;
  std::string chip;
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(Code::kIoError, 9220, fmt::format("config file '{}' cannot be read", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Result<nlohmann::json> apply_here(const ConfigOptions& o, const std::string& text) {
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return sess.error();
  return nmd::config_apply_op(*sess, text);
}

void run_apply(ConfigOptions& o) {
  const bool json = o.session.json;
  auto text = read_file(o.file);
  if (!text.ok()) return report_error(text.error(), json);
  Result<nlohmann::json> r = nlohmann::json();
  if (is_remote()) {
    nlohmann::json body = nlohmann::json::parse(*text, nullptr, false);
    if (body.is_discarded())
      return report_error(make_error(Code::kMalformed, 9221, fmt::format("{}: not JSON", o.file)),
                          json);
    r = call_first("POST", "/api/config/writes", &body);
  } else {
    r = apply_here(o, *text);
  }
  if (!r.ok()) {
    Error e = r.error();
    e.message = fmt::format("{}: {}", o.file, e.message);
    return report_error(e, json);
  }
  nlohmann::json& j = *r;
  j["file"] = o.file;
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& f : j["failures"])
      std::printf("entry %zu: chip %u (%s) %s %s refused: %s\n", f["entry"].get<size_t>(),
                  f["chip"].get<unsigned>(), f["name"].get<std::string>().c_str(),
                  f["addr"].get<std::string>().c_str(), f["register"].get<std::string>().c_str(),
                  f["message"].get<std::string>().c_str());
    std::printf(
        "%zu writes: %llu applied, %zu failed; %llu requests, %.1f us simulated\n",
        j["writes"].get<size_t>(), static_cast<unsigned long long>(j["applied"].get<uint64_t>()),
        j["failed"].get<size_t>(), static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
        j["sim_time_us"].get<double>());
  }
  if (j["failed"].get<size_t>() > 0) set_exit_code(1);
}

void run_eeprom_defaults(ConfigOptions& o) {
  const bool json = o.session.json;
  if (is_remote())
    return report_error(make_error(Code::kUnsupported, 9224,
                                   "config eeprom-defaults does not run against a daemon yet"),
                        json);
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return report_error(sess.error(), json);
  Session& s = *sess;
  auto node = find_node(s, o.chip);
  if (!node.ok()) return report_error(node.error(), json);
  const nm::FabricMap& m = s.discovery.map;
  auto r = nm::write_eeprom_defaults(*s.requester, m, *node);
  if (!r.ok()) return report_error(r.error(), json);
  nlohmann::json regs = nlohmann::json::array();
  for (const auto& reg : r->image.registers)
    regs.push_back({{"addr", fmt::format("0x{:03x}", reg.address)},
                    {"register", register_name(reg.address)},
                    {"value", fmt::format("0x{:x}", reg.value)}});
  nlohmann::json j{{"chip", m.chip_id[*node]},
                   {"name", m.topology.name(*node)},
                   {"bytes", r->bytes},
                   {"packets", r->packets},
                   {"verified", r->verified},
                   {"write_sim_time_us", static_cast<double>(r->write_time) / nm::kUs},
                   {"verify_sim_time_us", static_cast<double>(r->verify_time) / nm::kUs},
                   {"registers", regs}};
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "chip %u (%s): boot image of %zu registers, %zu bytes, written in %.1f ms and "
        "read back in %.1f ms (simulated), %llu packets: %s\n",
        m.chip_id[*node], m.topology.name(*node).c_str(), r->image.registers.size(), r->bytes,
        static_cast<double>(r->write_time) / nm::kMs, static_cast<double>(r->verify_time) / nm::kMs,
        static_cast<unsigned long long>(r->packets),
        r->verified ? "verified" : "READ-BACK DIFFERS");
  }
  if (!r->verified) set_exit_code(1);
}

void add_config_command(CLI::App& app) {
  auto* c = app.add_subcommand("config", "Bulk register configuration and EEPROM defaults");
  c->require_subcommand(1);
  auto a = std::make_shared<ConfigOptions>();
  auto* apply = c->add_subcommand("apply", "Apply register writes from a JSON file");
  add_session_options(apply, a->session);
  apply->add_option("file", a->file, "JSON: {\"writes\": [{\"chip\", \"addr\", \"value\"}...]}")
      ->required();
  apply->callback([a]() { run_apply(*a); });
  auto e = std::make_shared<ConfigOptions>();
  auto* eeprom = c->add_subcommand(
      "eeprom-defaults", "Write a chip's configuration registers into its EEPROM as boot image");
  add_session_options(eeprom, e->session);
  eeprom->add_option("--chip", e->chip, "chip id, name or nic:<index>")->required();
  eeprom->callback([e]() { run_eeprom_defaults(*e); });
}

const CommandRegistrar kRegistrar("config", add_config_command, true);

}  // namespace
}  // namespace galaxy::cli
