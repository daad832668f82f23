// galaxy trace — path trace between two NICs (SYSTEM.md 2.5.4): discovery (pipelined) finds the
// chips, then the route-table entries and link states are read hop by hop on whatever tables
// the chips hold (nmd/ops.h, the same code as the daemon's GET /api/trace). --load-minhop first
// programs min-hop tables towards the destination (a debugging aid for a fabric whose tables
// were never loaded).
#include <cstdio>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "nmd/ops.h"

namespace galaxy::cli {

namespace {

struct TraceOptions {
  SessionOptions session;
  std::string src;
  std::string dst;
  bool load_minhop = false;
};

Result<nlohmann::json> trace_here(const TraceOptions& o) {
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return sess.error();
  auto src = find_node(*sess, o.src);
  if (!src.ok()) return src.error();
  auto dst = find_node(*sess, o.dst);
  if (!dst.ok()) return dst.error();
  return nmd::trace_op(*sess, *src, *dst, o.load_minhop);
}

void print_trace(const nlohmann::json& j) {
  std::printf("trace %s -> %s (chip %u)\n", j["src"]["name"].get<std::string>().c_str(),
              j["dst"]["name"].get<std::string>().c_str(), j["dst"]["chip"].get<unsigned>());
  size_t k = 0;
  for (const auto& h : j["hops"]) {
    const int chosen = h["chosen"].get<int>();
    std::string alts;
    for (const auto& p : h["usable"])
      if (p.get<int>() != chosen) alts += fmt::format(" {}", p.get<int>());
    std::printf("%2zu  %-16s chip %-5u in %-2u %-8s -> out %s%s\n", k++,
                h["name"].get<std::string>().c_str(), h["chip"].get<unsigned>(),
                h["in_port"].get<unsigned>(), h["in_link"]["state"].get<std::string>().c_str(),
                chosen >= 0 ? std::to_string(chosen).c_str() : "-",
                alts.empty() ? "" : (" (also:" + alts + ")").c_str());
  }
  if (j["reachable"].get<bool>())
    std::printf("reached in %zu hops; %llu requests, %.1f us simulated\n", j["hops"].size(),
                static_cast<unsigned long long>(j["requests"].get<uint64_t>()),
                j["sim_time_us"].get<double>());
  else
    std::printf("UNREACHABLE at hop %d: %s\n", j["failed_hop"].get<int>(),
                j["reason"].get<std::string>().c_str());
}

void run_trace(TraceOptions& o) {
  const bool json = o.session.json;
  if (is_remote() && o.load_minhop)
    return report_error(make_error(Code::kUnsupported, 9201,
                                   "--load-minhop changes the tables; a daemon keeps its own "
                                   "routing (PUT /api/config routing_engine)"),
                        json);
  auto j = is_remote() ? call_first("GET", fmt::format("/api/trace?src={}&dst={}",
                                                       url_encode(o.src), url_encode(o.dst)))
                       : trace_here(o);
  if (!j.ok()) return report_error(j.error(), json);
  if (json)
    std::printf("%s\n", j->dump(2).c_str());
  else
    print_trace(*j);
  if (!(*j)["reachable"].get<bool>()) set_exit_code(1);
}

void add_trace_command(CLI::App& app) {
  auto o = std::make_shared<TraceOptions>();
  auto* c = app.add_subcommand("trace", "Path trace between two NICs through the route tables");
  add_session_options(c, o->session);
  c->add_option("src", o->src, "source NIC: chip id, nic:<index>, name, description or GUID")
      ->required();
  c->add_option("dst", o->dst, "destination NIC: chip id, nic:<index>, name, description or GUID")
      ->required();
  c->add_flag("--load-minhop", o->load_minhop,
              "debugging aid: first program min-hop tables towards the destination");
  c->callback([o]() { run_trace(*o); });
}

const CommandRegistrar kRegistrar("trace", add_trace_command, true);

}  // namespace
}  // namespace galaxy::cli
