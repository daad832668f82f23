// Subnet administration on the master SM (docs/system.md 3; IBA 15): the subnet's users ask the SA
// (class 0x03 at the SM's LID, QP1) for paths and records instead of reading the subnet
// themselves; infiniband-diags' saquery is one such user. The SA answers from the subnet and
// the forwarding tables the master's last sweep programmed (publish), so a PathRecord is the
// path the switches' LFTs carry. One query function per attribute (ib_sa_records.cc), found by
// attribute in a table.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "ib/smp_port.h"
#include "nm/ib_routes.h"
#include "nm/ib_subnet.h"
#include "wire/ib_sa.h"

namespace galaxy::nm {

// The PacketLifeTime of every path between two ports (IBA 15.2.5.16): 4.096 us x 2^18, about
// one second, the subnet timeout OpenSM also gives; a loopback path's is 0.
inline constexpr uint8_t kIbPathPacketLifeTime = 18;
// The P_Key of every path: the default partition, full membership (IBA 10.9.1.2), which every
// port holds while the SM programs no partitions.
inline constexpr uint16_t kIbDefaultPkey = 0xFFFF;
// The GID prefix of a port that reports none: the link-local prefix (IBA 4.1.1).
inline constexpr uint64_t kIbDefaultGidPrefix = 0xFE80000000000000ull;

struct IbSaStats {
  uint64_t requests = 0;    // received while serving
  uint64_t answered = 0;    // with status 0
  uint64_t refused = 0;     // with an error status (each by IBA's code)
  uint64_t truncated = 0;   // GetTable answers that held fewer records than matched
  uint64_t traps = 0;       // Notices the SM received while this SA served
  uint64_t reports = 0;     // Reports sent to subscribers
  uint64_t suppressed = 0;  // traps of a noisy port, not forwarded
};

// A port that sends more than this many traps of one number within kIbNoisyTrapWindowS seconds
// is noisy: its traps of that number are answered but neither forwarded nor swept for until the
// window holds fewer (OpenSM counts the same way before it disables such a port).
inline constexpr unsigned kIbNoisyTrapLimit = 10;
inline constexpr unsigned kIbNoisyTrapWindowS = 60;
// Subscriptions the SA holds at most (ERR_NO_RESOURCES beyond).
inline constexpr size_t kIbMaxSubscriptions = 1024;
// Registered services the SA holds at most (ERR_NO_RESOURCES beyond).
inline constexpr size_t kIbMaxServices = 4096;
// Reports' transaction ids (low 32 bits) count from here, clear of the SM's own requests.
inline constexpr uint32_t kIbReportTidBase = 0xC0000000u;

// What a trap makes the SA do: the Reports to send (to `dlid`, QP1), and whether the trap comes
// from a noisy port.
struct IbTrapOutcome {
  struct Report {
    uint16_t dlid = 0;
    wire::Mad mad;
  };
  std::vector<Report> reports;
  bool noisy = false;
};

// One InformInfo subscription: whose (the subscriber's port and LID) and to what.
struct IbSubscription {
  wire::Gid subscriber;
  uint16_t lid = 0;
  uint16_t enumeration = 0;
  wire::InformInfo info;
};

// One registered service: its record as the SA answers it and when its lease ends (none:
// ServiceLease infinite).
struct IbService {
  wire::ServiceRecord record;
  std::optional<std::chrono::steady_clock::time_point> expires;
};

// What the SA answers from: a copy of the master's subnet and tables, indexed by LID and GUID.
struct IbSaView {
  IbSubnet subnet;
  IbRoutes routes;
  std::vector<IbEndpoint> by_lid;  // LID -> the port holding it (node kNoIbNode: none)
  std::unordered_map<uint64_t, IbEndpoint> by_port_guid;
  uint64_t gid_prefix = kIbDefaultGidPrefix;
  const std::vector<IbSubscription>* subscriptions = nullptr;  // the SA's, for InformInfoRecord
  const std::vector<IbService>* services = nullptr;            // the SA's, for ServiceRecord
  IbEndpoint at_lid(uint16_t lid) const { return lid < by_lid.size() ? by_lid[lid] : IbEndpoint{}; }
};

// One query as the SA received it: the template record, the fields `mask` names (IBA 15.4.4),
// how many records to return at most, and whether the request carried the SM_Key.
struct IbSaQueryArgs {
  std::span<const uint8_t> tmpl;
  uint64_t mask = 0;
  size_t max = 0;
  bool trusted = false;
};
// One attribute's query: the records matching the template in the fields the mask names, at
// most `max` of them, appended to `out` (each record_bytes long, zero-padded to a multiple of 8
// bytes), or an SA status that refuses the query.
using IbSaQuery = wire::SaStatus (*)(const IbSaView& view, const IbSaQueryArgs& q,
                                     std::vector<uint8_t>& out);
struct IbSaAttribute {
  wire::SaAttr attr;
  const char* name;
  unsigned record_bytes;
  IbSaQuery query;
};
// Every attribute the SA answers Get and GetTable for (InformInfo is a Set, handled apart).
std::span<const IbSaAttribute> ib_sa_attributes();

class IbSubnetAdmin {
 public:
  // The SM_Key a trusted request carries in its SA header: only those read ServiceKeys (IBA
  // 15.2.5.14; others get them zeroed).
  void set_sm_key(uint64_t key) { sm_key_ = key; }
  // From now on the SA answers from this subnet and these tables (the master's sweep is done).
  void publish(const IbSubnet& subnet, const IbRoutes& routes);
  // Not master: requests are left unanswered (their senders ask the master's LID next).
  void withdraw() { view_.reset(); }
  bool serving() const { return view_.has_value(); }
  const IbSaView* view() const { return view_ ? &*view_ : nullptr; }
  // One request from `from` -> its answer (nullopt: left unanswered).
  std::optional<ib::GmpAnswer> handle(const wire::Mad& request, const ib::GmpSource& from);
  // A Notice trap the SM received (answered already): the Reports its subscribers get.
  IbTrapOutcome on_trap(const wire::Notice& notice);
  const std::vector<IbSubscription>& subscriptions() const { return subs_; }
  const std::vector<IbService>& services() const { return services_; }
  const IbSaStats& stats() const { return stats_; }

 private:
  ib::GmpAnswer refuse(const wire::Mad& request, uint16_t status);
  // InformInfo Set (IBA 13.4.8.3): subscribe or unsubscribe `from`.
  ib::GmpAnswer inform(const wire::Mad& request, const ib::GmpSource& from);
  // ServiceRecord Set (register or renew) and Delete (IBA 15.2.5.14).
  ib::GmpAnswer register_service(const wire::Mad& request);
  ib::GmpAnswer delete_service(const wire::Mad& request);
  ib::GmpAnswer service_answer(const wire::Mad& request, const wire::ServiceRecord& r);
  // The record a Set or Delete names (P_Key defaulted) and the registered service of that
  // name in `held` (services_.end(): none).
  wire::ServiceRecord named_service(const wire::Mad& request,
                                    std::vector<IbService>::iterator& held);
  // Whether the request carries this subnet's SM_Key.
  bool trusted(const wire::Mad& request) const;
  // The services whose lease has ended are forgotten.
  void expire_services();
  bool noisy(const wire::Notice& notice);
  std::optional<IbSaView> view_;
  uint64_t sm_key_ = 0;
  std::vector<IbService> services_;
  IbSaStats stats_;
  std::vector<IbSubscription> subs_;
  uint16_t next_enum_ = 0;
  uint32_t next_report_ = 0;
  // (issuer LID << 16 | trap number) -> the times of its recent traps.
  std::unordered_map<uint32_t, std::vector<std::chrono::steady_clock::time_point>> recent_;
};

}  // namespace galaxy::nm
