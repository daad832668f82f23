// galaxy sm — Galaxy as the subnet manager of an InfiniBand subnet (docs/system.md 3; nm/ib_sm.h):
// discovery, LIDs, routing with a Galaxy engine, LFTs, ports ACTIVE, once or every sweep
// interval until stopped. Reaches the subnet through libibumad: a real adapter's port, or ibsim
// when run under LD_PRELOAD=libumad2sim.so (docs/management.md "Galaxy as an InfiniBand SM").
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "ib/umad_port.h"
#include "nm/ib_sm.h"
#include "nmd/ib_json.h"

namespace galaxy::cli {
namespace {

struct SmCliOptions {
  std::string fabric = "ib:";
  std::string routing = "minhop";
  unsigned window = 64;
  int timeout_ms = 200;
  int retries = 2;
  bool once = false;
  unsigned sweep_interval_s = 10;
  bool json = false;
  bool audit = false;
  std::string guid2lid;
  unsigned priority = 0;
  uint64_t sm_key = 1;
  uint64_t m_key = 0;
  unsigned m_key_protect = 2;
  unsigned m_key_lease_s = 60;
  unsigned poll_interval_ms = 10000;
  unsigned poll_retries = 4;
};

nlohmann::json report_json(const nm::IbSweepReport& r, const ib::LocalPort& local) {
  nlohmann::json j{{"port",
                    {{"ca", local.ca},
                     {"port", local.port},
                     {"guid", fmt::format("{:#018x}", local.port_guid)}}}};
  j.update(nmd::ib_sweep_json(r));
  return j;
}

void print_report(const nm::IbSweepReport& r) {
  std::printf("discovered %u switches, %u CA ports, %llu links in %.3f s\n", r.switches, r.ca_ports,
              static_cast<unsigned long long>(r.links), r.discover_s);
  std::printf("LIDs: %u assigned, %u kept, max LID %u; SM LID %u\n", r.lids.assigned, r.lids.kept,
              r.lids.max_lid, r.sm_lid);
  std::printf(
      "routes (%s): %llu unreachable; busiest link between switches: %llu CA-to-CA routes, "
      "%llu CA LIDs; %.3f s\n",
      r.engine.c_str(), static_cast<unsigned long long>(r.unreachable),
      static_cast<unsigned long long>(r.max_paths_per_port),
      static_cast<unsigned long long>(r.max_lids_per_port), r.route_s);
  std::printf(
      "programmed: %llu LFT blocks, %llu PortInfo sets in %.3f s; %llu ports ACTIVE, "
      "%llu not\n",
      static_cast<unsigned long long>(r.lft_blocks), static_cast<unsigned long long>(r.port_sets),
      r.program_s + r.activate_s, static_cast<unsigned long long>(r.ports_active),
      static_cast<unsigned long long>(r.ports_not_active));
  std::printf(
      "SMPs: %llu sent, %llu answered, %llu retried, %llu failed, %llu refused; %u in flight at "
      "most\n",
      static_cast<unsigned long long>(r.smps.sent),
      static_cast<unsigned long long>(r.smps.answered),
      static_cast<unsigned long long>(r.smps.retries),
      static_cast<unsigned long long>(r.smps.failed),
      static_cast<unsigned long long>(r.smps.error_status), r.window);
  for (size_t i = 0; i < r.problems.size() && i < 10; ++i)
    std::printf("problem: %s\n", r.problems[i].c_str());
  if (r.problems.size() > 10) std::printf("(%zu problems in all)\n", r.problems.size());
  std::printf("%s in %.3f s\n", r.subnet_up ? "SUBNET UP" : "subnet NOT up", r.total_s);
  std::fflush(stdout);
}

void print_standby(const nm::IbSweepReport& r) {
  const nm::IbSmSeen& m = *r.master;
  std::printf(
      "discovered %u switches, %u CA ports, %llu links in %.3f s\n"
      "STANDBY: %s SM at LID %u (port GUID %#018llx, priority %u) %s; nothing written\n",
      r.switches, r.ca_ports, static_cast<unsigned long long>(r.links), r.discover_s,
      r.handed_over_to ? "handed over to the"
                       : ("the " + wire::sm_state_name(m.info.sm_state)).c_str(),
      m.lid, static_cast<unsigned long long>(m.info.guid), m.info.priority,
      r.handed_over_to ? "(it outranks this SM)" : "runs the subnet");
  std::fflush(stdout);
}

// OpenSM's guid2lid file: "<port GUID> <base LID> <top LID>" per line, in hex (LMC 0).
Status write_guid2lid(const nm::IbSubnet& net, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    return make_error(Code::kIoError, 7150,
                      fmt::format("--guid2lid {}: cannot write: {}", path, std::strerror(errno)));
  }
  for (const nm::IbNode& node : net.nodes)
    for (const nm::IbPort& port : node.ports)
      if (port.lid != 0)
        std::fprintf(f, "0x%016llx 0x%04x 0x%04x\n", static_cast<unsigned long long>(port.guid),
                     port.lid, port.lid);
  const bool ok = std::fclose(f) == 0;
  if (!ok)
    return make_error(Code::kIoError, 7151, fmt::format("--guid2lid {}: write failed", path));
  return {};
}

void run_sm(const SmCliOptions& o) {
  ib::UmadOptions uo;
  if (Status s = ib::parse_ib_fabric(o.fabric, uo); !s) return report_error(s.error(), o.json);
  uo.timeout_ms = o.timeout_ms;
  uo.retries = o.retries;
  auto port = ib::open_umad_port(uo);
  if (!port) return report_error(port.error(), o.json);
  const ib::LocalPort& local = (*port)->local();
  if (!o.json)
    std::printf("galaxy sm: %s port %u (port GUID %#018llx), routing %s\n", local.ca.c_str(),
                local.port, static_cast<unsigned long long>(local.port_guid), o.routing.c_str());
  nm::IbSmOptions so;
  so.routing = o.routing;
  so.requests.window = o.window;
  so.requests.deadline_ms = o.timeout_ms * (o.retries + 1) * 4 + 1000;
  so.priority = static_cast<uint8_t>(o.priority);
  so.sm_key = o.sm_key;
  so.m_key = o.m_key;
  so.m_key_protect = static_cast<uint8_t>(o.m_key_protect);
  so.m_key_lease_s = static_cast<uint16_t>(o.m_key_lease_s);
  nm::IbSubnetManager sm(**port, so);
  const std::atomic<bool>& stop = stop_on_signals(false, true);
  // As a daemon the SM answers other SMs' SMInfo (they find it and defer to a master), also
  // while it waits between sweeps and polls.
  if (!o.once && !o.audit) {
    if (Status s = sm.serve_sm_info(); !s) return report_error(s.error(), o.json);
  }
  // Waits, answering other SMs; a handover received ends the wait (the next sweep is a
  // master's), as does an SMInfo Set DISABLE or DISCOVER.
  auto wait = [&port, &sm, &stop](std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (!stop && !sm.handover_received() && sm.state() != wire::SmState::kNotActive &&
           sm.state() != wire::SmState::kDiscovering && std::chrono::steady_clock::now() < until)
      (*port)->serve(20);
  };
  // NOT ACTIVE (SMInfo Set DISABLE): no polls, no sweeps, only answers, until STANDBY or
  // DISCOVER; says so once.
  auto not_active = [&port, &sm, &o, &stop]() {
    if (o.json)
      std::printf("%s\n", json_text(nlohmann::json{{"role", "not active"}}, -1).c_str());
    else
      std::printf("NOT ACTIVE: disabled by an SMInfo Set; waiting for STANDBY or DISCOVER\n");
    std::fflush(stdout);
    while (!stop && sm.state() == wire::SmState::kNotActive) (*port)->serve(20);
    if (sm.state() == wire::SmState::kStandby) {
      if (o.json)
        std::printf("%s\n", json_text(nlohmann::json{{"role", "standby"}}, -1).c_str());
      else
        std::printf("STANDBY again: polling the master\n");
      std::fflush(stdout);
    }
  };
  bool heavy_due = true;  // the first sweep, and every one after a standby's
  for (unsigned sweep = 1; !stop; ++sweep) {
    if (!heavy_due && !sm.handover_received()) {
      // Between heavy sweeps a light one: a heavy sweep only when a switch reports a port
      // state change or stops answering.
      auto light = sm.light_sweep();
      if (light && !*light) {
        wait(std::chrono::seconds(o.sweep_interval_s));
        --sweep;
        continue;
      }
    }
    auto r = o.audit ? sm.audit() : sm.sweep();
    if (!r) return report_error(r.error(), o.json);
    heavy_due = o.audit || r->master.has_value();
    if (!r->master && !o.guid2lid.empty()) {
      if (Status s = write_guid2lid(sm.subnet(), o.guid2lid); !s)
        return report_error(s.error(), o.json);
    }
    if (o.json) {
      nlohmann::json j = report_json(*r, local);
      j["sweep"] = sweep;
      std::printf("%s\n", json_text(j, o.once ? 2 : -1).c_str());
      std::fflush(stdout);
    } else if (r->master) {
      print_standby(*r);
    } else {
      print_report(*r);
    }
    // A standby is a right outcome beside a master.
    set_exit_code(r->master || r->subnet_up ? 0 : 1);
    if (o.once) return;
    if (r->master) {
      // Standby (IBA 14.4.1): the master is polled; once it has missed --poll-retries polls in
      // a row (or says it is no longer master) this SM sweeps again, and takes the subnet over
      // when no other master answers.
      unsigned missed = 0;
      while (!stop && missed < o.poll_retries) {
        wait(std::chrono::milliseconds(o.poll_interval_ms));
        if (sm.state() == wire::SmState::kNotActive) {
          not_active();
          missed = 0;
        }
        // DISCOVER (or a handover): sweep now.
        if (stop || sm.handover_received() || sm.state() == wire::SmState::kDiscovering) break;
        auto polled = sm.poll(*r->master);
        if (polled && polled->sm_state == static_cast<uint8_t>(wire::SmState::kMaster)) {
          missed = 0;
          continue;
        }
        ++missed;
        if (!o.json)
          std::printf("master SM at LID %u: %s (%u of %u polls missed)\n", r->master->lid,
                      polled ? ("now " + wire::sm_state_name(polled->sm_state)).c_str()
                             : polled.error().message.c_str(),
                      missed, o.poll_retries);
        if (polled) break;  // answered, but no longer master: sweep now
      }
      continue;
    }
    wait(std::chrono::seconds(o.sweep_interval_s));
  }
}

void add_sm_command(CLI::App& app) {
  auto o = std::make_shared<SmCliOptions>();
  auto* c = app.add_subcommand(
      "sm",
      "Subnet manager of an InfiniBand subnet: discover, assign LIDs, route, program the "
      "LFTs, bring ports ACTIVE (libibumad; ibsim under LD_PRELOAD=libumad2sim.so)");
  c->add_option("--fabric", o->fabric, "ib:[<adapter>[:<port>]] (the first active port by default)")
      ->capture_default_str();
  c->add_option("--routing", o->routing, "routing engine and parameters (galaxy route --help)")
      ->capture_default_str();
  c->add_option("--window", o->window,
                "SMPs in flight at once (OpenSM's max_smps); through ibsim's libumad2sim at most "
                "20, beyond which it stalls")
      ->capture_default_str()
      ->check(integer_in(1, 4096));
  c->add_option("--timeout-ms", o->timeout_ms, "wait for an SMP's answer before a resend")
      ->capture_default_str()
      ->check(integer_in(1, 60000));
  c->add_option("--retries", o->retries, "resends of an unanswered SMP")
      ->capture_default_str()
      ->check(integer_in(0, 20));
  c->add_flag("--once,-o", o->once, "one sweep, then exit (0 when the subnet is up)");
  c->add_option("--sweep-interval", o->sweep_interval_s,
                "seconds between sweeps: light ones (every switch's SwitchInfo), heavy when a "
                "switch reports a port state change or stops answering")
      ->capture_default_str()
      ->check(integer_in(1, 86400));
  c->add_flag("--json", o->json, "one JSON object per sweep");
  c->add_flag("--audit", o->audit,
              "change nothing: read the LIDs, states and forwarding tables another SM left and "
              "check every route (exit 0 when all arrive and every link is ACTIVE)");
  c->add_option("--priority", o->priority,
                "SM priority against other SMs (IBA SMInfo, 0-15): a master SM found, or a "
                "discovering one that outranks this, makes this SM a standby")
      ->capture_default_str()
      ->check(integer_in(0, 15));
  c->add_option("--sm-key", o->sm_key,
                "SMInfo SM_Key, shared by the SMs of a subnet (OpenSM's default: 1)")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option("--m-key", o->m_key,
                "M_Key placed in every port and carried by every SMP (0: none; OpenSM's m_key)")
      ->capture_default_str()
      ->check(any_uint64());
  c->add_option("--m-key-protect", o->m_key_protect,
                "M_Key protect bits: 0 none, 1 Sets need the key, 2 and Gets read it as 0, 3 Gets "
                "need it too (OpenSM's m_key_protection_level)")
      ->capture_default_str()
      ->check(integer_in(0, 3));
  c->add_option("--m-key-lease", o->m_key_lease_s,
                "seconds a port stays protected after refusing an SMP while no SMP with the key "
                "comes (0: for ever; OpenSM's m_key_lease_period)")
      ->capture_default_str()
      ->check(integer_in(0, 65535));
  c->add_option("--poll-interval-ms", o->poll_interval_ms,
                "standby: how often the master's SMInfo is read")
      ->capture_default_str()
      ->check(integer_in(10, 3600000));
  c->add_option("--poll-retries", o->poll_retries,
                "standby: polls the master may miss in a row before this SM sweeps to take over")
      ->capture_default_str()
      ->check(integer_in(1, 100));
  c->add_option(
      "--guid2lid", o->guid2lid,
      "after each sweep, write every port's GUID and LID here (OpenSM's guid2lid format)");
  c->callback([o]() { run_sm(*o); });
}

const CommandRegistrar kSmRegistrar("sm", add_sm_command);

}  // namespace
}  // namespace galaxy::cli
