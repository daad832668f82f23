// galaxy bench sim — the simulated engine's own speed: data traffic at packet level (RDMA puts
// cut into 128-byte packets by the NIC model, every packet routed by every NRC model on its
// path) for a span of simulated time, after a bring-up by the management server. Reports the
// simulator events run per wall second, beside what the traffic achieved.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "base/json_text.h"
#include "base/sysinfo.h"
#include "chip/registers.h"
#include "cli/bench_sim.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/route_phases.h"

namespace galaxy::cli {

namespace {

struct SimBenchOptions {
  RouteOptions route;
  std::string pattern = "both";
  std::string choice = "adaptive";
  double time_us = 100;
  double load = 0.3;
  uint32_t bytes = 1024;
  uint32_t shift = 1;
  bool json = false;
};

constexpr uint64_t kSrcBase = 0x10000000;
constexpr uint64_t kDstBase = 0x20000000;
constexpr uint8_t kVp = chip::kPioVps;  // the first DMA VP

// Where each NIC's puts go.
enum class Pattern : uint8_t { kUniform, kAllToAll, kAdversarial, kShift };
struct PatternInfo {
  const char* name;
  const char* title;
  Pattern pattern;
  const char* help;
};
constexpr PatternInfo kPatterns[] = {
    {"uniform", "uniform random", Pattern::kUniform, "every put to a NIC drawn at random"},
    {"alltoall", "all-to-all", Pattern::kAllToAll, "shifted exchange: every peer in turn"},
    {"adversarial", "adversarial", Pattern::kAdversarial,
     "a permutation that, under the fixed output choice, puts all of a leaf's traffic on one "
     "up-link (fat trees): the j-th NIC of leaf L sends to leaf L+1+j, to the NIC whose chip id "
     "is L modulo the leaf's up-links"},
    {"shift", "shift", Pattern::kShift,
     "NIC i to NIC i + --shift (mod the NICs): with --shift the NICs of a dragonfly group (a*p), "
     "every group to the next, all over the one global link between them under minimal routing"}};

// The adversarial permutation's destination (NIC index) for every NIC (see kPatterns).
std::vector<uint32_t> adversarial_destinations(sim::SimFabric& f) {
  const auto& topo = f.topology();
  const uint32_t n = topo.num_nics();
  std::map<uint32_t, std::vector<uint32_t>> by_leaf;  // NRC node -> its NIC indices
  for (uint32_t i = 0; i < n; ++i)
    if (auto peer = topo.peer({topo.nic_node(i), 0})) by_leaf[peer->node].push_back(i);
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> leaves(by_leaf.begin(), by_leaf.end());
  std::vector<uint32_t> dest(n);
  for (uint32_t i = 0; i < n; ++i) dest[i] = (i + 1) % n;  // NICs on no leaf: a shift
  const auto nl = static_cast<uint32_t>(leaves.size());
  for (uint32_t l = 0; l < nl; ++l) {
    uint32_t up = 0;  // the leaf's links to other NRCs
    const uint32_t leaf = leaves[l].first;
    for (uint32_t p = 0; p < topo.num_ports(leaf); ++p)
      if (auto q = topo.peer({leaf, static_cast<uint8_t>(p)}); q && !topo.is_nic(q->node)) ++up;
    up = std::max(up, 1u);
    const auto& mine = leaves[l].second;
    for (uint32_t j = 0; j < mine.size(); ++j) {
      uint32_t t = (l + 1 + j) % nl;
      if (t == l) t = (t + 1) % nl;
      const auto& theirs = leaves[t].second;
      uint32_t pick = theirs[j % theirs.size()];
      for (uint32_t x : theirs)
        if (f.chip(topo.nic_node(x)).chip_id() % up == l % up) pick = x;
      dest[mine[j]] = pick;
    }
  }
  return dest;
}

// Open-loop traffic: every NIC posts puts at exponentially spaced times so that, on average,
// it offers `load` of its link; the destination follows the pattern.
struct Traffic {
  sim::SimFabric* f = nullptr;
  Pattern pattern = Pattern::kUniform;
  std::vector<uint32_t> fixed_dest;  // kAdversarial
  uint32_t shift = 1;                // kShift
  uint32_t bytes = 0;
  sim::Time mean_gap = 0;
  sim::Time end = 0;
  std::vector<uint32_t> key_src, key_dst, sent;
  std::mt19937_64 rng;
  uint64_t posted = 0, refused = 0;

  void start(uint32_t i) { schedule(i); }
  void schedule(uint32_t i) {
    std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_gap));
    const sim::Time t = f->sim().now() + 1 + static_cast<sim::Time>(gap(rng));
    if (t >= end) return;
    f->sim().schedule_fn_at(t, [this, i] { fire(i); });
  }
  uint32_t destination(uint32_t i) {
    const uint32_t n = f->topology().num_nics();
    switch (pattern) {
      case Pattern::kAllToAll:
        return (i + 1 + sent[i] % (n - 1)) % n;  // shifted exchange: every peer in turn
      case Pattern::kAdversarial:
        return fixed_dest[i];
      case Pattern::kShift:
        return (i + shift) % n;
      case Pattern::kUniform:
        break;
    }
    uint32_t d = static_cast<uint32_t>(rng() % (n - 1));
    return d >= i ? d + 1 : d;
  }
  void fire(uint32_t i) {
    const auto& topo = f->topology();
    const uint32_t d = destination(i);
    ++sent[i];
    wire::RdmaDescriptor r;
    r.op = wire::RdmaOp::kWrite;
    r.remote_node = f->chip(topo.nic_node(d)).chip_id();
    r.remote_vp = kVp;
    r.length = bytes;
    r.local_address = kSrcBase;
    r.local_key = key_src[i];
    r.remote_address = kDstBase;
    r.remote_key = key_dst[d];
    if (f->post_rdma(topo.nic_node(i), kVp, r).ok())
      ++posted;
    else
      ++refused;  // the SDQ is full: the NIC cannot keep up with the offered load
    schedule(i);
  }
};

nlohmann::json run_pattern(const SimBenchOptions& o, const PatternInfo& pat, bool fixed) {
  nlohmann::json phases;
  RouteOptions ro = o.route;
  auto fabric = routed_sim_fabric(ro, phases);
  if (!fabric) return {{"error", "bring-up failed (reported above)"}};
  sim::SimFabric& f = *fabric;
  const auto& topo = f.topology();
  const uint32_t n = topo.num_nics();
  // The NRCs' output choice (CHIP_CTRL bit 2), as management would set it.
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    if (!topo.is_nic(v)) {
      chip::Chip& c = f.chip(v);
      const uint64_t ctrl = c.read_register(chip::reg::kChipCtrl).value;
      c.write_register(chip::reg::kChipCtrl, fixed ? ctrl | chip::reg::kCtrlFixedChoice
                                                   : ctrl & ~chip::reg::kCtrlFixedChoice);
    }
  Traffic t;
  t.f = &f;
  t.pattern = pat.pattern;
  if (pat.pattern == Pattern::kAdversarial) t.fixed_dest = adversarial_destinations(f);
  t.shift = o.shift;
  t.bytes = o.bytes;
  t.rng.seed(o.route.session.seed);
  t.key_src.resize(n);
  t.key_dst.resize(n);
  t.sent.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    auto a = f.register_memory(topo.nic_node(i), kSrcBase, o.bytes, chip::kAccessRead);
    auto b = f.register_memory(topo.nic_node(i), kDstBase, o.bytes, chip::kAccessWrite);
    if (!a.ok() || !b.ok()) return {{"error", (a.ok() ? b.error() : a.error()).to_string()}};
    t.key_src[i] = *a;
    t.key_dst[i] = *b;
  }
  // Flits one put puts on the NIC's link: its packets, each head + extension + payload.
  uint64_t flits = 0;
  for (uint64_t off = 0; off < o.bytes; off += wire::kDataPacketBytes)
    flits += wire::data_packet_flits(std::min<uint64_t>(wire::kDataPacketBytes, o.bytes - off));
  const sim::Time wire_time = f.timing().serialisation(static_cast<unsigned>(flits));
  t.mean_gap = static_cast<sim::Time>(static_cast<double>(wire_time) / o.load);
  const sim::Time t0 = f.sim().now();
  t.end = t0 + static_cast<sim::Time>(o.time_us * 1e6);
  for (uint32_t i = 0; i < n; ++i) t.start(i);
  const uint64_t ev0 = f.sim().events_processed();
  const uint64_t pk0 = f.stats().data_packets_received;
  const sim::SimStats s0 = f.stats();
  const auto w0 = std::chrono::steady_clock::now();
  f.sim().run(t.end);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const uint64_t events = f.sim().events_processed() - ev0;
  const uint64_t packets = f.stats().data_packets_received - pk0;
  const double sim_s = o.time_us * 1e-6;
  return {{"pattern", pat.title},
          {"engine", o.route.engine},
          {"choice", fixed ? "fixed" : "adaptive"},
          {"nics", n},
          {"sim_time_us", o.time_us},
          {"offered_load", o.load},
          {"put_bytes", o.bytes},
          {"puts_posted", t.posted},
          {"puts_refused_sdq_full", t.refused},
          {"data_packets_received", packets},
          {"delivered_gbytes_per_s_per_nic", static_cast<double>(packets) *
                                                 std::min<double>(o.bytes, wire::kDataPacketBytes) /
                                                 sim_s / n / 1e9},
          {"events", events},
          {"wall_s", wall},
          {"events_per_wall_s", wall > 0 ? static_cast<double>(events) / wall : 0.0},
          {"packets_per_wall_s", wall > 0 ? static_cast<double>(packets) / wall : 0.0},
          // Credits (chip/damq.h): outputs that waited for the peer's buffer; violations and
          // drops would be the model's faults.
          {"credit_stalls", f.stats().credit_stalls - s0.credit_stalls},
          {"credit_violations", f.stats().credit_violations - s0.credit_violations},
          {"packets_dropped", f.stats().packets_dropped - s0.packets_dropped},
          {"peak_rss_mb", peak_rss_mb()}};
}

void run_bench_sim(const SimBenchOptions& o) {
  // Patterns by name; "both" is uniform and all-to-all, "all" every pattern.
  std::vector<const PatternInfo*> patterns;
  std::string names;
  for (const PatternInfo& p : kPatterns) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
    if (o.pattern == p.name || o.pattern == "all" ||
        (o.pattern == "both" && p.pattern != Pattern::kAdversarial && p.pattern != Pattern::kShift))
      patterns.push_back(&p);
  }
  if (patterns.empty())
    return report_error(
        make_error(Code::kInvalidArgument, 9632,
                   fmt::format("--pattern = '{}' is not one of {}, both or all", o.pattern, names)),
        o.json);
  std::vector<bool> choices;
  if (o.choice == "adaptive" || o.choice == "both") choices.push_back(false);
  if (o.choice == "fixed" || o.choice == "both") choices.push_back(true);
  if (choices.empty())
    return report_error(
        make_error(Code::kInvalidArgument, 9637,
                   fmt::format("--choice = '{}' is not adaptive, fixed or both", o.choice)),
        o.json);
  nlohmann::json rows = nlohmann::json::array();
  for (const PatternInfo* p : patterns)
    for (bool fixed : choices) {
      if (!o.json)
        std::fprintf(stderr, "bench sim: %s, %s choice, on %s ...\n", p->title,
                     fixed ? "fixed" : "adaptive", o.route.session.fabric.c_str());
      nlohmann::json r = run_pattern(o, *p, fixed);
      if (r.contains("error"))
        return report_error(make_error(Code::kInvalidArgument, 9634, r["error"].get<std::string>()),
                            o.json);
      rows.push_back(r);
    }
  if (o.json) {
    std::printf(
        "%s\n",
        json_text(nlohmann::json{{"fabric", o.route.session.fabric}, {"rows", rows}}, 2).c_str());
    return;
  }
  std::printf("%-16s %-9s %6s %10s %12s %12s %14s %12s %8s %14s %10s\n", "pattern", "choice",
              "NICs", "puts", "refused", "packets", "GB/s per NIC", "credit waits", "wall s",
              "events", "events/s");
  for (const auto& r : rows)
    std::printf("%-16s %-9s %6u %10llu %12llu %12llu %14.3f %12llu %8.2f %14llu %9.2fM\n",
                r["pattern"].get<std::string>().c_str(), r["choice"].get<std::string>().c_str(),
                r["nics"].get<uint32_t>(),
                static_cast<unsigned long long>(r["puts_posted"].get<uint64_t>()),
                static_cast<unsigned long long>(r["puts_refused_sdq_full"].get<uint64_t>()),
                static_cast<unsigned long long>(r["data_packets_received"].get<uint64_t>()),
                r["delivered_gbytes_per_s_per_nic"].get<double>(),
                static_cast<unsigned long long>(r["credit_stalls"].get<uint64_t>()),
                r["wall_s"].get<double>(),
                static_cast<unsigned long long>(r["events"].get<uint64_t>()),
                r["events_per_wall_s"].get<double>() / 1e6);
  std::printf("(%g us simulated at offered load %g, %u-byte puts; aim: >= 5M events/s)\n",
              o.time_us, o.load, o.bytes);
}

}  // namespace

void add_bench_sim_subcommand(CLI::App* bench) {
  auto o = std::make_shared<SimBenchOptions>();
  auto* c = bench->add_subcommand(
      "sim", "The simulated engine's speed: packet-level data traffic, events per wall second");
  c->add_option("--fabric", o->route.session.fabric, "sim:<topology>")->capture_default_str();
  c->add_option("--pattern", o->pattern,
                "uniform, alltoall, adversarial (fat trees), shift, both (uniform and alltoall) or "
                "all")
      ->capture_default_str();
  c->add_option("--shift", o->shift, "the shift pattern's distance, in NICs")
      ->capture_default_str()
      ->check(integer_in(1, wire::kMaxChipId));
  c->add_option("--engine", o->route.engine, "routing engine (galaxy route --list)")
      ->capture_default_str();
  c->add_option("--choice", o->choice,
                "the NRCs' output choice: adaptive (least-loaded allowed port), fixed (the "
                "destination's, as static d-mod-k routing) or both")
      ->capture_default_str();
  c->add_option("--time-us", o->time_us, "simulated time of traffic")
      ->capture_default_str()
      ->check(real_in(0, 1e6, Bounds::kAboveLow));
  c->add_option("--load", o->load, "offered load per NIC, a fraction of its link")
      ->capture_default_str()
      ->check(real_in(0, 1, Bounds::kAboveLow));
  c->add_option("--bytes", o->bytes, "bytes per put")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  c->add_option("--seed", o->route.session.seed, "random seed")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_sim(*o); });
}

}  // namespace galaxy::cli
