// IBA 14.4.1's SM state machine among the management servers of a Galaxy fabric (docs/
// management.md "Several servers: master and standby"). The servers exchange SMInfo as
// management packets between their NICs (wire/mgmt.h kSmInfoGet/Set/Response); the chips name
// the master: their fault reports' destination (FAULT_DEST), which only a master writes, is what
// an InfiniBand port's MasterSMLID is. The election rules are nm/sm_election.h's, shared with
// the InfiniBand SM.
//
// Single-threaded and engine-neutral like the rest of nm/: the caller drives it (elect once,
// then poll as standby or check as master on its own schedule) and does a master's work
// (routing, fault reporting, keys) when it says so. SMInfo requests from other servers are
// answered whenever the requester receives (run, drain_faults).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"
#include "nm/sm_election.h"

namespace galaxy::nm {

struct GalaxySmOptions {
  uint64_t guid = 0;     // 0: derived from the server's NIC and VP (default_sm_guid)
  uint8_t priority = 0;  // 0-15
  // Shared by the servers of a fabric (IBA 14.4.5's SM_Key): SMInfo of another key is not
  // counted, a Set without this key is refused. 0: no key (every SM counts).
  uint64_t sm_key = 1;
  // The caller polls (standby) and checks (master) once per interval; a master that misses
  // `poll_retries` polls in a row is lost (OpenSM's sminfo_polling_timeout, polling_retry_number).
  Picoseconds poll_interval = 2 * kSec;
  unsigned poll_retries = 4;
  // How long a poll waits for the master's answer (at most the interval): a transaction
  // timeout, as OpenSM's 200 ms beside its polling interval, so that a standby polling a dead
  // master is not busy for the whole interval.
  Picoseconds answer_timeout = 200 * kMs;
};

// A GUID for the server at (NIC chip id, VP): unique per endpoint, stable across restarts.
uint64_t default_sm_guid(wire::ChipId nic, uint8_t vp);

// Another server as this one knows it.
struct SmPeer {
  wire::NmpSmInfo info;
  wire::ChipId chip = 0;  // its NIC
  uint8_t vp = 0;
  wire::SourceRoute to;    // the way to its NIC
  wire::SourceRoute back;  // its way back to this server
  bool key_ok = true;      // it showed this fabric's SM_Key (or there is none)
  Picoseconds seen_at = 0;
};

struct GalaxySmCounters {
  uint64_t polls = 0, polls_missed = 0;
  uint64_t answered = 0;      // SMInfo Gets and Sets from others answered
  uint64_t refused_sets = 0;  // Sets without this fabric's SM_Key, or no transition of the state
  uint64_t handovers_given = 0, handovers_received = 0;
  uint64_t takeovers = 0;  // masterships taken after the master was lost
  uint64_t demotions = 0;  // masterships left because the chips name another master
};

enum class SmPollOutcome : uint8_t {
  kMasterAnswered,  // standby still
  kMissed,          // the master did not answer (or no longer says master); standby still
  kNewMaster,       // the chips name another master, which answered: polled from now on
  kTakeOver,        // the master is lost and this server is next: do a master's work now
};

enum class SmCheckOutcome : uint8_t {
  kMaster,      // master still
  kReclaim,     // the chips name a server that does not answer as master: write them again
  kDemoted,     // the chips name another master, which answered: standby under it now
  kHandedOver,  // a standby outranked this master and took the fabric: standby under it now
};

class GalaxySm {
 public:
  // Answers other servers' SMInfo through `requester` from now on (its SM handler).
  GalaxySm(Requester& requester, GalaxySmOptions options);
  ~GalaxySm();
  GalaxySm(const GalaxySm&) = delete;
  GalaxySm& operator=(const GalaxySm&) = delete;

  wire::SmState state() const { return state_; }
  uint64_t guid() const { return options_.guid; }
  const GalaxySmOptions& options() const { return options_; }
  // What this SM says of itself (a master names its successor).
  wire::NmpSmInfo sm_info() const;
  // Standby: the master it polls. Master: nullopt.
  const std::optional<SmPeer>& master() const { return master_; }
  // Master: the standbys that polled it within poll_retries intervals, highest-ranked first.
  std::vector<SmPeer> standbys() const;
  // Standby: the standby the master named to take over from it (nullopt: none named).
  const std::optional<SmPeer>& successor() const { return successor_; }
  const GalaxySmCounters& counters() const { return counters_; }

  // Discovering -> master or standby: the chips (the first managed NRC of `map`, `include` as
  // the region's predicate) name the master; asked by SMInfo Get, one that answers master with
  // this fabric's key is followed. Otherwise this SM is to be master: the caller then does a
  // master's work and calls became_master().
  Result<wire::SmState> elect(const FabricMap& map,
                              const std::function<bool(uint32_t)>& include = {});
  // The caller wrote the chips (fault reporting names this server): master from now on.
  void became_master();
  // Standby, once per poll_interval: an SMInfo Get to the master, and what follows from it.
  Result<SmPollOutcome> poll(const FabricMap& map,
                             const std::function<bool(uint32_t)>& include = {});
  // Master, once per poll_interval: whether the chips still name this server, and a handover
  // to a standby that outranks it.
  Result<SmCheckOutcome> check(const FabricMap& map,
                               const std::function<bool(uint32_t)>& include = {});
  // A master handed the fabric to this standby (an SMInfo Set HANDOVER answered): the caller
  // does a master's work, calls became_master(), then acknowledge_handover().
  bool handover_received() const { return handover_from_.has_value(); }
  Status acknowledge_handover();

 private:
  struct ChipsMaster {
    bool reporting = false;  // fault reporting on: a master wrote the chip
    wire::ChipId chip = 0;
    uint8_t vp = 0;
  };
  // What the first managed NRC of `map` names as the master.
  Result<ChipsMaster> chips_master(const FabricMap& map,
                                   const std::function<bool(uint32_t)>& include);
  // The server at (chip, vp) as a peer reached through `map` (nullopt: its NIC is not in it).
  std::optional<SmPeer> peer_at(const FabricMap& map, wire::ChipId chip, uint8_t vp) const;
  // An SMInfo Get, or a Set with `control`, to `peer` -> its answer (the peer updated from it).
  // `once`: one attempt answered within poll_interval (a poll), else the requester's retries.
  Result<SmPeer> ask(const SmPeer& peer, wire::NmpType type, wire::SmControl control,
                     bool once = false);
  // Asks the server the chips name; -> it, when it answers master with this fabric's key.
  std::optional<SmPeer> live_master_at(const FabricMap& map, const ChipsMaster& named);
  bool is_self(wire::ChipId chip, uint8_t vp) const;
  void serve(const wire::MgmtPacket& request);
  void demote_to(SmPeer master);

  Requester& requester_;
  GalaxySmOptions options_;
  wire::SmState state_ = wire::SmState::kDiscovering;
  uint32_t act_count_ = 0;
  std::optional<SmPeer> master_;
  std::optional<SmPeer> successor_;
  std::vector<SmPeer> standbys_;  // master: those that polled it
  std::optional<SmPeer> handover_from_;
  unsigned missed_ = 0;  // polls in a row the master did not answer as master
  GalaxySmCounters counters_;
};

}  // namespace galaxy::nm
