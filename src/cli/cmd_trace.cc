// galaxy trace — path trace between two NICs (docs/system.md 2.5.4): discovery (pipelined) finds
// the chips, then the route-table entries and link states are read hop by hop on whatever tables
// the chips hold (nmd/ops.h, the same code as the daemon's GET /api/trace). A simulated fabric
// starts with empty tables, so it is first routed as the management daemon would route it
// (--engine; none traces the tables as they are); a live fabric's tables are its management
// server's and are traced as they are. --load-minhop instead programs min-hop tables towards
// the destination only (a debugging aid). On an InfiniBand subnet (--fabric ib:) the same walk
// reads the switches' linear forwarding tables by directed route (nm/ib_trace.h), as ibtracert
// does.
#include <cstdio>

#include "base/json_text.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/session.h"
#include "ib/umad_port.h"
#include "nm/ib_discovery.h"
#include "nm/ib_trace.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nmd/ib_json.h"
#include "nmd/ops.h"

namespace galaxy::cli {

namespace {

struct TraceOptions {
  SessionOptions session;
  std::string src;
  std::string dst;
  bool load_minhop = false;
  std::string engine = "auto";
};

// The engine a trace routes with first: auto is the daemon's default on a simulated fabric and
// none on a live one.
std::string engine_of(const TraceOptions& o, const Session& s) {
  if (o.load_minhop) return "none";
  if (o.engine == "auto") return s.fabric ? nm::kDefaultRoutingEngine : "none";
  return o.engine;
}

Result<nlohmann::json> trace_here(const TraceOptions& o) {
  auto sess = open_discovered_session(o.session);
  if (!sess.ok()) return sess.error();
  auto src = find_node(*sess, o.src);
  if (!src.ok()) return src.error();
  auto dst = find_node(*sess, o.dst);
  if (!dst.ok()) return dst.error();
  nlohmann::json routed = nullptr;
  if (std::string engine = engine_of(o, *sess); engine != "none") {
    // The routes are computed and loaded, not verified for every pair as the daemon does (on
    // TH-2 that takes seconds): the trace shows the path it asks about. An engine that cannot
    // route this topology hands over to the daemon's fallback, when the engine was not asked for.
    const nm::FabricMap& map = sess->discovery.map;
    if (!o.session.json)
      std::fprintf(stderr,
                   "galaxy trace: routing the fabric with %s first (--engine none: trace the "
                   "tables as they are)\n",
                   engine.c_str());
    auto routes = nm::compute_routes(map, engine);
    std::string fell_back_from;
    if (!routes.ok() && o.engine == "auto") {
      fell_back_from = engine;
      routes = nm::compute_routes(map, nm::kFallbackRoutingEngine);
    }
    if (!routes.ok()) return routes.error();
    auto load = nm::load_routes(*sess->requester, map, *routes);
    if (!load.ok()) return load.error();
    routed = {{"engine", routes->engine},
              {"fell_back_from", fell_back_from},
              {"range_writes", routes->num_writes()},
              {"load_packets", load->packets},
              {"load_failed", load->failed}};
  }
  auto j = nmd::trace_op(*sess, *src, *dst, o.load_minhop);
  if (j.ok()) (*j)["routed"] = std::move(routed);
  return j;
}

// The InfiniBand trace: the subnet discovered through the umad port, then nm::trace_ib.
Result<nlohmann::json> trace_ib_here(const TraceOptions& o) {
  ib::UmadOptions uo;
  GALAXY_TRY(ib::parse_ib_fabric(o.session.fabric, uo));
  auto port = ib::open_umad_port(uo);
  if (!port) return port.error();
  nm::IbRequester rq(**port, {});
  auto net = nm::discover_ib(rq);
  if (!net) return net.error();
  auto src = net->find(o.src);
  if (!src) return src.error();
  auto dst = net->find(o.dst);
  if (!dst) return dst.error();
  auto tr = nm::trace_ib(rq, *net, *src, *dst);
  if (!tr) return tr.error();
  return nmd::ib_trace_json(*net, *tr);
}

void print_ib_trace(const nlohmann::json& j) {
  auto end = [](const nlohmann::json& e) {
    return fmt::format("{} \"{}\" port {} (LID {})", e["name"].get<std::string>(),
                       e["description"].get<std::string>(), e["port"].get<unsigned>(),
                       e["lid"].get<unsigned>());
  };
  std::printf("trace %s -> %s\n", end(j["src"]).c_str(), end(j["dst"]).c_str());
  size_t k = 0;
  for (const auto& h : j["hops"])
    std::printf(
        "%2zu  %s %-20s lid %-5u in %-3u -> out %s %s\n", k++, h["name"].get<std::string>().c_str(),
        ("\"" + h["description"].get<std::string>() + "\"").c_str(), h["lid"].get<unsigned>(),
        h["in_port"].get<unsigned>(),
        h["out_port"].is_null() ? "-" : std::to_string(h["out_port"].get<unsigned>()).c_str(),
        h["out_state"].get<std::string>().c_str());
  if (j["reachable"].get<bool>())
    std::printf("reached in %zu switches; %llu SMPs\n", j["hops"].size(),
                static_cast<unsigned long long>(j["requests"].get<uint64_t>()));
  else
    std::printf("UNREACHABLE at hop %d: %s\n", j["failed_hop"].get<int>(),
                j["reason"].get<std::string>().c_str());
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
  if (j.contains("routed") && !j["routed"].is_null())
    std::printf("(routed first with %s: %llu table writes in %llu packets, %llu failed)\n",
                j["routed"]["engine"].get<std::string>().c_str(),
                static_cast<unsigned long long>(j["routed"]["range_writes"].get<uint64_t>()),
                static_cast<unsigned long long>(j["routed"]["load_packets"].get<uint64_t>()),
                static_cast<unsigned long long>(j["routed"]["load_failed"].get<uint64_t>()));
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
  if (is_remote() && (o.load_minhop || o.engine != "auto"))
    return report_error(
        make_error(Code::kUnsupported, 9201,
                   "--load-minhop and --engine change the tables; a daemon keeps its own "
                   "routing (PUT /api/config routing_engine)"),
        json);
  const bool ib = ib::is_ib_fabric(o.session.fabric);
  if (ib && (is_remote() || o.load_minhop || o.engine != "auto"))
    return report_error(make_error(Code::kUnsupported, 7152,
                                   "--fabric ib: traces the subnet's own tables here, without "
                                   "--server, --engine or --load-minhop"),
                        json);
  auto j = ib            ? trace_ib_here(o)
           : is_remote() ? call_first("GET", fmt::format("/api/trace?src={}&dst={}",
                                                         url_encode(o.src), url_encode(o.dst)))
                         : trace_here(o);
  if (!j.ok()) return report_error(j.error(), json);
  if (json)
    std::printf("%s\n", json_text(*j, 2).c_str());
  else if (j->value("fabric", "") == "ib")  // here, or a daemon serving an IB subnet
    print_ib_trace(*j);
  else
    print_trace(*j);
  if (!(*j)["reachable"].get<bool>()) set_exit_code(1);
}

void add_trace_command(CLI::App& app) {
  auto o = std::make_shared<TraceOptions>();
  auto* c = app.add_subcommand(
      "trace",
      "Path trace between two NICs through the route tables (--fabric ib:[<adapter>[:<port>]]: "
      "between two ports of an InfiniBand subnet through its switches' forwarding tables)");
  add_session_options(c, o->session);
  c->add_option("src", o->src,
                "source NIC: chip id, nic:<index>, name, description or GUID (ib: a LID, "
                "lid:<n>, a node or port GUID, S-/H-<guid> or a node description)")
      ->required();
  c->add_option("dst", o->dst, "destination NIC, named as the source")->required();
  c->add_option("--engine", o->engine,
                "route the fabric with this engine first, as the management daemon would (auto: "
                "the daemon's default on a simulated fabric, whose chips start with empty "
                "tables; none on a live one, whose server loaded them); none: trace the tables "
                "as they are")
      ->capture_default_str();
  c->add_flag("--load-minhop", o->load_minhop,
              "debugging aid: program min-hop tables towards the destination only, then trace");
  c->callback([o]() { run_trace(*o); });
}

const CommandRegistrar kTraceRegistrar("trace", add_trace_command, true);

}  // namespace
}  // namespace galaxy::cli
