#include "engine/live/live_spec.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/spec.h"
#include "fabric/builders.h"
#include "fabric/io.h"

namespace galaxy::live {

namespace {

constexpr uint16_t kFirstHostPort = 7400;

Status parse_hosts(std::string_view list, std::vector<LiveHost>* out) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string_view item =
        list.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    auto c1 = item.find(':');
    if (item.empty() || c1 == std::string_view::npos || c1 == 0)
      return make_error(Code::kInvalidArgument, 4701,
                        fmt::format("hosts: entry '{}' is not <name>:<ip>[:<port>]", item));
    LiveHost h;
    h.name = std::string(item.substr(0, c1));
    std::string_view rest = item.substr(c1 + 1);
    auto c2 = rest.find(':');
    h.ip = std::string(rest.substr(0, c2));
    if (h.ip.empty())
      return make_error(Code::kInvalidArgument, 4702,
                        fmt::format("hosts: entry '{}' has an empty ip", item));
    h.port = static_cast<uint16_t>(kFirstHostPort + out->size());
    if (c2 != std::string_view::npos) {
      auto p = parse_int("host port", std::string(rest.substr(c2 + 1)), 1, 65535);
      if (!p.ok()) return p.error();
      h.port = static_cast<uint16_t>(*p);
    }
    for (const LiveHost& o : *out)
      if (o.name == h.name)
        return make_error(Code::kInvalidArgument, 4703,
                          fmt::format("hosts: host name '{}' appears twice", h.name));
    out->push_back(std::move(h));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return {};
}

void assign_hosts(LiveFabric& f) {
  const fabric::Topology& t = f.topology;
  const uint32_t hosts = static_cast<uint32_t>(f.hosts.size());
  f.host_of.assign(t.num_nodes(), 0);
  const uint32_t nics = t.num_nics();
  for (uint32_t i = 0; i < nics; ++i)
    f.host_of[t.nic_node(i)] = static_cast<uint16_t>(uint64_t{i} * hosts / nics);
  uint32_t turn = 0;
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (t.is_nic(n)) continue;
    std::vector<uint32_t> votes(hosts, 0);
    uint32_t best = 0, best_votes = 0;
    for (uint32_t p = 0; p < t.num_ports(n); ++p) {
      auto peer = t.peer({n, static_cast<uint8_t>(p)});
      if (!peer || !t.is_nic(peer->node)) continue;
      uint32_t h = f.host_of[peer->node];
      if (++votes[h] > best_votes) {
        best_votes = votes[h];
        best = h;
      }
    }
    f.host_of[n] = static_cast<uint16_t>(best_votes > 0 ? best : turn++ % hosts);
  }
}

}  // namespace

bool is_live_spec(const std::string& spec) {
  return spec.rfind("live:", 0) == 0;
}

int LiveFabric::host_index(const std::string& host_name) const {
  for (size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].name == host_name) return static_cast<int>(i);
  return -1;
}

bool LiveFabric::crosses_hosts(fabric::PortRef p) const {
  auto peer = topology.peer(p);
  return peer && host_of[peer->node] != host_of[p.node];
}

namespace {

// live:<path>.json — {"name": "lab", "topology": "<builder spec or file:path>",
//                     "hosts": [{"name": "h1", "ip": "10.0.0.1", "port": 7400}, ...]}
Result<LiveFabric> parse_live_file(const std::string& spec, const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(Code::kNotFound, 4720,
                      fmt::format("live fabric file '{}' cannot be read", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(Code::kMalformed, 4721,
                      fmt::format("live fabric file '{}' is not a JSON object", path));
  if (!j.contains("topology") || !j["topology"].is_string())
    return make_error(Code::kMalformed, 4722,
                      fmt::format("{}: \"topology\" must be a topology spec string", path));
  if (!j.contains("hosts") || !j["hosts"].is_array() || j["hosts"].empty())
    return make_error(Code::kMalformed, 4723,
                      fmt::format("{}: \"hosts\" must be a non-empty array", path));
  std::string text = "live:" + j["topology"].get<std::string>();
  if (j.contains("name")) {
    if (!j["name"].is_string())
      return make_error(Code::kMalformed, 4724, fmt::format("{}: \"name\" must be a string", path));
    text += ",name=" + j["name"].get<std::string>();
  }
  text += ",hosts=";
  for (size_t i = 0; i < j["hosts"].size(); ++i) {
    const auto& h = j["hosts"][i];
    if (!h.is_object() || !h.contains("name") || !h["name"].is_string() || !h.contains("ip") ||
        !h["ip"].is_string() || (h.contains("port") && !h["port"].is_number_unsigned()))
      return make_error(Code::kMalformed, 4725,
                        fmt::format("{}: hosts[{}] needs \"name\" and \"ip\" strings and an "
                                    "optional unsigned \"port\"",
                                    path, i));
    text += fmt::format("{}{}:{}", i ? "," : "", h["name"].get<std::string>(),
                        h["ip"].get<std::string>());
    if (h.contains("port")) text += fmt::format(":{}", h["port"].get<uint64_t>());
  }
  auto f = parse_live_fabric(text);
  if (!f.ok()) return f.error();
  f->spec = spec;
  return f;
}

}  // namespace

Result<LiveFabric> parse_live_fabric(const std::string& spec) {
  if (!is_live_spec(spec))
    return make_error(Code::kInvalidArgument, 4704,
                      fmt::format("fabric '{}' is not a live: specification", spec));
  std::string body = spec.substr(5);
  if (body.size() > 5 && body.compare(body.size() - 5, 5, ".json") == 0 &&
      body.find("hosts=") == std::string::npos)
    return parse_live_file(spec, body);
  LiveFabric f;
  f.spec = spec;
  auto hosts_at = body.find("hosts=");
  if (hosts_at == std::string::npos || (hosts_at > 0 && body[hosts_at - 1] != ','))
    return make_error(
        Code::kInvalidArgument, 4705,
        fmt::format("fabric '{}': a live fabric needs hosts=<name>:<ip>,... (last)", spec));
  GALAXY_TRY(parse_hosts(std::string_view(body).substr(hosts_at + 6), &f.hosts));
  body.resize(hosts_at == 0 ? 0 : hosts_at - 1);
  // name= may appear among the topology parameters; it is ours, not the builder's.
  for (size_t at = body.find("name="); at != std::string::npos; at = body.find("name=", at + 1)) {
    if (at != 0 && body[at - 1] != ',' && body[at - 1] != ':') continue;
    size_t end = body.find(',', at);
    f.name = body.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
    size_t from = at, to = end == std::string::npos ? body.size() : end + 1;
    if (end == std::string::npos && at > 0) from = at - 1;  // drop the comma before a last item
    body.erase(from, to - from);
    break;
  }
  if (f.name.empty() || f.name.size() > 24 ||
      f.name.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != std::string::npos)
    return make_error(Code::kInvalidArgument, 4706,
                      fmt::format("name = '{}' must be 1-24 letters, digits, '-' or '_'", f.name));
  if (body.empty())
    return make_error(Code::kInvalidArgument, 4707,
                      fmt::format("fabric '{}': no topology before hosts=", spec));
  Result<fabric::Topology> topo = body.rfind("file:", 0) == 0
                                      ? fabric::load_topology_file(body.substr(5))
                                      : fabric::build_topology(body);
  if (!topo.ok()) return topo.error();
  f.topology = std::move(*topo);
  if (f.topology.num_nodes() > 0xFFFE)
    return make_error(Code::kOutOfRange, 4708,
                      fmt::format("a live fabric of {} chips exceeds 65,534, the most its "
                                  "shared-memory segments name (16-bit chip ids there; a "
                                  "simulated fabric takes up to 131,071)",
                                  f.topology.num_nodes()));
  assign_hosts(f);
  return f;
}

}  // namespace galaxy::live
