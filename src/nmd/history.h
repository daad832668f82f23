// The console's history (docs/api.md "History"): bounded time series of what the status scans
// measured, per port, per chip and for the whole fabric, and of the fault counts, so that an
// operator sees how a link's utilisation or retransmission rate moved, not only its last value.
//
// One point per scan holds every chip's (and, on fabrics up to HistoryOptions::
// port_series_up_to_chips chips, every port's) rates; the fault counts get a point whenever they
// change. Both rings are bounded: by a number of points and by bytes (a TH-2 point holds 24,136
// chips, so it keeps fewer of them) and, when the daemon has a retention, by age.
//
// Thread-safe: the daemon's loop adds points while the API reads them.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nmd/fabric_view.h"

namespace galaxy::nmd {

struct HistoryOptions {
  uint32_t max_points = 1440;               // per ring (a day of scans a minute apart)
  uint64_t max_bytes = uint64_t{64} << 20;  // the scans' ring, all its points together
  uint32_t port_series_up_to_chips = 4096;  // larger fabrics keep chip and fabric series only
  double retention_s = 0;                   // points older than this go (0: by count only)
};

// A series of the history: its name in the API, its unit and what it is.
struct HistorySeries {
  const char* name;
  const char* unit;
  const char* help;
};

// The rates a scan measured at a port, summed (or, for utilisation, the maximum) over a chip's
// linked ports: the values of port and chip points, in this order.
inline constexpr std::array<HistorySeries, 3> kRateSeries{{
    {"utilisation", "ratio", "TX flits x 198 bits over the interval at the link's rate (0-1)"},
    {"retransmissions_per_s", "1/s", "link-layer retransmissions per second"},
    {"crc_errors_per_s", "1/s", "frames received with a CRC error per second"},
}};
// A chip's environment at each scan (chips only: ports have none).
inline constexpr HistorySeries kTemperatureSeries{"temperature_c", "°C",
                                                  "TEMPERATURE as the scan read it"};
// The whole fabric at each scan.
inline constexpr std::array<HistorySeries, 6> kFabricSeries{{
    {"utilisation_mean", "ratio", "mean utilisation of the linked ports"},
    {"utilisation_max", "ratio", "highest utilisation of a port"},
    {"retransmissions_per_s", "1/s", "retransmissions per second, every port"},
    {"crc_errors_per_s", "1/s", "CRC errors per second, every port"},
    {"links_down", "links", "links of the described fabric down or not found"},
    {"temperature_max_c", "°C", "the hottest chip's TEMPERATURE"},
}};
// The fault counts, a point at each change.
inline constexpr std::array<HistorySeries, 2> kFaultSeries{{
    {"faults_open", "faults", "unacknowledged faults and alarms, every severity"},
    {"faults_received", "reports", "fault reports received since the daemon started"},
}};

class History {
 public:
  explicit History(HistoryOptions o = {}) : options_(o) {}

  // A scan's point: the view's rates at `time_us` (the daemon's clock).
  void add_scan(const FabricView& v, int64_t time_us);
  // The fault counts now; a point only when they differ from the last one.
  void add_faults(int64_t time_us, uint64_t open, uint64_t received);

  // GET /api/history: the fabric's series (chip empty), a chip's, or one of its ports' (port
  // set), points after since_us. Errors: a port of a chip that has no such port, a port on a
  // fabric whose ports have no history.
  Result<nlohmann::json> query(const FabricView& v, std::optional<uint32_t> chip,
                               std::optional<uint32_t> port, int64_t since_us) const;

  // How many scan points the ring holds at most for a fabric of this size.
  uint32_t capacity(size_t chips, size_t ports) const;
  size_t scan_points() const;
  size_t fault_points() const;

 private:
  struct ScanPoint {
    int64_t time_us = 0;
    std::array<float, kFabricSeries.size()> fabric{};
    std::vector<std::array<float, kRateSeries.size()>> chips;  // by chip id
    std::vector<std::array<float, kRateSeries.size()>> ports;  // by port slot; may be empty
    std::vector<float> temperature;                            // by chip id; NaN: not read
  };
  struct FaultPoint {
    int64_t time_us = 0;
    uint64_t open = 0, received = 0;
  };
  // Drops the oldest points beyond `capacity` and those older than the retention.
  template <class Ring, class TimeOf>
  void trim_locked(Ring& ring, size_t capacity, int64_t now_us, TimeOf time_of);

  HistoryOptions options_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<const ScanPoint>> scans_;
  std::deque<FaultPoint> faults_;
};

}  // namespace galaxy::nmd
