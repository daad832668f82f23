// galaxy config — configuration (docs/system.md 2.5.1):
//   config apply FILE             bulk register writes from a JSON file, pipelined across chips
//                                  (nm/config.h); every refused entry reported with its chip,
//                                  address and the NMA's reason, the rest still applied.
//   config eeprom-defaults --chip X   the chip's configuration registers as its EEPROM boot
//                                  image, written in-band and read back.
// File: {"writes": [{"chip": "<id|name|nic:i|all-nrc|all-nic>",
//                    "addr": "0x012|SCRATCH|PORT3.LINK_PARAMS", "value": 123 | "0x7b"}, ...]}
#include <cstdio>
#include <fstream>

#include "base/json_text.h"
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
    std::printf("%s\n", json_text(j, 2).c_str());
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
  Result<nlohmann::json> r = nlohmann::json();
  if (is_remote()) {
    r = call_first("POST", fmt::format("/api/chips/{}/eeprom/defaults", url_encode(o.chip)),
                   nullptr);
  } else {
    auto sess = open_discovered_session(o.session);
    if (!sess.ok()) return report_error(sess.error(), json);
    auto node = find_node(*sess, o.chip);
    if (!node.ok()) return report_error(node.error(), json);
    r = nmd::eeprom_defaults_op(*sess, *node);
  }
  if (!r.ok()) return report_error(r.error(), json);
  const nlohmann::json& j = *r;
  if (json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    std::printf(
        "chip %u (%s): boot image of %zu registers, %zu bytes, written in %.1f ms and "
        "read back in %.1f ms (simulated), %llu packets: %s\n",
        j["chip"].get<unsigned>(), j["name"].get<std::string>().c_str(), j["registers"].size(),
        j["bytes"].get<size_t>(), j["write_sim_time_us"].get<double>() / 1e3,
        j["verify_sim_time_us"].get<double>() / 1e3,
        static_cast<unsigned long long>(j["packets"].get<uint64_t>()),
        j["verified"].get<bool>() ? "verified" : "READ-BACK DIFFERS");
  }
  if (!j["verified"].get<bool>()) set_exit_code(1);
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

const CommandRegistrar kConfigRegistrar("config", add_config_command, true);

}  // namespace
}  // namespace galaxy::cli
