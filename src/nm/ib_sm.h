// Galaxy as the subnet manager of an InfiniBand subnet (docs/system.md 3): one sweep discovers the
// subnet by directed routes, assigns LIDs (LMC 0), routes it with a Galaxy routing engine,
// programs every switch's SwitchInfo and linear forwarding table, gives every port its LID and
// the SM's LID, and brings the links INIT -> ARMED -> ACTIVE: then the subnet is up.
// All programming goes by directed route, so it does not depend on the tables it writes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ib/smp_port.h"
#include "nm/ib_discovery.h"
#include "nm/ib_routes.h"
#include "nm/ib_sa.h"
#include "nm/sm_election.h"

namespace galaxy::nm {

// The engine a sweep falls back to when the configured one refuses the subnet or leaves routes
// that do not arrive (OpenSM does the same): minimum-hop routes always arrive, loop-free.
inline constexpr const char* kIbFallbackRouting = "minhop";

struct IbSmOptions {
  std::string routing = "minhop";  // a routing engine spec (nm/routing.h)
  IbRequesterOptions requests;
  uint8_t priority = 0;  // SMInfo priority (0-15), against other SMs found (IBA 14.4.1)
  // SMInfo SM_Key (IBA 14.4.5), shared by the SMs of a subnet: an SM found with another
  // (non-zero) key is ignored, as OpenSM ignores one. OpenSM's default is 1.
  uint64_t sm_key = 1;
  // M_Key (IBA 14.2.4): with a key, the master places it in every port's PortInfo with these
  // protect bits (0: none; 1: Sets need it; 2: and Gets read it as 0; 3: Gets need it too) and
  // lease (seconds after a refusal with no SMP carrying the key, then protection ends; 0: never),
  // and every SMP this SM sends carries it. One key for the subnet, as OpenSM's m_key option.
  uint64_t m_key = 0;
  uint8_t m_key_protect = 2;
  uint16_t m_key_lease_s = 60;
};

struct IbSweepReport {
  uint32_t switches = 0;
  uint32_t ca_ports = 0;
  uint64_t links = 0;
  IbLidReport lids;
  uint16_t sm_lid = 0;
  std::string engine;
  uint64_t lft_blocks = 0;  // LinearForwardingTable blocks written
  uint64_t port_sets = 0;   // PortInfo Sets (LIDs and state changes)
  // SMPs the ports refused for a wrong M_Key, as their PortInfo M_KeyViolations say (the sum
  // over the ports read or written this sweep; 0xFFFF per port at most).
  uint64_t mkey_violations = 0;
  uint64_t ports_active = 0;        // linked ports ACTIVE at the end
  uint64_t ports_not_active = 0;    // linked ports that are not
  uint64_t unreachable = 0;         // (switch, LID) routes that do not arrive
  uint64_t max_paths_per_port = 0;  // IbRoutes'
  uint64_t max_lids_per_port = 0;
  IbRequesterStats smps;
  unsigned window = 0;  // SMPs in flight at most (the option's, or the transport's limit)
  // Wall times. route_s runs inside program_s: the routes are computed while the LIDs go out;
  // program_s runs from the end of discovery to the last forwarding table block.
  double discover_s = 0, route_s = 0, program_s = 0, activate_s = 0, total_s = 0;
  // The configured engine when the sweep fell back to kIbFallbackRouting, and why.
  std::string fallback_from, fallback_reason;
  // The other SMs discovery found (their SMInfo) and the role this SM took: "master", or
  // "standby" when one of them is the subnet's master or outranks this SM (IBA 14.4.1); a
  // standby sweep changes nothing and names the SM it defers to in `master`.
  std::vector<IbSmSeen> sms;
  std::string role = "master";
  std::optional<IbSmSeen> master;
  // Handover (IBA 14.4.1): the port GUID of the SM this one handed the subnet to (it outranks
  // this one; this sweep is then standby), or of the master that handed it to this one.
  uint64_t handed_over_to = 0, handed_over_by = 0;
  // Requests from the subnet that did not decode (discarded, never answered) since the port
  // opened; the SA's counts and subscriptions when the sweep ended.
  uint64_t malformed_requests = 0;
  IbSaStats sa;
  uint64_t subscriptions = 0;
  bool subnet_up = false;
  std::vector<std::string> problems;
};

class IbSubnetManager {
 public:
  IbSubnetManager(ib::SmpPort& port, IbSmOptions options) : port_(port), options_(options) {
    sa_.set_sm_key(options_.sm_key);
    options_.requests.m_key = options_.m_key;
  }
  // One heavy sweep. Errors only when nothing could be done (the SM's own port is silent, the
  // engine refuses the subnet); what went wrong on parts of the subnet is in `problems`.
  Result<IbSweepReport> sweep();
  // A light sweep, as OpenSM's between heavy ones: every switch of the last sweep's SwitchInfo,
  // by directed route. -> true when a heavy sweep is due: a Notice trap came (serve_sm_info), a
  // switch says PortStateChange (one of its ports went down, or came up from down: IBA
  // 14.2.5.4), or does not answer where it was; always true before the first sweep.
  Result<bool> light_sweep();
  // Changes nothing: discovers the subnet, reads every switch's LinearFDBTop and forwarding
  // table and checks the routes whoever programmed them (another SM) left there, with the LIDs
  // the ports hold. Fills the discovery counts, `unreachable`, `max_paths_per_port`, `smps`.
  Result<IbSweepReport> audit();
  // The routing engine of the sweeps that follow (a spec as IbSmOptions::routing).
  void set_routing(std::string spec) { options_.routing = std::move(spec); }
  const std::string& routing() const { return options_.routing; }
  // From now on the port says IsSM and this SM answers other SMs' SMInfo Gets with its GUID,
  // priority and state (discovering during a sweep, then master or standby), so that they
  // find it and defer to a master (IBA 14.4.1); SMInfo Sets (control_sm); Notice traps; and, while
  // master, subnet administration (sa()) from what its last sweep programmed.
  Status serve_sm_info();
  const IbSubnetAdmin& sa() const { return sa_; }
  // What this SM says of itself in SMInfo.
  wire::SmInfo sm_info() const;
  // A master handed the subnet to this standby SM (an SMInfo Set HANDOVER answered): the next
  // sweep is a master's.
  bool handover_received() const { return handover_from_.has_value(); }
  // The state SMInfo says: discovering during a sweep, then master or standby; NOT ACTIVE once
  // an SMInfo Set DISABLE stopped a standby (no polls, no sweeps: the caller waits), back to
  // standby on STANDBY; discovering again on DISCOVER (the caller sweeps now).
  wire::SmState state() const { return state_; }
  // Notice traps received (answered with TrapRepress; each makes the next sweep heavy).
  uint64_t traps_received() const { return traps_; }
  // SMInfo Sets refused because they did not carry this subnet's SM_Key.
  uint64_t refused_sm_info_sets() const { return refused_sets_; }
  // Standby: the SMInfo of the SM deferred to, read now by its directed route; an error when it
  // does not answer (the caller counts polls missed, IBA 14.4.1's polling).
  Result<wire::SmInfo> poll(const IbSmSeen& master);
  // The subnet as the last sweep found and programmed it.
  const IbSubnet& subnet() const { return subnet_; }
  const IbRoutes& routes() const { return routes_; }

 private:
  Status discover(IbRequester& rq, IbSweepReport& report);
  // The SM found that this one defers to: a master, else a discovering SM of higher priority
  // (equal priority: the lower GUID); none when this SM is to be master.
  std::optional<IbSmSeen> defer_to() const;
  // The SMs discovery found, as the election rules (nm/sm_election.h) see them.
  std::vector<SmPeerView> peer_views() const;
  // A standby SM found that outranks this master, which hands the subnet over to it.
  std::optional<IbSmSeen> outranking_standby() const;
  // An SMInfo Get, or a Set with `control`, to `sm` by its directed route -> its answer.
  Result<wire::SmInfo> sm_info_request(const IbSmSeen& sm, wire::MadMethod method,
                                       wire::SmControl control);
  // An SMInfo Set's control (IBA 14.4.1) -> false when it is no transition of this state.
  bool control_sm(wire::SmControl control, const wire::SmInfo& from);
  // What the SM answered and refused for others (the port's malformed count, the SA's).
  void count_served(IbSweepReport& report) const;
  // Linked ports ACTIVE and not, as the last answers left them.
  void count_active(IbSweepReport& report);
  // Sweep steps; each feeds its Sets to `rq` (IbRequester::feed), the caller runs them.
  // Every port's LID and the SM's LID (a CA port armed by the same Set), every switch's
  // LinearFDBTop, and INIT -> ARMED on the switches' linked ports. Needs LIDs, not routes.
  void program_lids_and_arm(IbRequester& rq, IbSweepReport& report);
  // Every switch's linear forwarding table, block by block, from routes_; with `written` (the
  // tables already written), only the blocks that differ from it.
  void program_tables(IbRequester& rq, IbSweepReport& report, const IbRoutes* written);
  // routes_ from kIbFallbackRouting, checked, because the configured engine failed (`why`).
  Status fall_back(IbSweepReport& report, std::string why);
  // `from` -> `to` on every linked port of node `n` in `from`.
  void change_state(IbRequester& rq, IbSweepReport& report, uint32_t n, wire::IbPortState from,
                    wire::IbPortState to);
  // What a failed state change reports: both ends of the link and their states.
  std::string state_change_text(uint32_t n, uint32_t p, const IbPort& port,
                                wire::IbPortState to) const;

  ib::SmpPort& port_;
  IbSmOptions options_;
  wire::SmState state_ = wire::SmState::kDiscovering;
  uint32_t act_count_ = 0;                 // SMInfo ActCount: rises with every SMP this SM answers
  std::optional<uint64_t> handover_from_;  // the master's GUID, until the sweep acknowledges
  uint64_t refused_sets_ = 0;              // SMInfo Sets without this subnet's SM_Key
  bool trap_seen_ = false;                 // a Notice trap since the last light sweep
  uint64_t traps_ = 0;
  IbSubnet subnet_;
  IbRoutes routes_;
  IbSubnetAdmin sa_;
};

}  // namespace galaxy::nm
