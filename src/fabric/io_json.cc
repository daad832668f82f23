// Native JSON topology format (docs/topologies.md, "Native JSON").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "fabric/io.h"
#include "fabric/io_util.h"

namespace galaxy::fabric {

namespace {

using detail::file_error;
using nlohmann::json;

constexpr int kVersion = 1;

// JSON text is UTF-8, but names and roles read from dot or ibnetdiscover files may hold any
// bytes: those that are not UTF-8 are written as U+FFFD rather than failing the whole write.
std::string json_string(const std::string& s) {
  return json_text(json(s));
}

void append_location(std::string& out, const Location& loc) {
  std::string fields;
  auto add = [&](const char* key, int32_t v) {
    if (v != -1) fields += fmt::format("{}\"{}\":{}", fields.empty() ? "" : ",", key, v);
  };
  add("cabinet", loc.cabinet);
  add("chassis", loc.chassis);
  add("switch_index", loc.switch_index);
  add("nrc_index", loc.nrc_index);
  if (!loc.role.empty())
    fields += fmt::format("{}\"role\":{}", fields.empty() ? "" : ",", json_string(loc.role));
  out += fmt::format("\"location\":{{{}}}", fields);
}

// What ibnetdiscover said of the node, where it said anything (add_identity_json's fields).
void append_identity(std::string& out, const Identity& id) {
  if (id.empty()) return;
  json j = json::object();
  add_identity_json(j, id);
  const std::string text = json_text(j);
  out += ',';
  out.append(text, 1, text.size() - 2);  // the fields without the object's braces
}

// Offsets of the elements of the arrays under the top-level keys "nodes" and "links", so that a
// semantic error in element i can name its line (nlohmann::json keeps no positions).
struct ElementOffsets {
  std::vector<size_t> nodes;
  std::vector<size_t> links;
};

ElementOffsets scan_elements(std::string_view text) {
  ElementOffsets out;
  std::vector<char> stack;
  std::string last_string;
  std::string current;
  std::vector<size_t>* array = nullptr;
  bool expect_element = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (stack.size() == 2 && stack.back() == '[' && array != nullptr && expect_element &&
        c != ']') {
      array->push_back(i);
      expect_element = false;
    }
    if (c == '"') {
      current.clear();
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
        if (i < text.size()) current += text[i];
      }
      if (stack.size() == 1) last_string = current;
    } else if (c == '{' || c == '[') {
      if (stack.size() == 1 && c == '[') {
        array = last_string == "nodes" ? &out.nodes : last_string == "links" ? &out.links : nullptr;
        expect_element = true;
      }
      stack.push_back(c);
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && stack.size() == 2) {
      expect_element = true;
    }
  }
  return out;
}

struct Reader {
  std::string_view source;
  detail::LineIndex lines;
  ElementOffsets offsets;

  size_t node_line(size_t i) const {
    return i < offsets.nodes.size() ? lines.line(offsets.nodes[i]) : 0;
  }
  size_t link_line(size_t i) const {
    return i < offsets.links.size() ? lines.line(offsets.links[i]) : 0;
  }
  Error error(Code code, uint16_t id, size_t line, const std::string& message) const {
    return file_error(code, id, source, line, 0, message);
  }

  Result<int64_t> get_int(const json& obj, const char* key, size_t line, int64_t fallback,
                          int64_t min, int64_t max, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        return error(Code::kMalformed, 3700, line, fmt::format("node has no \"{}\"", key));
      return fallback;
    }
    if (!it->is_number_integer())
      return error(Code::kMalformed, 3701, line,
                   fmt::format("\"{}\" = {} is not an integer", key, it->dump()));
    int64_t v = it->get<int64_t>();
    if (v < min || v > max)
      return error(Code::kOutOfRange, 3702, line,
                   fmt::format("\"{}\" = {} is outside [{}, {}]", key, v, min, max));
    return v;
  }

  Result<std::string> get_string(const json& obj, const char* key, size_t line) const {
    auto it = obj.find(key);
    if (it == obj.end()) return std::string();
    if (!it->is_string())
      return error(Code::kMalformed, 3703, line,
                   fmt::format("\"{}\" = {} is not a string", key, it->dump()));
    return it->get<std::string>();
  }

  Status add_node(Topology& t, const json& node, size_t i) const {
    size_t line = node_line(i);
    if (!node.is_object())
      return error(Code::kMalformed, 3704, line,
                   fmt::format("nodes[{}] is not an object: {}", i, excerpt(json_text(node))));
    for (const auto& [key, value] : node.items())
      if (key != "id" && key != "kind" && key != "ports" && key != "name" && key != "location" &&
          key != "level" && key != "guid" && key != "description" && key != "lids")
        return error(Code::kMalformed, 3705, line,
                     fmt::format("nodes[{}]: unknown field \"{}\"", i, key));
    auto id = get_int(node, "id", line, 0, 0, INT64_MAX, true);
    GALAXY_TRY(id);
    if (*id != static_cast<int64_t>(i))
      return error(
          Code::kMalformed, 3706, line,
          fmt::format("nodes[{}] has \"id\" = {}; ids must be 0, 1, 2 ... in order", i, *id));
    auto kind_it = node.find("kind");
    if (kind_it == node.end() || !kind_it->is_string() || (*kind_it != "nic" && *kind_it != "nrc"))
      return error(Code::kMalformed, 3707, line,
                   fmt::format("node {}: \"kind\" = {} is not \"nic\" or \"nrc\"", i,
                               kind_it == node.end() ? "(missing)" : kind_it->dump()));
    NodeKind kind = *kind_it == "nic" ? NodeKind::kNic : NodeKind::kNrc;
    auto ports = get_int(node, "ports", line, 0, 1, kMaxTopologyPorts, true);
    GALAXY_TRY(ports);
    auto name = get_string(node, "name", line);
    GALAXY_TRY(name);
    auto level = get_int(node, "level", line, 0, 0, 255, false);
    GALAXY_TRY(level);
    Location loc;
    if (auto it = node.find("location"); it != node.end()) {
      if (!it->is_object())
        return error(Code::kMalformed, 3708, line,
                     fmt::format("node {}: \"location\" is not an object", i));
      for (const auto& [key, value] : it->items())
        if (key != "cabinet" && key != "chassis" && key != "switch_index" && key != "nrc_index" &&
            key != "role")
          return error(Code::kMalformed, 3709, line,
                       fmt::format("node {}: unknown location field \"{}\"", i, key));
      int32_t* fields[] = {&loc.cabinet, &loc.chassis, &loc.switch_index, &loc.nrc_index};
      const char* keys[] = {"cabinet", "chassis", "switch_index", "nrc_index"};
      for (size_t f = 0; f < 4; ++f) {
        auto v = get_int(*it, keys[f], line, -1, -1, INT32_MAX, false);
        GALAXY_TRY(v);
        *fields[f] = static_cast<int32_t>(*v);
      }
      auto role = get_string(*it, "role", line);
      GALAXY_TRY(role);
      loc.role = std::move(role).value();
    }
    auto added = t.add_node(kind, static_cast<uint32_t>(*ports), std::move(name).value(),
                            std::move(loc), static_cast<uint8_t>(*level));
    if (!added.ok()) return detail::at_line(added.error(), source, line);
    Identity identity;
    auto guid = get_string(node, "guid", line);
    GALAXY_TRY(guid);
    if (!guid->empty()) {
      auto g = parse_guid(*guid);
      if (!g)
        return error(Code::kMalformed, 3719, line,
                     fmt::format("node {}: \"guid\" = \"{}\" is not a GUID such as "
                                 "\"0x2c90300500001\"",
                                 i, excerpt(*guid)));
      identity.guid = *g;
    }
    auto description = get_string(node, "description", line);
    GALAXY_TRY(description);
    identity.description = std::move(description).value();
    if (auto it = node.find("lids"); it != node.end()) {
      if (!it->is_array() || it->size() > static_cast<size_t>(*ports))
        return error(
            Code::kMalformed, 3717, line,
            fmt::format("node {}: \"lids\" is not an array of at most {} LIDs", i, *ports));
      for (const json& lid : *it) {
        if (!lid.is_number_unsigned() || lid.get<uint64_t>() > 0xFFFF)
          return error(Code::kMalformed, 3718, line,
                       fmt::format("node {}: LID {} is not a number in [0, 65535]", i,
                                   excerpt(json_text(lid))));
        identity.lids.push_back(static_cast<uint16_t>(lid.get<uint64_t>()));
      }
    }
    t.set_identity(*added, std::move(identity));
    return {};
  }

  Status add_link(Topology& t, const json& link, size_t i) const {
    size_t line = link_line(i);
    if (!link.is_array() || link.size() != 4)
      return error(Code::kMalformed, 3710, line,
                   fmt::format("links[{}] = {} is not [node, port, node, port]", i,
                               excerpt(json_text(link))));
    uint32_t v[4];
    for (size_t f = 0; f < 4; ++f) {
      if (!link[f].is_number_integer() || link[f].get<int64_t>() < 0 ||
          link[f].get<int64_t>() > (f % 2 == 0 ? INT32_MAX : 255))
        return error(Code::kMalformed, 3711, line,
                     fmt::format("links[{}][{}] = {} is not a {} number", i, f,
                                 excerpt(json_text(link[f])), f % 2 == 0 ? "node" : "port"));
      v[f] = static_cast<uint32_t>(link[f].get<int64_t>());
    }
    Status s = t.connect({v[0], static_cast<uint8_t>(v[1])}, {v[2], static_cast<uint8_t>(v[3])});
    if (!s.ok()) return detail::at_line(s.error(), source, line);
    return {};
  }
};

}  // namespace

// The GUID as a hex string: a 64-bit number does not survive JavaScript's doubles.
void add_identity_json(json& j, const Identity& id) {
  if (id.guid) j["guid"] = fmt::format("{:#x}", id.guid);
  if (!id.description.empty()) j["description"] = id.description;
  if (!id.lids.empty()) j["lids"] = id.lids;
}

std::string identity_text(const Identity& id) {
  std::string out;
  if (id.guid) out += fmt::format("guid {:#x}", id.guid);
  if (!id.description.empty())
    out += fmt::format("{}\"{}\"", out.empty() ? "" : " ", excerpt(id.description));
  if (!id.lids.empty())
    out += fmt::format("{}lid {}", out.empty() ? "" : " ", fmt::join(id.lids, ","));
  return out;
}

std::string write_json(const Topology& t) {
  std::string out =
      fmt::format("{{\"format\":\"galaxy-topology\",\"version\":{},\n\"nodes\":[\n", kVersion);
  out.reserve(t.num_nodes() * 160 + t.num_links() * 24);
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    out += fmt::format("{{\"id\":{},\"kind\":\"{}\",\"ports\":{},\"name\":{},", v,
                       node_kind_name(t.kind(v)), t.num_ports(v), json_string(t.name(v)));
    append_location(out, t.location(v));
    out += fmt::format(",\"level\":{}", t.level(v));
    append_identity(out, t.identity(v));
    out += fmt::format("}}{}\n", v + 1 < t.num_nodes() ? "," : "");
  }
  out += "],\n\"links\":[\n";
  uint32_t written = 0;
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q || q->node < v || (q->node == v && q->port < p)) continue;
      ++written;
      out += fmt::format("[{},{},{},{}]{}\n", v, p, q->node, q->port,
                         written < t.num_links() ? "," : "");
    }
  out += "]}\n";
  return out;
}

Result<Topology> read_json(std::string_view text, std::string_view source) {
  Reader reader{source, detail::LineIndex(text), {}};
  json doc;
  size_t offset = 0;
  std::string syntax;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    offset = e.byte == 0 ? 0 : std::min(e.byte - 1, text.size());
    std::string what = e.what();
    auto cut = what.find("error while parsing");
    if (cut == std::string::npos) cut = what.find(": ");
    syntax = "JSON syntax " + (cut == std::string::npos ? what : what.substr(cut));
  } catch (const json::out_of_range& e) {
    // A number beyond the range of a double ("1e999"). nlohmann quotes the token but gives no
    // position, so find the token in the text.
    std::string what = e.what();
    auto open = what.find('\'');
    auto close = what.rfind('\'');
    std::string token =
        open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    if (auto at = token.empty() ? std::string_view::npos : text.find(token);
        at != std::string_view::npos)
      offset = at;
    syntax = fmt::format("JSON number {} is outside the range of a double", token);
  }
  if (!syntax.empty())
    return file_error(Code::kMalformed, 3712, source, reader.lines.line(offset),
                      reader.lines.column(offset), syntax);
  reader.offsets = scan_elements(text);
  if (!doc.is_object() || doc.value("format", json()) != "galaxy-topology")
    return file_error(Code::kMalformed, 3713, source, 1, 0,
                      "not a galaxy topology (\"format\" is not \"galaxy-topology\")");
  if (doc.value("version", json()) != kVersion)
    return file_error(Code::kUnsupported, 3714, source, 1, 0,
                      fmt::format("\"version\" = {} is not supported (expected {})",
                                  json_text(doc.value("version", json())), kVersion));
  for (const auto& [key, value] : doc.items())
    if (key != "format" && key != "version" && key != "nodes" && key != "links")
      return file_error(Code::kMalformed, 3715, source, 1, 0,
                        fmt::format("unknown top-level field \"{}\"", key));
  auto nodes_it = doc.find("nodes");
  auto links_it = doc.find("links");
  if (nodes_it == doc.end() || links_it == doc.end() || !nodes_it->is_array() ||
      !links_it->is_array())
    return file_error(Code::kMalformed, 3716, source, 1, 0,
                      "\"nodes\" and \"links\" must both be arrays");
  const json& nodes = *nodes_it;
  const json& links = *links_it;
  Topology t;
  uint32_t ports = 0;
  for (const auto& n : nodes)
    if (n.is_object() && n.contains("ports") && n["ports"].is_number_unsigned())
      ports +=
          static_cast<uint32_t>(std::min<uint64_t>(n["ports"].get<uint64_t>(), kMaxTopologyPorts));
  t.reserve(static_cast<uint32_t>(nodes.size()), ports);
  for (size_t i = 0; i < nodes.size(); ++i) GALAXY_TRY(reader.add_node(t, nodes[i], i));
  for (size_t i = 0; i < links.size(); ++i) GALAXY_TRY(reader.add_link(t, links[i], i));
  return t;
}

}  // namespace galaxy::fabric
