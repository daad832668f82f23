// galaxy bist — link test (docs/system.md 2.5.6) of one port, every link of a chip, or every link
// of the fabric: BIST_CTRL start with duration and intensity, wait, read results, stop. On a
// simulated fabric --noisy-link makes a link corrupt flits so that the test has something to
// find.
#include <cstdio>
#include <cstdlib>

#include "base/json_text.h"
#include "chip/register_names.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/session.h"
#include "nm/bist.h"
#include "nmd/ops.h"

namespace galaxy::cli {

using chip::parse_register;
using chip::parse_u64;
using chip::register_name;

namespace {

struct BistCliOptions {
  SessionOptions session;
  std::string chip;
  int port = -1;
  std::string all_links_of;
  bool all = false;
  uint32_t duration_us = 100;
  uint32_t intensity = 50;
  double max_ber = 0;
  std::vector<std::string> noisy;
};

// CHIP:PORT:RATE, CHIP possibly "nic:<i>": split from the right.
Status add_noise(Session& s, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(Code::kInvalidArgument, 9210,
                      fmt::format("--noisy-link = '{}': {} (CHIP:PORT:RATE)", text, why));
  };
  auto c2 = text.rfind(':');
  if (c2 == std::string::npos || c2 == 0) return bad("missing fields");
  auto c1 = text.rfind(':', c2 - 1);
  if (c1 == std::string::npos) return bad("missing fields");
  char* end = nullptr;
  std::string rate_text = text.substr(c2 + 1);
  double rate = std::strtod(rate_text.c_str(), &end);
  if (rate_text.empty() || *end != '\0' || rate < 0 || rate > 1)
    return bad("RATE must be a probability 0-1");
  auto node = find_node(s, text.substr(0, c1));
  if (!node.ok()) return node.error();
  const nm::FabricMap& m = s.discovery.map;
  auto port = parse_u64("--noisy-link port", text.substr(c1 + 1, c2 - c1 - 1),
                        m.topology.num_ports(*node) - 1);
  if (!port.ok()) return port.error();
  // Simulated engine: chip id = the engine's node id.
  fabric::PortRef end_a{m.chip_id[*node], static_cast<uint8_t>(*port)};
  auto end_b = s.plan().peer(end_a);
  if (!end_b) return bad("the port has no link");
  GALAXY_TRY(require_simulated(s, "--noisy-link"));
  s.fabric->set_flit_error_rate(end_a, rate);
  s.fabric->set_flit_error_rate(*end_b, rate);
  return {};
}

Result<std::vector<nm::BistPort>> select_ports(Session& s, const BistCliOptions& o) {
  const nm::FabricMap& m = s.discovery.map;
  int modes = (!o.chip.empty()) + (!o.all_links_of.empty()) + (o.all ? 1 : 0);
  if (modes != 1)
    return make_error(Code::kInvalidArgument, 9211,
                      "give exactly one of --chip X --port P, --all-links-of X, --all");
  if (o.all) return nm::bist_all_links(m);
  auto node = find_node(s, o.chip.empty() ? o.all_links_of : o.chip);
  if (!node.ok()) return node.error();
  if (*node == m.server_node)
    return make_error(Code::kInvalidArgument, 9212,
                      "the management server's own NIC cannot be tested in-band; test its NRC end");
  if (!o.all_links_of.empty()) return nm::bist_ports_of(m, *node);
  if (o.port < 0 || static_cast<uint32_t>(o.port) >= m.topology.num_ports(*node))
    return make_error(Code::kOutOfRange, 9213,
                      fmt::format("--port = {} is not a port of {} (0-{})", o.port,
                                  m.topology.name(*node), m.topology.num_ports(*node) - 1));
  return std::vector<nm::BistPort>{{*node, static_cast<uint8_t>(o.port)}};
}

nm::BistOptions bist_options(const BistCliOptions& o) {
  nm::BistOptions bo;
  bo.duration_us = o.duration_us;
  bo.intensity_percent = o.intensity;
  bo.max_bit_error_ratio = o.max_ber;
  return bo;
}

Result<nlohmann::json> bist_here(const BistCliOptions& o) {
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return sess.error();
  Session& s = *sess;
  for (const auto& n : o.noisy) GALAXY_TRY(add_noise(s, n));
  auto ports = select_ports(s, o);
  if (!ports.ok()) return ports.error();
  return nmd::bist_op(s, *ports, bist_options(o));
}

// A daemon tests one port or every linked port of a chip (POST /api/bist).
Result<nlohmann::json> bist_remote(const BistCliOptions& o) {
  if (o.all || !o.noisy.empty() || o.max_ber != 0)
    return make_error(Code::kUnsupported, 9214,
                      "against a daemon: --chip X --port P or --all-links-of X (no --all, "
                      "--noisy-link, --max-ber)");
  if (o.chip.empty() == o.all_links_of.empty())
    return make_error(Code::kInvalidArgument, 9215,
                      "give exactly one of --chip X --port P, --all-links-of X");
  nlohmann::json body{{"chip", o.chip.empty() ? o.all_links_of : o.chip},
                      {"duration_us", o.duration_us},
                      {"intensity_percent", o.intensity}};
  if (!o.chip.empty()) body["port"] = o.port;
  return call_first("POST", "/api/bist", &body);
}

void run_bist(BistCliOptions& o) {
  const bool json = o.session.json;
  auto r = is_remote() ? bist_remote(o) : bist_here(o);
  if (!r.ok()) return report_error(r.error(), json);
  const nlohmann::json& j = *r;
  if (json) {
    std::printf("%s\n", json_text(j, 2).c_str());
  } else {
    const size_t tested = j["links_tested"].get<size_t>();
    for (const auto& l : j["links"])
      if (!l["pass"].get<bool>() || tested <= 32)
        std::printf(
            "%-16s port %-2u %-24s %s  flits %llu errors %llu ber %.3g%s\n",
            l["name"].get<std::string>().c_str(), l["port"].get<unsigned>(),
            l.value("peer", std::string("-")).c_str(),
            l["pass"].get<bool>()       ? "PASS"
            : l.value("no_wire", false) ? "----"
                                        : "FAIL",
            static_cast<unsigned long long>(l["flits"].get<uint64_t>()),
            static_cast<unsigned long long>(l["errors"].get<uint64_t>()), l["ber"].get<double>(),
            l.contains("problem") ? (" (" + l["problem"].get<std::string>() + ")").c_str() : "");
    std::printf(
        "%zu links: %u passed, %u failed, %u with no wire to test; %llu requests, %.1f us "
        "simulated\n",
        tested, j["passed"].get<unsigned>(), j["failed"].get<unsigned>(), j.value("untested", 0u),
        static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
        j["sim_time_us"].get<double>());
  }
  if (j["failed"].get<unsigned>()) set_exit_code(1);
}

void add_bist_command(CLI::App& app) {
  auto o = std::make_shared<BistCliOptions>();
  auto* c = app.add_subcommand("bist", "Link built-in self-test through the BIST registers");
  add_session_options(c, o->session);
  c->add_option("--chip", o->chip, "chip id, name or nic:<index> (with --port)");
  c->add_option("--port", o->port, "the port of --chip to test")->check(integer_in(0, 255));
  c->add_option("--all-links-of", o->all_links_of, "test every linked port of this chip");
  c->add_flag("--all", o->all, "test every link of the fabric (one end each)");
  c->add_option("--duration-us", o->duration_us, "test duration, 1-65535 us")
      ->capture_default_str()
      ->check(integer_in(1, 65535));
  c->add_option("--intensity", o->intensity, "share of the link rate used, percent")
      ->capture_default_str()
      ->check(integer_in(0, 100));
  c->add_option("--max-ber", o->max_ber, "bit error ratio a link may show and still pass")
      ->capture_default_str()
      ->check(real_in(0, 1));
  c->add_option("--noisy-link", o->noisy,
                "simulation aid: CHIP:PORT:RATE corrupts flits with probability RATE in both "
                "directions of that link (repeatable)");
  c->callback([o]() { run_bist(*o); });
}

const CommandRegistrar kBistRegistrar("bist", add_bist_command, true);

}  // namespace
}  // namespace galaxy::cli
