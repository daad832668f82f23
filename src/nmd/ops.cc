#include "nmd/ops.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip/register_names.h"
#include "nm/config.h"
#include "nm/trace.h"
#include "nmd/fabric_view.h"

namespace galaxy::nmd {

std::vector<unsigned> ports_of(const chip::PortSet& set) {
  std::vector<unsigned> out;
  set.for_each([&](unsigned p) { out.push_back(p); });
  return out;
}

namespace {

const char* state_name(uint64_t link_state) {
  switch (link_state & 3) {
    case 0:
      return "down";
    case 1:
      return "training";
    case 2:
      return "up";
    default:
      return "?";
  }
}

nlohmann::json link_json(const nm::PortLinkState& l) {
  return {{"port", l.port}, {"state", state_name(l.link_state)}, {"lanes", l.lanes()}};
}

// Where a chip sits, from the described fabric (chip id = plan node).
nlohmann::json place_json(const Session& s, wire::ChipId chip) {
  const fabric::Topology& plan = s.plan();
  if (chip >= plan.num_nodes()) return nullptr;
  const fabric::Location& l = plan.location(chip);
  return {{"cabinet", l.cabinet},
          {"chassis", l.chassis},
          {"switch", l.switch_index},
          {"level", plan.level(chip)},
          {"text", location_text(l)}};
}

nm::MgmtReply run_one(Session& s, const nm::MgmtRequest& q) {
  nm::MgmtReply got;
  s.requester->submit(q, [&](const nm::MgmtReply& r) { got = r; });
  s.requester->run();
  return got;
}

}  // namespace

Status require_remote(const Session& s, uint32_t node, const std::string& text) {
  if (node != s.discovery.map.server_node) return {};
  return make_error(Code::kInvalidArgument, 9165,
                    fmt::format("chip = '{}' is the management server's own NIC; in-band access "
                                "needs a remote chip",
                                text));
}

Result<nlohmann::json> trace_op(Session& s, uint32_t src, uint32_t dst, bool load_minhop) {
  const nm::FabricMap& m = s.discovery.map;
  for (uint32_t n : {src, dst})
    if (!m.topology.is_nic(n))
      return make_error(
          Code::kInvalidArgument, 9200,
          fmt::format("trace endpoint '{}' is an NRC; give two NICs", s.plan().name(m.chip_id[n])));
  if (load_minhop) GALAXY_TRY(nm::load_minhop_for(*s.requester, m, dst));
  const nm::RequesterOptions before = s.requester->options();
  s.requester->set_options(requester_options(true));  // hop by hop: one request at a time
  auto tr = nm::trace(*s.requester, m, src, dst);
  s.requester->set_options(before);
  if (!tr.ok()) return tr.error();
  nlohmann::json hops = nlohmann::json::array();
  for (const auto& h : tr->hops) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : h.out_links) out.push_back(link_json(l));
    hops.push_back({{"chip", h.chip_id},
                    {"name", s.plan().name(h.chip_id)},
                    {"in_port", h.in_port},
                    {"in_link", link_json(h.in_link)},
                    {"allowed", ports_of(h.allowed)},
                    {"usable", ports_of(h.usable)},
                    {"chosen", h.chosen},
                    {"out_links", out},
                    {"location", place_json(s, h.chip_id)}});
  }
  auto end = [&](uint32_t n) {
    return nlohmann::json{{"chip", m.chip_id[n]},
                          {"name", s.plan().name(m.chip_id[n])},
                          {"location", place_json(s, m.chip_id[n])}};
  };
  nlohmann::json j{{"src", end(src)},
                   {"dst", end(dst)},
                   {"reachable", tr->reachable},
                   {"hops", hops},
                   {"hop_count", tr->hops.size()},
                   {"requests", tr->requests},
                   {"sim_time_us", static_cast<double>(tr->elapsed) / nm::kUs},
                   {"minhop_loaded", load_minhop}};
  if (!tr->reachable) {
    j["failure"] = nm::trace_failure_name(tr->failure);
    j["failed_hop"] = tr->failed_hop;
    j["reason"] = tr->reason;
  }
  return j;
}

Result<nlohmann::json> register_op(Session& s, uint32_t node, const std::string& addr_text,
                                   const std::string* value_text) {
  auto addr = chip::parse_register(addr_text, "addr");
  if (!addr.ok()) return addr.error();
  const nm::MgmtTarget& t = s.discovery.map.target[node];
  uint64_t value = 0;
  nm::MgmtRequest q;
  if (value_text) {
    auto v = chip::parse_u64("value", *value_text, UINT64_MAX);
    if (!v.ok()) return v.error();
    value = *v;
    q = nm::MgmtRequest::write(t, *addr, value);
  } else {
    q = nm::MgmtRequest::read(t, *addr);
  }
  nm::MgmtReply r = run_one(s, q);
  if (!r.status.ok()) return r.status.error();
  if (!value_text) value = r.response.data.value[0];
  const nm::FabricMap& m = s.discovery.map;
  return nlohmann::json{{"action", value_text ? "write" : "read"},
                        {"chip", m.chip_id[node]},
                        {"name", s.plan().name(m.chip_id[node])},
                        {"hops", m.hops[node]},
                        {"addr", fmt::format("0x{:03x}", *addr)},
                        {"register", chip::register_name(*addr)},
                        {"value", value},
                        {"value_hex", fmt::format("0x{:x}", value)},
                        {"latency_us", static_cast<double>(r.latency) / nm::kUs},
                        {"attempts", r.attempts}};
}

Result<nlohmann::json> eeprom_op(Session& s, uint32_t node, uint64_t addr, size_t count,
                                 const std::vector<uint8_t>* bytes) {
  const size_t n = bytes ? bytes->size() : count;
  if (n == 0 || n > 256 || addr + n > 0x10000)
    return make_error(
        Code::kOutOfRange, 9168,
        fmt::format("{} bytes at 0x{:04x}: 1-256 bytes within the 64 KiB EEPROM", n, addr));
  // At most six bytes per packet (docs/system.md 2.2); packets one after another.
  const nm::MgmtTarget& t = s.discovery.map.target[node];
  std::vector<uint8_t> got;
  nlohmann::json latencies = nlohmann::json::array();
  nm::Picoseconds start = s.port->now();
  for (size_t off = 0; off < n; off += wire::kMaxEepromBytesPerPacket) {
    nm::MgmtRequest q;
    q.target = t;
    q.type = bytes ? wire::NmpType::kEepromWriteRequest : wire::NmpType::kEepromReadRequest;
    q.data.count = static_cast<uint8_t>(std::min<size_t>(wire::kMaxEepromBytesPerPacket, n - off));
    for (uint8_t i = 0; i < q.data.count; ++i) {
      q.data.address[i] = static_cast<uint16_t>(addr + off + i);
      if (bytes) q.data.bytes[i] = (*bytes)[off + i];
    }
    nm::MgmtReply r = run_one(s, q);
    if (!r.status.ok()) return r.status.error();
    latencies.push_back(static_cast<double>(r.latency) / nm::kUs);
    for (uint8_t i = 0; i < q.data.count && !bytes; ++i) got.push_back(r.response.data.bytes[i]);
  }
  const std::vector<uint8_t>& data = bytes ? *bytes : got;
  std::string hex;
  for (uint8_t b : data) hex += fmt::format("{:02x}", b);
  const nm::FabricMap& m = s.discovery.map;
  return nlohmann::json{{"action", bytes ? "write" : "read"},
                        {"chip", m.chip_id[node]},
                        {"name", s.plan().name(m.chip_id[node])},
                        {"hops", m.hops[node]},
                        {"addr", fmt::format("0x{:04x}", addr)},
                        {"count", data.size()},
                        {"bytes", data},
                        {"hex", hex},
                        {"packets", latencies.size()},
                        {"packet_latency_us", latencies},
                        {"sim_time_us", static_cast<double>(s.port->now() - start) / nm::kUs}};
}

Result<nlohmann::json> config_apply_op(Session& s, std::string_view text) {
  auto entries = nm::parse_config(text);
  if (!entries.ok()) return entries.error();
  const nm::FabricMap& m = s.discovery.map;
  std::vector<nm::ConfigWrite> writes;
  for (const auto& e : *entries) {
    if (e.chip == "all-nrc" || e.chip == "all-nic") {
      const bool nic = e.chip == "all-nic";
      for (uint32_t v = 0; v < m.num_nodes(); ++v)
        if (m.topology.is_nic(v) == nic && v != m.server_node)
          writes.push_back({v, e.addr, e.value, e.index});
    } else {
      auto node = find_node(s, e.chip);
      if (!node.ok())
        return make_error(node.error().code, 9223,
                          fmt::format("writes[{}].chip: {}", e.index, node.error().message));
      writes.push_back({*node, e.addr, e.value, e.index});
    }
  }
  nm::ConfigApplyResult r = nm::apply_writes(*s.requester, m, writes);
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : r.failures) {
    const Error& e = f.status.error();
    failures.push_back({{"entry", f.write.entry},
                        {"chip", m.chip_id[f.write.node]},
                        {"name", s.plan().name(m.chip_id[f.write.node])},
                        {"addr", fmt::format("0x{:03x}", f.write.addr)},
                        {"register", chip::register_name(f.write.addr)},
                        {"value", f.write.value},
                        {"nma_error", f.nma_error},
                        {"id", fmt::format("E{:04}", e.id)},
                        {"message", e.message}});
  }
  return nlohmann::json{{"writes", writes.size()},
                        {"applied", r.applied},
                        {"failed", r.failures.size()},
                        {"requests", r.requests},
                        {"sim_time_us", static_cast<double>(r.elapsed) / nm::kUs},
                        {"failures", failures}};
}

Result<nlohmann::json> eeprom_defaults_op(Session& s, uint32_t node) {
  const nm::FabricMap& m = s.discovery.map;
  auto r = nm::write_eeprom_defaults(*s.requester, m, node);
  if (!r.ok()) return r.error();
  nlohmann::json regs = nlohmann::json::array();
  for (const auto& reg : r->image.registers)
    regs.push_back({{"addr", fmt::format("0x{:03x}", reg.address)},
                    {"register", chip::register_name(reg.address)},
                    {"value", fmt::format("0x{:x}", reg.value)}});
  return nlohmann::json{{"chip", m.chip_id[node]},
                        {"name", s.plan().name(m.chip_id[node])},
                        {"bytes", r->bytes},
                        {"packets", r->packets},
                        {"verified", r->verified},
                        {"write_sim_time_us", static_cast<double>(r->write_time) / nm::kUs},
                        {"verify_sim_time_us", static_cast<double>(r->verify_time) / nm::kUs},
                        {"registers", regs}};
}

Result<nlohmann::json> bist_op(Session& s, const std::vector<nm::BistPort>& ports,
                               const nm::BistOptions& options) {
  const nm::FabricMap& m = s.discovery.map;
  nm::Bist bist(*s.requester, m);
  auto r = bist.run(ports, options);
  if (!r.ok()) return r.error();
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : r->links) {
    auto peer = m.topology.peer({l.at.node, l.at.port});
    nlohmann::json e{{"chip", l.chip_id},
                     {"name", s.plan().name(l.chip_id)},
                     {"port", l.at.port},
                     {"flits", l.flits},
                     {"errors", l.errors},
                     {"ber", l.bit_error_ratio},
                     {"ber_upper_95", l.ber_upper_95},
                     {"pass", l.pass},
                     {"no_wire", l.no_wire}};
    if (peer) e["peer"] = fmt::format("{}:{}", s.plan().name(m.chip_id[peer->node]), peer->port);
    if (!l.problem.empty()) e["problem"] = l.problem;
    links.push_back(e);
  }
  return nlohmann::json{{"duration_us", options.duration_us},
                        {"intensity_percent", options.intensity_percent},
                        {"links_tested", r->links.size()},
                        {"passed", r->passed},
                        {"failed", r->failed},
                        {"untested", r->untested},
                        {"requests", r->requests},
                        {"sim_time_us", static_cast<double>(r->elapsed) / nm::kUs},
                        {"links", links}};
}

}  // namespace galaxy::nmd
