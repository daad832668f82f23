// galaxy trace — path trace between two NICs (SYSTEM.md 2.5.4): discovery (pipelined) finds the
// chips, then the route-table entries and link states are read hop by hop on whatever tables
// the chips hold. --load-minhop first programs min-hop tables towards the destination (a
// debugging aid for a fabric whose tables were never loaded).
#include <cstdio>

#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nm/trace.h"

namespace galaxy::cli {

namespace {

struct TraceOptions {
  SessionOptions session;
  std::string src;
  std::string dst;
  bool load_minhop = false;
};

std::vector<unsigned> ports_of(uint32_t set) {
  std::vector<unsigned> out;
  for (unsigned p = 0; p < 32; ++p)
    if (set & (1u << p)) out.push_back(p);
  return out;
}

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

void run_trace(TraceOptions& o) {
  const bool json = o.session.json;
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return report_error(sess.error(), json);
  Session& s = *sess;
  const nm::FabricMap& m = s.discovery.map;
  auto src = find_node(s, o.src);
  if (!src.ok()) return report_error(src.error(), json);
  auto dst = find_node(s, o.dst);
  if (!dst.ok()) return report_error(dst.error(), json);
  for (uint32_t n : {*src, *dst})
    if (!m.topology.is_nic(n))
      return report_error(make_error(Code::kInvalidArgument, 9200,
                                     fmt::format("trace endpoint '{}' is an NRC; give two NICs",
                                                 m.topology.name(n))),
                          json);
  if (o.load_minhop) {
    Status l = nm::load_minhop_for(*s.requester, m, *dst);
    if (!l.ok()) return report_error(l.error(), json);
  }
  s.requester->set_options(requester_options(true));  // hop by hop: one request at a time
  auto tr = nm::trace(*s.requester, m, *src, *dst);
  if (!tr.ok()) return report_error(tr.error(), json);
  nlohmann::json hops = nlohmann::json::array();
  for (const auto& h : tr->hops) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : h.out_links) out.push_back(link_json(l));
    hops.push_back({{"chip", h.chip_id},
                    {"name", h.name},
                    {"in_port", h.in_port},
                    {"in_link", link_json(h.in_link)},
                    {"allowed", ports_of(h.allowed)},
                    {"usable", ports_of(h.usable)},
                    {"chosen", h.chosen},
                    {"out_links", out}});
  }
  nlohmann::json j{{"src", {{"chip", m.chip_id[*src]}, {"name", m.topology.name(*src)}}},
                   {"dst", {{"chip", m.chip_id[*dst]}, {"name", m.topology.name(*dst)}}},
                   {"reachable", tr->reachable},
                   {"hops", hops},
                   {"hop_count", tr->hops.size()},
                   {"requests", tr->requests},
                   {"sim_time_us", static_cast<double>(tr->elapsed) / nm::kUs},
                   {"minhop_loaded", o.load_minhop}};
  if (!tr->reachable) {
    j["failure"] = nm::trace_failure_name(tr->failure);
    j["failed_hop"] = tr->failed_hop;
    j["reason"] = tr->reason;
  }
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("trace %s -> %s (chip %u)\n", m.topology.name(*src).c_str(),
                m.topology.name(*dst).c_str(), tr->dst_chip);
    for (size_t k = 0; k < tr->hops.size(); ++k) {
      const auto& h = tr->hops[k];
      std::string alts;
      for (unsigned p : ports_of(h.usable))
        if (static_cast<int>(p) != h.chosen) alts += fmt::format(" {}", p);
      std::printf("%2zu  %-16s chip %-5u in %-2u %-8s -> out %s%s\n", k, h.name.c_str(), h.chip_id,
                  h.in_port, state_name(h.in_link.link_state),
                  h.chosen >= 0 ? std::to_string(h.chosen).c_str() : "-",
                  alts.empty() ? "" : (" (also:" + alts + ")").c_str());
    }
    if (tr->reachable)
      std::printf("reached in %zu hops; %llu requests, %.1f us simulated\n", tr->hops.size(),
                  static_cast<unsigned long long>(tr->requests),
                  static_cast<double>(tr->elapsed) / nm::kUs);
    else
      std::printf("UNREACHABLE at hop %d: %s\n", tr->failed_hop, tr->reason.c_str());
  }
  if (!tr->reachable) set_exit_code(1);
}

void add_trace_command(CLI::App& app) {
  auto o = std::make_shared<TraceOptions>();
  auto* c = app.add_subcommand("trace", "Path trace between two NICs through the route tables");
  add_session_options(c, o->session);
  c->add_option("src", o->src, "source NIC: chip id, name or nic:<index>")->required();
  c->add_option("dst", o->dst, "destination NIC: chip id, name or nic:<index>")->required();
  c->add_flag("--load-minhop", o->load_minhop,
              "debugging aid: first program min-hop tables towards the destination");
  c->callback([o]() { run_trace(*o); });
}

const CommandRegistrar kRegistrar("trace", add_trace_command);

}  // namespace
}  // namespace galaxy::cli
