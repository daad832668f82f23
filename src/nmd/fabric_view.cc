#include "nmd/fabric_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/spec.h"
#include "fabric/io.h"
#include "nm/scan.h"
#include "nmd/ib_json.h"

namespace galaxy::nmd {

const char* link_view_name(LinkView l) {
  switch (l) {
    case LinkView::kDown:
      return "down";
    case LinkView::kTraining:
      return "training";
    case LinkView::kUp:
      return "up";
    case LinkView::kFree:
      return "free";
  }
  return "?";
}

FabricView::LinkCounts FabricView::link_counts() const {
  LinkCounts n;
  for (uint32_t v = 0; v < chips.size(); ++v)
    for (uint8_t p = 0; p < chips[v].ports; ++p) {
      const PortView& pv = port(v, p);
      if (pv.peer == fabric::kNoNode) continue;
      if (pv.peer > v || (pv.peer == v && pv.peer_port > p)) ++n.links;
      if (pv.peer > v && pv.link != LinkView::kUp) ++n.down;
    }
  return n;
}

uint32_t FabricView::links() const {
  return link_counts().links;
}

uint32_t FabricView::links_down() const {
  return link_counts().down;
}

bool Region::contains(const fabric::Location& l, uint8_t level) const {
  for (const Clause& c : clauses) {
    const int64_t v = c.key == "cabinet"   ? l.cabinet
                      : c.key == "chassis" ? l.chassis
                      : c.key == "switch"  ? l.switch_index
                                           : level;
    if (v < c.lo || v > c.hi) return false;
  }
  return true;
}

Result<Region> parse_region(const std::string& text) {
  Region r;
  r.text = text;
  if (text.empty()) return r;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string clause = text.substr(pos, comma - pos);
    auto eq = clause.find('=');
    std::string key = clause.substr(0, eq);
    if (eq == std::string::npos ||
        (key != "cabinet" && key != "chassis" && key != "switch" && key != "level"))
      return make_error(Code::kInvalidArgument, 8206,
                        fmt::format("--region clause '{}': expected cabinet|chassis|switch|level="
                                    "N or N-M",
                                    clause));
    std::string range = clause.substr(eq + 1);
    auto dash = range.find('-', 1);
    auto lo = parse_int("--region " + key, range.substr(0, dash), 0, INT32_MAX);
    if (!lo.ok()) return lo.error();
    auto hi = dash == std::string::npos
                  ? lo
                  : parse_int("--region " + key, range.substr(dash + 1), *lo, INT32_MAX);
    if (!hi.ok()) return hi.error();
    r.clauses.push_back({key, *lo, *hi});
    pos = comma + 1;
  }
  return r;
}

std::string location_text(const fabric::Location& l) {
  std::string out;
  auto part = [&](const char* name, int32_t value) {
    if (value < 0) return;
    out += fmt::format("{}{} {}", out.empty() ? "" : "/", name, value);
  };
  part("cabinet", l.cabinet);
  part("chassis", l.chassis);
  part("switch", l.switch_index);
  return out;
}

namespace {

enum class Key : uint8_t { kCabinet, kChassis, kSwitch, kLevel, kChip };

const char* key_name(Key k) {
  switch (k) {
    case Key::kCabinet:
      return "cabinet";
    case Key::kChassis:
      return "chassis";
    case Key::kSwitch:
      return "switch";
    case Key::kLevel:
      return "level";
    case Key::kChip:
      return "chip";
  }
  return "?";
}

int64_t key_value(const FabricView& v, uint32_t node, Key k) {
  const ChipView& c = v.chips[node];
  switch (k) {
    case Key::kCabinet:
      return c.location.cabinet;
    case Key::kChassis:
      return c.location.chassis;
    case Key::kSwitch:
      return c.location.switch_index;
    case Key::kLevel:
      return c.level;
    case Key::kChip:
      return node;
  }
  return -1;
}

std::string group_label(const FabricView& v, Key k, int64_t value, uint32_t example) {
  if (k == Key::kChip) return v.chips[example].name;
  if (value < 0) return fmt::format("no {}", key_name(k));
  if (k == Key::kLevel) return value == 0 ? "level 0 (NICs)" : fmt::format("level {}", value);
  if (k == Key::kSwitch) {
    const std::string& role = v.chips[example].location.role;
    if (!role.empty() && role != "nic") return fmt::format("switch {} ({})", value, role);
  }
  return fmt::format("{} {}", key_name(k), value);
}

struct Group {
  int64_t value = 0;
  uint32_t example = 0;  // a chip of the group, for its label
  uint32_t chips = 0, nics = 0, nrcs = 0, links = 0, links_down = 0, faults = 0;
  uint32_t not_responding = 0;
  int level_min = 255, level_max = 0;
  float util_max = 0, retrans = 0;
};

struct Edge {
  uint32_t links = 0, down = 0;
  float util_max = 0;
};

// The keys of a view, outermost first.
std::vector<Key> keys_of(const std::string& view) {
  if (view == "physical") return {Key::kCabinet, Key::kChassis, Key::kSwitch, Key::kChip};
  if (view == "logical") return {Key::kLevel, Key::kSwitch, Key::kChip};
  return {};
}

}  // namespace

Result<nlohmann::json> topology_json(const FabricView& v, const std::string& view,
                                     const std::string& path) {
  std::vector<Key> keys = keys_of(view);
  if (keys.empty())
    return make_error(Code::kInvalidArgument, 8200,
                      fmt::format("view = '{}' is not physical or logical", view));
  std::vector<int64_t> fixed;
  if (!path.empty()) {
    size_t pos = 0;
    while (pos <= path.size()) {
      size_t slash = std::min(path.find('/', pos), path.size());
      auto value = parse_int("path element", path.substr(pos, slash - pos), -1, INT32_MAX);
      if (!value.ok()) return value.error();
      fixed.push_back(*value);
      pos = slash + 1;
    }
  }
  // Chips inside the path; the path's keys are the leading keys that are not skipped, so the
  // key list is resolved as the path is walked: a key every selected chip lacks (-1) is skipped.
  std::vector<uint32_t> inside(v.chips.size());
  for (uint32_t n = 0; n < inside.size(); ++n) inside[n] = n;
  nlohmann::json crumbs = nlohmann::json::array();
  size_t k = 0;
  auto skip_absent = [&]() {
    while (keys[k] != Key::kChip && std::all_of(inside.begin(), inside.end(), [&](uint32_t n) {
             return key_value(v, n, keys[k]) < 0;
           }))
      ++k;
  };
  skip_absent();
  for (int64_t want : fixed) {
    if (keys[k] == Key::kChip)
      return make_error(Code::kInvalidArgument, 8201,
                        fmt::format("path = '{}' goes below the chips", path));
    std::vector<uint32_t> next;
    for (uint32_t n : inside)
      if (key_value(v, n, keys[k]) == want) next.push_back(n);
    if (next.empty())
      return make_error(Code::kNotFound, 8202,
                        fmt::format("path = '{}': no {} {} here", path, key_name(keys[k]), want));
    crumbs.push_back({{"key", key_name(keys[k])},
                      {"value", want},
                      {"label", group_label(v, keys[k], want, next.front())}});
    inside = std::move(next);
    ++k;
    skip_absent();
  }
  const Key key = keys[k];
  std::vector<int32_t> group_of(v.chips.size(), -1);  // chip -> index into groups, -1 outside
  std::vector<Group> groups;
  std::map<int64_t, uint32_t> index;  // group value -> first chip; then -> position
  for (uint32_t n : inside) index.emplace(key_value(v, n, key), n);
  for (auto& [value, pos] : index) {
    groups.push_back(Group{value, pos});
    pos = static_cast<uint32_t>(groups.size() - 1);
  }
  for (uint32_t n : inside) group_of[n] = static_cast<int32_t>(index[key_value(v, n, key)]);
  std::map<std::pair<uint32_t, uint32_t>, Edge> edges;
  uint64_t outside = 0;
  for (uint32_t n : inside) {
    Group& g = groups[group_of[n]];
    const ChipView& c = v.chips[n];
    ++g.chips;
    (c.kind == fabric::NodeKind::kNic ? g.nics : g.nrcs)++;
    g.faults += c.faults;
    if (!c.responding || c.hops < 0) ++g.not_responding;
    g.level_min = std::min<int>(g.level_min, c.level);
    g.level_max = std::max<int>(g.level_max, c.level);
    for (uint8_t p = 0; p < c.ports; ++p) {
      const PortView& pv = v.port(n, p);
      if (pv.peer == fabric::kNoNode) continue;
      const bool down = pv.link != LinkView::kUp;
      ++g.links;
      g.links_down += down;
      g.util_max = std::max(g.util_max, pv.utilisation);
      g.retrans += pv.retransmissions_per_s;
      int32_t other = group_of[pv.peer];
      if (other < 0) {
        ++outside;
        continue;
      }
      if (other == group_of[n] || pv.peer < n) continue;  // internal, or counted from its end
      auto a = static_cast<uint32_t>(group_of[n]), b = static_cast<uint32_t>(other);
      Edge& e = edges[{std::min(a, b), std::max(a, b)}];
      ++e.links;
      e.down += down;
      e.util_max = std::max(e.util_max, pv.utilisation);
    }
  }
  nlohmann::json nodes = nlohmann::json::array();
  auto id_of = [&](const Group& g) { return std::to_string(g.value); };
  for (const Group& g : groups) {
    nlohmann::json j{{"id", id_of(g)},
                     {"label", group_label(v, key, g.value, g.example)},
                     {"chips", g.chips},
                     {"nics", g.nics},
                     {"nrcs", g.nrcs},
                     {"level", g.level_max},
                     {"level_min", g.level_min},
                     {"links", g.links},
                     {"links_down", g.links_down},
                     {"not_responding", g.not_responding},
                     {"utilisation_max", g.util_max},
                     {"retransmissions_per_s", g.retrans},
                     {"faults", g.faults}};
    if (key == Key::kChip) {
      const ChipView& c = v.chips[g.example];
      j["chip"] = g.example;
      j["kind"] = fabric::node_kind_name(c.kind);
      j["location"] = location_text(c.location);
      j["role"] = c.location.role;
    }
    nodes.push_back(std::move(j));
  }
  nlohmann::json edge_list = nlohmann::json::array();
  for (const auto& [ab, e] : edges)
    edge_list.push_back({{"a", id_of(groups[ab.first])},
                         {"b", id_of(groups[ab.second])},
                         {"links", e.links},
                         {"links_down", e.down},
                         {"utilisation_max", e.util_max}});
  return nlohmann::json{{"view", view},     {"path", crumbs},        {"group", key_name(key)},
                        {"nodes", nodes},   {"edges", edge_list},    {"outside_links", outside},
                        {"scans", v.scans}, {"built_us", v.built_us}};
}

namespace {

// One cell per link (from its lower end): both directions' utilisation (the larger), their
// retransmission and CRC-error rates added.
nlohmann::json link_cells(const FabricView& v) {
  nlohmann::json out = nlohmann::json::array();
  for (uint32_t n = 0; n < v.chips.size(); ++n)
    for (uint8_t p = 0; p < v.chips[n].ports; ++p) {
      const PortView& a = v.port(n, p);
      if (a.peer == fabric::kNoNode || a.peer < n || (a.peer == n && a.peer_port < p)) continue;
      const PortView& b = v.port(a.peer, a.peer_port);
      const double util = std::max(a.utilisation, b.utilisation);
      out.push_back({{"key", fmt::format("{}:{}", n, p + v.port_base)},
                     {"label", fmt::format("{}:{} - {}:{}", v.chips[n].name, p + v.port_base,
                                           v.chips[a.peer].name, a.peer_port + v.port_base)},
                     {"cabinet", v.chips[n].location.cabinet},
                     {"level", std::max(v.chips[n].level, v.chips[a.peer].level)},
                     {"ports", 2},
                     {"links_down", a.link != LinkView::kUp ? 1 : 0},
                     {"utilisation_max", util},
                     {"utilisation_mean", (a.utilisation + b.utilisation) / 2.0},
                     {"retransmissions_per_s", a.retransmissions_per_s + b.retransmissions_per_s},
                     {"crc_errors_per_s", a.crc_errors_per_s + b.crc_errors_per_s}});
    }
  return out;
}

}  // namespace

Result<nlohmann::json> traffic_json(const FabricView& v, const std::string& group) {
  if (group == "link")
    return nlohmann::json{{"group", group},
                          {"cells", link_cells(v)},
                          {"scans", v.scans},
                          {"interval_s", v.scan_interval_s},
                          {"built_us", v.built_us}};
  static const std::map<std::string, Key> kGroups{{"chip", Key::kChip},
                                                  {"switch", Key::kSwitch},
                                                  {"chassis", Key::kChassis},
                                                  {"cabinet", Key::kCabinet},
                                                  {"level", Key::kLevel}};
  auto it = kGroups.find(group);
  if (it == kGroups.end())
    return make_error(
        Code::kInvalidArgument, 8203,
        fmt::format("group = '{}' is not link, chip, switch, chassis, cabinet or level", group));
  struct Cell {
    uint32_t example = 0, ports = 0, down = 0;
    double util_max = 0, util_sum = 0, retrans = 0, crc = 0;
  };
  std::map<int64_t, Cell> cells;
  for (uint32_t n = 0; n < v.chips.size(); ++n) {
    int64_t value = key_value(v, n, it->second);
    auto [c, fresh] = cells.try_emplace(value);
    if (fresh) c->second.example = n;
    for (uint8_t p = 0; p < v.chips[n].ports; ++p) {
      const PortView& pv = v.port(n, p);
      if (pv.peer == fabric::kNoNode) continue;
      Cell& cell = c->second;
      ++cell.ports;
      cell.down += pv.link != LinkView::kUp;
      cell.util_max = std::max<double>(cell.util_max, pv.utilisation);
      cell.util_sum += pv.utilisation;
      cell.retrans += pv.retransmissions_per_s;
      cell.crc += pv.crc_errors_per_s;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [value, c] : cells) {
    const ChipView& ex = v.chips[c.example];
    out.push_back({{"key", std::to_string(value)},
                   {"label", group_label(v, it->second, value, c.example)},
                   {"cabinet", ex.location.cabinet},
                   {"level", ex.level},
                   {"ports", c.ports},
                   {"links_down", c.down},
                   {"utilisation_max", c.util_max},
                   {"utilisation_mean", c.ports ? c.util_sum / c.ports : 0.0},
                   {"retransmissions_per_s", c.retrans},
                   {"crc_errors_per_s", c.crc}});
  }
  return nlohmann::json{{"group", group},
                        {"cells", out},
                        {"scans", v.scans},
                        {"interval_s", v.scan_interval_s},
                        {"built_us", v.built_us}};
}

Result<uint32_t> resolve_in_view(const FabricView& v, const std::string& text) {
  Result<uint32_t> planned = v.plan ? v.plan->resolve(text) : Result<uint32_t>(uint32_t{0});
  if (v.plan && planned.ok()) return planned;
  if (v.plan) {
    for (const char* prefix : {"nrc", "nic"})  // the names discovery gives: nrc<chip id>
      if (text.rfind(prefix, 0) == 0) {
        auto d = parse_int("chip", text.substr(3), 0, static_cast<int64_t>(v.chips.size()) - 1);
        if (d.ok()) return static_cast<uint32_t>(*d);
      }
    return planned.error();
  }
  if (text.rfind("nic:", 0) == 0) {
    auto i =
        parse_int("nic index", text.substr(4), 0, static_cast<int64_t>(v.nic_chips.size()) - 1);
    if (!i.ok()) return i.error();
    return v.nic_chips[*i];
  }
  auto id = parse_int("chip", text, 0, wire::kMaxChipId);
  if (id.ok()) {
    if (*id >= static_cast<int64_t>(v.chips.size()))
      return make_error(
          Code::kNotFound, 8204,
          fmt::format("chip = {} is not in the fabric ({} chips)", *id, v.chips.size()));
    return static_cast<uint32_t>(*id);
  }
  for (uint32_t n = 0; n < v.chips.size(); ++n)
    if (v.chips[n].name == text) return n;
  for (const char* prefix : {"nrc", "nic"})  // the names discovery gives: nrc<chip id>
    if (text.rfind(prefix, 0) == 0) {
      auto d = parse_int("chip", text.substr(3), 0, static_cast<int64_t>(v.chips.size()) - 1);
      if (d.ok()) return static_cast<uint32_t>(*d);
    }
  return make_error(
      Code::kNotFound, 8205,
      fmt::format("chip = '{}' is neither a chip id, nic:<index>, nor a chip name", text));
}

void init_from_plan(FabricView& v, const fabric::Topology& plan) {
  v.plan = &plan;
  v.chips.assign(plan.num_nodes(), {});
  uint32_t slot = 0;
  for (uint32_t n = 0; n < plan.num_nodes(); ++n) {
    ChipView& c = v.chips[n];
    c.name = plan.name(n);
    c.kind = plan.kind(n);
    c.location = plan.location(n);
    c.level = plan.level(n);
    c.first_port = slot;
    c.ports = static_cast<uint8_t>(plan.num_ports(n));
    slot += c.ports;
  }
  v.ports.assign(slot, {});
}

nlohmann::json chip_json(const FabricView& v, uint32_t node, bool with_ports) {
  const ChipView& c = v.chips[node];
  nlohmann::json j{{"chip", node},
                   {"name", c.name},
                   {"kind", fabric::node_kind_name(c.kind)},
                   {"location",
                    {{"cabinet", c.location.cabinet},
                     {"chassis", c.location.chassis},
                     {"switch", c.location.switch_index},
                     {"role", c.location.role},
                     {"text", location_text(c.location)}}},
                   {"level", c.level},
                   {"port_count", c.ports},
                   {"hops", c.hops},
                   {"discovered", c.hops >= 0},
                   {"responding", c.responding},
                   {"in_region", c.in_region},
                   {"faults", c.faults}};
  if (std::isfinite(c.temperature_c)) {
    j["temperature_c"] = std::round(static_cast<double>(c.temperature_c) * 100) / 100;
    j["voltage_mv"] = c.voltage_mv;
  }
  if (v.plan) fabric::add_identity_json(j, v.plan->identity(node));
  if (!with_ports) return j;
  nlohmann::json ports = nlohmann::json::array();
  for (uint8_t p = 0; p < c.ports; ++p) {
    const PortView& pv = v.port(node, p);
    nlohmann::json pj{{"port", p + v.port_base},
                      {"link", link_view_name(pv.link)},
                      {"utilisation", pv.utilisation},
                      {"retransmissions_per_s", pv.retransmissions_per_s},
                      {"crc_errors_per_s", pv.crc_errors_per_s},
                      {"scanned", pv.scanned}};
    if (pv.scanned && !v.ib_counters.empty()) {
      pj["counters"] = ib_counters_json(v.ib_counters[c.first_port + p]);
    } else if (pv.scanned) {
      nlohmann::json regs = nlohmann::json::object();
      for (size_t r = 0; r < nm::kStatusRegisters; ++r)
        regs[std::string(nm::status_registers()[r].name)] = pv.registers[r];
      pj["registers"] = std::move(regs);
    }
    if (pv.peer != fabric::kNoNode)
      pj["peer"] = {
          {"chip", pv.peer}, {"name", v.chips[pv.peer].name}, {"port", pv.peer_port + v.port_base}};
    else
      pj["peer"] = nullptr;
    ports.push_back(std::move(pj));
  }
  j["ports"] = std::move(ports);
  return j;
}

}  // namespace galaxy::nmd
