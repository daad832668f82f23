// API: one chip's registers and EEPROM in-band, its status registers read now (the device view),
// and its route table as loaded (docs/api.md).
#include <fmt/format.h>

#include "base/json_text.h"
#include "base/spec.h"
#include "chip/register_names.h"
#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd/oob.h"
#include "nmd/ops.h"

namespace galaxy::nmd {

namespace {

// Runs `op` on the chip named in the path, with the session to itself.
template <class Op>
Result<nlohmann::json> on_chip(Daemon& d, const ApiRequest& r, Op&& op) {
  const std::string& text = r.path.at("chip");
  GALAXY_TRY(d.require_galaxy("register and EEPROM access"));
  return d.with_session([&](Session& s) -> Result<nlohmann::json> {
    auto node = d.resolve(s, text);
    if (!node.ok()) return node.error();
    GALAXY_TRY(require_remote(s, *node, text));
    return op(s, *node);
  });
}

void note_write(Daemon& d, const nlohmann::json& result, const std::string& what,
                const std::string& by) {
  Event e;
  e.kind = EventKind::kConfigChange;
  e.chip = result.value("chip", -1);
  e.location = result.value("name", std::string());
  e.cause = what;
  nlohmann::json detail = result;
  detail["by"] = by;
  e.detail = json_text(detail);
  (void)d.record(std::move(e));
}

Result<nlohmann::json> reg_get(Daemon& d, const ApiRequest& r) {
  return on_chip(d, r, [&](Session& s, uint32_t node) {
    return register_op(s, node, r.path.at("addr"), nullptr);
  });
}

Result<nlohmann::json> reg_put(Daemon& d, const ApiRequest& r) {
  auto value = body_string(r, "value", true);
  if (!value.ok()) return value.error();
  auto out = on_chip(d, r, [&](Session& s, uint32_t node) {
    return register_op(s, node, r.path.at("addr"), &*value);
  });
  if (out.ok())
    note_write(d, *out, fmt::format("register {} written", (*out)["register"].get<std::string>()),
               r.by);
  return out;
}

Result<nlohmann::json> eeprom_get(Daemon& d, const ApiRequest& r) {
  auto it = r.query.find("addr");
  auto addr = chip::parse_u64("addr", it == r.query.end() ? "0" : it->second, 0xFFFF);
  if (!addr.ok()) return addr.error();
  auto count = query_int(r, "count", 1, 256, 16);
  if (!count.ok()) return count.error();
  return on_chip(d, r, [&](Session& s, uint32_t node) {
    return eeprom_op(s, node, *addr, static_cast<size_t>(*count), nullptr);
  });
}

Result<nlohmann::json> eeprom_put(Daemon& d, const ApiRequest& r) {
  auto addr_text = body_string(r, "addr", true);
  if (!addr_text.ok()) return addr_text.error();
  auto addr = chip::parse_u64("addr", *addr_text, 0xFFFF);
  if (!addr.ok()) return addr.error();
  if (!r.body.contains("bytes") || !r.body["bytes"].is_array())
    return make_error(Code::kInvalidArgument, 8240, "the body needs 'bytes': [b0, b1, ...]");
  std::vector<uint8_t> bytes;
  for (const auto& b : r.body["bytes"]) {
    if (!b.is_number_unsigned() || b.get<uint64_t>() > 0xFF)
      return make_error(
          Code::kOutOfRange, 8241,
          fmt::format("bytes[{}] = {} is not a byte (0-255)", bytes.size(), json_text(b)));
    bytes.push_back(static_cast<uint8_t>(b.get<uint64_t>()));
  }
  auto out = on_chip(
      d, r, [&](Session& s, uint32_t node) { return eeprom_op(s, node, *addr, 0, &bytes); });
  if (out.ok()) note_write(d, *out, "EEPROM written", r.by);
  return out;
}

Result<nlohmann::json> eeprom_defaults(Daemon& d, const ApiRequest& r) {
  auto out = on_chip(d, r, [&](Session& s, uint32_t node) { return eeprom_defaults_op(s, node); });
  if (out.ok()) note_write(d, *out, "EEPROM defaults written", r.by);
  return out;
}

// The out-of-band path: no discovery, no M_Key; the board reaches a chip that is switched off.
Result<nlohmann::json> oob_post(Daemon& d, const ApiRequest& r) {
  auto operation = body_string(r, "operation", true);
  if (!operation.ok()) return operation.error();
  auto reg = body_string(r, "register", false);
  if (!reg.ok()) return reg.error();
  auto value = body_string(r, "value", false);
  if (!value.ok()) return value.error();
  GALAXY_TRY(d.require_galaxy("the out-of-band path"));
  auto out = d.with_session([&](Session& s) {
    return oob_op(s, r.path.at("chip"), *operation, reg->empty() ? nullptr : &*reg,
                  value->empty() ? nullptr : &*value);
  });
  auto cmd = find_oob_command(*operation);
  if (out.ok() && cmd.ok() && (*cmd)->op != wire::OobOp::kStatus &&
      (*cmd)->op != wire::OobOp::kReadTemperature && (*cmd)->op != wire::OobOp::kReadVoltage &&
      (*cmd)->op != wire::OobOp::kReadRegister)
    note_write(d, *out, fmt::format("out-of-band {}", *operation), r.by);
  return out;
}

Result<nlohmann::json> status_get(Daemon& d, const ApiRequest& r) {
  return d.chip_status(r.path.at("chip"));
}

Result<nlohmann::json> routes_get(Daemon& d, const ApiRequest& r) {
  return d.chip_routes(r.path.at("chip"));
}

}  // namespace

void add_chip_io_routes(std::vector<ApiRoute>& routes) {
  const ApiParam chip{"chip", "path", "string", "chip id, name or nic:<index>"};
  const ApiParam addr{"addr", "path", "string",
                      "register: 0x hex, decimal, a name (SCRATCH) or PORT<n>.<NAME>"};
  routes.push_back({"GET",
                    "/api/chips/{chip}/registers/{addr}",
                    "Read one register in-band",
                    {chip, addr},
                    false,
                    reg_get});
  routes.push_back(
      {"PUT",
       "/api/chips/{chip}/registers/{addr}",
       "Write one register in-band",
       {chip, addr, {"value", "body", "string", "64-bit value, 0x hex or decimal", true}},
       true,
       reg_put});
  routes.push_back({"GET",
                    "/api/chips/{chip}/eeprom",
                    "Read EEPROM bytes in-band (six per packet)",
                    {chip,
                     {"addr", "query", "string", "first byte address (default 0)"},
                     {"count", "query", "integer", "bytes, 1-256 (default 16)"}},
                    false,
                    eeprom_get});
  routes.push_back({"PUT",
                    "/api/chips/{chip}/eeprom",
                    "Write EEPROM bytes in-band",
                    {chip,
                     {"addr", "body", "string", "first byte address", true},
                     {"bytes", "body", "array", "byte values 0-255, 1-256 of them", true}},
                    true,
                    eeprom_put});
  routes.push_back({"POST",
                    "/api/chips/{chip}/eeprom/defaults",
                    "Write the chip's configuration registers into its EEPROM as boot image, "
                    "read back and compare (slow: ~3 ms simulated per byte)",
                    {chip},
                    true,
                    eeprom_defaults});
  routes.push_back(
      {"POST",
       "/api/chips/{chip}/oob",
       "One request through the chip's chassis monitor board (out-of-band, I2C): power-on, "
       "power-off, reset, temperature, voltage, read, write, status",
       {chip,
        {"operation", "body", "string",
         "power-on, power-off, reset, temperature, voltage, read, "
         "write or status",
         true},
        {"register", "body", "string", "read/write: address or name"},
        {"value", "body", "string", "write: 64-bit value"}},
       true,
       oob_post});
  routes.push_back({"GET",
                    "/api/chips/{chip}/status",
                    "Read the ten status registers of every port now, with the changes since "
                    "the previous read (device view: single, loop, compare)",
                    {chip},
                    false,
                    status_get});
  routes.push_back({"GET",
                    "/api/chips/{chip}/routes",
                    "An NRC's route table as the management server loaded it",
                    {chip},
                    false,
                    routes_get});
}

}  // namespace galaxy::nmd
