// galaxy oob — one request to a chip through its chassis's monitor board, the out-of-band path
// (docs/management.md "Out-of-band path"): power on and off, reset, temperature, voltage, a
// register over I2C. No discovery: the board reaches a chip that is off or cut off in band. The
// same operation as the daemon's POST /api/chips/{chip}/oob (nmd/oob.h).
#include <cstdio>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nmd/oob.h"

namespace galaxy::cli {

namespace {

struct OobOptions {
  SessionOptions session;
  std::string operation;
  std::string chip;
  std::string reg;
  std::string value;
};

std::string operations_help() {
  std::string h = "one of:";
  for (const nmd::OobCommand& c : nmd::oob_commands())
    h += fmt::format("\n  {:<12} {}", c.name, c.help);
  return h;
}

void print_oob(const nlohmann::json& r) {
  std::string what;
  if (r.contains("temperature_c"))
    what = fmt::format("{:.2f} °C", r["temperature_c"].get<double>());
  else if (r.contains("voltage_mv"))
    what = fmt::format("{} mV", r["voltage_mv"].get<uint64_t>());
  else if (r.contains("value"))
    what = fmt::format("{} {} = {}", r["address"].get<std::string>(),
                       r["register"].get<std::string>(), r["value"].get<std::string>());
  else
    what = "done";
  std::printf("%s chip %u (%s): %s; powered %s; I2C bus %.1f us, round trip %.1f us\n",
              r["operation"].get<std::string>().c_str(), r["chip"].get<unsigned>(),
              r["name"].get<std::string>().c_str(), what.c_str(),
              r["powered"].get<bool>() ? "yes" : "no", r["bus_us"].get<double>(),
              r["elapsed_us"].get<double>());
}

void run_oob(OobOptions& o) {
  const bool json = o.session.json;
  auto cmd = nmd::find_oob_command(o.operation);
  if (!cmd.ok()) return report_error(cmd.error(), json);
  const std::string* reg = o.reg.empty() ? nullptr : &o.reg;
  const std::string* value = o.value.empty() ? nullptr : &o.value;
  Result<nlohmann::json> j = nlohmann::json();
  if (is_remote()) {
    nlohmann::json body{{"operation", o.operation}};
    if (reg) body["register"] = *reg;
    if (value) body["value"] = *value;
    j = call_first("POST", fmt::format("/api/chips/{}/oob", url_encode(o.chip)), &body);
  } else {
    auto s = open_session(o.session);
    if (!s.ok()) return report_error(s.error(), json);
    j = nmd::oob_op(*s, o.chip, o.operation, reg, value);
  }
  if (!j.ok()) return report_error(j.error(), json);
  if (json)
    std::printf("%s\n", j->dump(2).c_str());
  else
    print_oob(*j);
}

void add_oob_command(CLI::App& app) {
  auto o = std::make_shared<OobOptions>();
  auto* c = app.add_subcommand(
      "oob", "Act on a chip through its chassis's monitor board (out-of-band, I2C)");
  add_session_options(c, o->session);
  c->add_option("operation", o->operation, operations_help())->required();
  c->add_option("--chip", o->chip, "chip id, chip name or nic:<index>")->required();
  c->add_option("--register", o->reg,
                "read/write: address (0x hex or decimal), a name (SCRATCH, TEMPERATURE, ...) "
                "or PORT<n>.<NAME>");
  c->add_option("--value", o->value, "write: the 64-bit value (0x hex or decimal)");
  c->callback([o]() { run_oob(*o); });
}

const CommandRegistrar kOobRegistrar("oob", add_oob_command, true);

}  // namespace
}  // namespace galaxy::cli
