// Status scan (docs/system.md 2.5.2): read the ten per-port status registers (docs/registers.md,
// offsets 0x01-0x0A) of every NRC, and optionally of every NIC, two registers per request.
// Reads go in order of grade, then port, then chip: the link-health registers (grade 1) of the
// whole fabric come in before any traffic counter (grade 2), and consecutive requests go to
// different chips, so a pipelined scan keeps many NMAs busy at once. A chip whose request is
// given up after the Requester's retries is reported as non-responding and its remaining reads
// are skipped; the scan goes on. The cost is compared with the paper's model (docs/system.md 2.8).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"
#include "wire/mgmt.h"

namespace galaxy::nm {

// The ten status registers of a port, by index 0-9 = port-block offset 0x01-0x0A.
inline constexpr unsigned kStatusRegisters = 10;
inline constexpr uint16_t kFirstStatusOffset = 0x01;
struct StatusRegisterInfo {
  std::string_view name;
  uint8_t grade;  // docs/registers.md: 1 link health, 2 traffic counters
  bool counter;   // monotonic: compared as a delta; otherwise a state compared for equality
  uint8_t width;  // bits the counter wraps at
};
const std::array<StatusRegisterInfo, kStatusRegisters>& status_registers();
// Requests per chip of `ports` ports: ten registers per port, two per request.
inline uint64_t scan_requests_for(unsigned ports) {
  return (kStatusRegisters * ports + 1) / 2;
}

// The paper's scan model (docs/system.md 2.8).
inline constexpr double kPaperDpUs = 7.40;
inline constexpr double kPaperDtUs = 0.88;
inline constexpr double kLinkBidirectionalGbps = 224;  // 14 Gbit/s x 8 lanes x 2 directions

struct ScanOptions {
  bool include_nics = false;  // NICs other than the server's own (port 0 only)
  // Each chip's TEMPERATURE and VOLTAGE too, in one request before its ports (grade 1). The
  // paper's scan model counts port registers only: a comparison with it turns this off.
  bool environment = true;
  // Only this FabricMap node (the device view's scan of one chip; NIC or NRC); kNoNode = all.
  uint32_t only_node = fabric::kNoNode;
  // Otherwise only the nodes this accepts, when set (a daemon's region of the fabric).
  std::function<bool(uint32_t node)> include = {};
  // The fabric as built (chip id = plan node id), when known: its chips that discovery did not
  // reach (a host, a cable or a chip gone) answer nothing either, so a whole-fabric scan counts
  // those of the kinds it scans as not responding (ScanResult::unreached) instead of leaving
  // them out of the count unseen.
  const fabric::Topology* plan = nullptr;
  // Only the map nodes in [first_node, end_node): one batch of a scan that lets other requests
  // in between batches (the management daemon). The unreached chips of `plan` are counted in
  // the batch that starts at node 0.
  uint32_t first_node = 0;
  uint32_t end_node = UINT32_MAX;
};

struct PortStatus {
  std::array<uint64_t, kStatusRegisters> value{};
  uint16_t read_mask = 0;  // bit i: value[i] was read in this scan
  // The NMA refused the port's registers as out of range: the chip has fewer ports than the
  // map says (its remaining reads are skipped).
  bool absent = false;
};

struct ChipStatus {
  uint32_t node = 0;  // FabricMap node
  wire::ChipId chip_id = 0;
  bool responding = true;
  std::vector<PortStatus> ports;
  // TEMPERATURE and VOLTAGE, when ScanOptions::environment read them.
  bool environment_read = false;
  int64_t temperature_mc = 0;
  uint64_t voltage_mv = 0;
};

struct ScanResult {
  std::vector<ChipStatus> chips;         // every scanned chip, in node order
  std::vector<uint32_t> non_responding;  // nodes given up after retries
  // Chips of ScanOptions::plan missing from the map (chip ids, ascending): no route leads to
  // them, so none was asked.
  std::vector<wire::ChipId> unreached;
  uint64_t requests = 0;         // request packets sent, retries included
  uint64_t responses = 0;        // response packets received, error responses included
  uint64_t error_responses = 0;  // refusals by an NMA
  uint64_t skipped = 0;          // reads not sent: their chip stopped answering or the port
                                 // turned out absent
  uint64_t absent_ports = 0;
  Picoseconds started = 0;  // on the port's clock
  Picoseconds elapsed = 0;
  double paper_model_us = 0;  // sum over chips of its requests x (DP + (h+1) x DT)

  // Management traffic: every request and response is 4 flits of 198 bits (docs/system.md 2.8).
  double management_bits() const {
    return static_cast<double>(requests + responses) * wire::kMgmtPacketFlits * wire::kFlitBits;
  }
  // Average management bandwidth over the scan, Gbit/s.
  double management_gbps() const;
  // That bandwidth as a share of one link's 224 Gbit/s bidirectional bandwidth, in percent: the
  // server NIC's link carries all of it (the paper's definition).
  double link_share_percent() const { return 100.0 * management_gbps() / kLinkBidirectionalGbps; }
  // Chips that gave no answer: asked in vain, or beyond reach.
  size_t not_responding() const { return non_responding.size() + unreached.size(); }
};

// How many chips a scan with `options` reads (its batch's, when it is one).
uint32_t scan_chip_count(const FabricMap& map, const ScanOptions& options);

// Where a batch of a scan that starts at map node `first` and takes `chips` chips ends: the
// node after its last chip (ScanOptions::end_node), the map's end when fewer remain.
uint32_t scan_batch_end(const FabricMap& map, const ScanOptions& options, uint32_t first,
                        uint32_t chips);

// Adds a later batch of the same scan (ScanOptions::first_node) to `into`: its chips after
// those of `into`, its counts added, the elapsed time running to the batch's end.
void merge_scan(ScanResult& into, ScanResult&& batch);

// What the planned fabric has that discovery did not find (chip id = plan node id).
struct PlannedLink {
  fabric::PortRef end;   // the end discovery reached (plan node = chip id, port)
  fabric::PortRef peer;  // where its cable leads in the plan
};
struct Shortfall {
  std::vector<wire::ChipId> unreached;  // chips not in the map, ascending
  // Planned links at a reached chip that discovery found without a peer: the port's link is
  // down (the peer's host or daemon gone, the cable cut, the port forced down). A link whose ends
  // were both reached is listed once, at its lower end.
  std::vector<PlannedLink> links_down;
};
Shortfall shortfall(const FabricMap& map, const fabric::Topology& plan);

struct RegisterChange {
  uint32_t node = 0;
  wire::ChipId chip_id = 0;
  uint8_t port = 0;
  uint8_t reg = 0;  // index into status_registers()
  uint64_t old_value = 0;
  uint64_t new_value = 0;
  uint64_t delta = 0;     // counters only: wrap-around corrected
  double rate_per_s = 0;  // counters only: delta per second of simulated time
};

struct ScanDiff {
  double interval_s = 0;  // between the starts of the two scans, simulated
  // Counters that moved and state registers that changed (counters by delta, descending, after
  // the state changes).
  std::vector<RegisterChange> changes;
  std::array<uint64_t, kStatusRegisters> total_delta{};  // summed over every port (counters)
  std::vector<uint32_t> stopped_answering;  // nodes that answered in prev and not in cur
  std::vector<uint32_t> answering_again;
};

// cur - prev for a counter `width_bits` wide (1-64) that may have wrapped once.
uint64_t counter_delta(uint64_t prev, uint64_t cur, unsigned width_bits);

// Differences between two scans of the same map; only registers read in both are compared.
ScanDiff diff(const ScanResult& prev, const ScanResult& cur);

// The paper's model for a map: sum over the scanned chips of requests x (DP + (h+1) x DT).
double paper_model_us(const FabricMap& map, const ScanOptions& options);

class Scanner {
 public:
  Scanner(Requester& requester, const FabricMap& map) : requester_(requester), map_(map) {}

  Result<ScanResult> scan_once(const ScanOptions& options);

  // Loop mode: `count` scans, one starting every `interval` of simulated time (at once when a
  // scan took longer); in between the Requester waits for fault reports. `each` sees every
  // scan with the one before it (nullptr for the first); returning an error stops the loop.
  Status scan_loop(
      const ScanOptions& options, Picoseconds interval, unsigned count,
      const std::function<Status(const ScanResult* prev, const ScanResult& cur)>& each);

 private:
  Requester& requester_;
  const FabricMap& map_;
};

}  // namespace galaxy::nm
