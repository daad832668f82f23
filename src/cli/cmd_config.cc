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
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nm/config.h"

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

Result<std::vector<nm::ConfigWrite>> parse_file(const Session& s, const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(Code::kIoError, 9220, fmt::format("config file '{}' cannot be read", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto entries = nm::parse_config(text);
  if (!entries.ok())
    return make_error(entries.error().code, 9221,
                      fmt::format("{}: {}", path, entries.error().message));
  const nm::FabricMap& m = s.discovery.map;
  std::vector<nm::ConfigWrite> out;
  for (const auto& e : *entries) {
    if (e.chip == "all-nrc" || e.chip == "all-nic") {
      const bool nic = e.chip == "all-nic";
      for (uint32_t v = 0; v < m.num_nodes(); ++v)
        if (m.topology.is_nic(v) == nic && v != m.server_node)
          out.push_back({v, e.addr, e.value, e.index});
    } else {
      auto node = find_node(s, e.chip);
      if (!node.ok())
        return make_error(node.error().code, 9223,
                          fmt::format("writes[{}].chip: {}", e.index, node.error().message));
      out.push_back({*node, e.addr, e.value, e.index});
    }
  }
  return out;
}

void run_apply(ConfigOptions& o) {
  const bool json = o.session.json;
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return report_error(sess.error(), json);
  Session& s = *sess;
  auto writes = parse_file(s, o.file);
  if (!writes.ok()) return report_error(writes.error(), json);
  const nm::FabricMap& m = s.discovery.map;
  nm::ConfigApplyResult r = nm::apply_writes(*s.requester, m, *writes);
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : r.failures) {
    const Error& e = f.status.error();
    failures.push_back({{"entry", f.write.entry},
                        {"chip", m.chip_id[f.write.node]},
                        {"name", m.topology.name(f.write.node)},
                        {"addr", fmt::format("0x{:03x}", f.write.addr)},
                        {"register", register_name(f.write.addr)},
                        {"value", f.write.value},
                        {"nma_error", f.nma_error},
                        {"id", fmt::format("E{:04}", e.id)},
                        {"message", e.message}});
  }
  nlohmann::json j{
      {"file", o.file},         {"writes", writes->size()},
      {"applied", r.applied},   {"failed", r.failures.size()},
      {"requests", r.requests}, {"sim_time_us", static_cast<double>(r.elapsed) / nm::kUs},
      {"failures", failures}};
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& f : failures)
      std::printf("entry %zu: chip %u (%s) %s %s refused: %s\n", f["entry"].get<size_t>(),
                  f["chip"].get<unsigned>(), f["name"].get<std::string>().c_str(),
                  f["addr"].get<std::string>().c_str(), f["register"].get<std::string>().c_str(),
                  f["message"].get<std::string>().c_str());
    std::printf("%zu writes: %llu applied, %zu failed; %llu requests, %.1f us simulated\n",
                writes->size(), static_cast<unsigned long long>(r.applied), r.failures.size(),
                static_cast<unsigned long long>(r.requests),
                static_cast<double>(r.elapsed) / nm::kUs);
  }
  if (!r.failures.empty()) set_exit_code(1);
}

void run_eeprom_defaults(ConfigOptions& o) {
  const bool json = o.session.json;
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

const CommandRegistrar kRegistrar("config", add_config_command);

}  // namespace
}  // namespace galaxy::cli
