#include "nmd/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace galaxy::nmd {

namespace {

using Rates = std::array<float, kRateSeries.size()>;

Rates port_rates(const PortView& p) {
  return {p.utilisation, p.retransmissions_per_s, p.crc_errors_per_s};
}

// JSON has no NaN or infinity; a rate that is not finite is no measurement. A float's digits
// only (0.374975, not 0.37497469782829285).
nlohmann::json number(float x) {
  if (!std::isfinite(x)) return nullptr;
  return std::strtod(fmt::format("{:.6g}", x).c_str(), nullptr);
}

template <size_t N>
nlohmann::json series_json(const std::array<HistorySeries, N>& table) {
  nlohmann::json out = nlohmann::json::array();
  for (const HistorySeries& s : table)
    out.push_back({{"name", s.name},
                   {"unit", s.unit},
                   {"help", s.help},
                   {"points", nlohmann::json::array()}});
  return out;
}

}  // namespace

uint32_t History::capacity(size_t chips, size_t ports) const {
  const uint64_t bytes =
      sizeof(ScanPoint) +
      (chips + (chips <= options_.port_series_up_to_chips ? ports : 0)) * sizeof(Rates) +
      chips * sizeof(float);
  const uint64_t by_bytes = std::max<uint64_t>(2, options_.max_bytes / bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(options_.max_points, by_bytes));
}

template <class Ring, class TimeOf>
void History::trim_locked(Ring& ring, size_t capacity, int64_t now_us, TimeOf time_of) {
  while (ring.size() > capacity) ring.pop_front();
  if (options_.retention_s <= 0) return;
  const auto oldest = now_us - static_cast<int64_t>(options_.retention_s * 1e6);
  // The newest point stays whatever its age: a plot always has the present.
  while (ring.size() > 1 && time_of(ring.front()) < oldest) ring.pop_front();
}

void History::add_scan(const FabricView& v, int64_t time_us) {
  auto p = std::make_shared<ScanPoint>();
  p->time_us = time_us;
  p->chips.assign(v.chips.size(), Rates{});
  p->temperature.resize(v.chips.size());
  float hottest = std::numeric_limits<float>::quiet_NaN();
  const bool with_ports = v.chips.size() <= options_.port_series_up_to_chips;
  if (with_ports) p->ports.assign(v.ports.size(), Rates{});
  double util_sum = 0;
  uint64_t linked = 0;
  float util_max = 0, retrans = 0, crc = 0;
  for (uint32_t n = 0; n < v.chips.size(); ++n) {
    const ChipView& c = v.chips[n];
    Rates& chip = p->chips[n];
    p->temperature[n] = c.temperature_c;
    if (std::isfinite(c.temperature_c) && !(c.temperature_c <= hottest)) hottest = c.temperature_c;
    for (uint8_t port = 0; port < c.ports; ++port) {
      const PortView& pv = v.port(n, port);
      if (pv.peer == fabric::kNoNode) continue;
      const Rates r = port_rates(pv);
      if (with_ports) p->ports[c.first_port + port] = r;
      chip[0] = std::max(chip[0], r[0]);
      chip[1] += r[1];
      chip[2] += r[2];
      util_sum += r[0];
      ++linked;
    }
    util_max = std::max(util_max, chip[0]);
    retrans += chip[1];
    crc += chip[2];
  }
  p->fabric = {linked ? static_cast<float>(util_sum / static_cast<double>(linked)) : 0.0f,
               util_max,
               retrans,
               crc,
               static_cast<float>(v.links_down()),
               hottest};
  const uint32_t cap = capacity(v.chips.size(), v.ports.size());
  std::lock_guard lock(mu_);
  // A fabric that changed size (an InfiniBand sweep found more switches) starts a new history:
  // the old points' chip ids no longer name the same chips.
  if (!scans_.empty() && (scans_.back()->chips.size() != p->chips.size() ||
                          scans_.back()->ports.size() != p->ports.size()))
    scans_.clear();
  scans_.push_back(std::move(p));
  trim_locked(scans_, cap, time_us, [](const auto& s) { return s->time_us; });
}

void History::add_faults(int64_t time_us, uint64_t open, uint64_t received) {
  std::lock_guard lock(mu_);
  if (!faults_.empty() && faults_.back().open == open && faults_.back().received == received)
    return;
  faults_.push_back({time_us, open, received});
  trim_locked(faults_, options_.max_points, time_us, [](const FaultPoint& f) { return f.time_us; });
}

size_t History::scan_points() const {
  std::lock_guard lock(mu_);
  return scans_.size();
}

size_t History::fault_points() const {
  std::lock_guard lock(mu_);
  return faults_.size();
}

Result<nlohmann::json> History::query(const FabricView& v, std::optional<uint32_t> chip,
                                      std::optional<uint32_t> port, int64_t since_us) const {
  if (port && !chip)
    return make_error(Code::kInvalidArgument, 8460, "history: port given without its chip");
  if (chip && *chip >= v.chips.size())
    return make_error(Code::kNotFound, 8461,
                      fmt::format("history: chip {} is not a chip of the fabric", *chip));
  if (port && (*port < v.port_base || *port - v.port_base >= v.chips[*chip].ports))
    return make_error(
        Code::kInvalidArgument, 8462,
        fmt::format("history: port = {}: chip {} ({}) has ports {}-{}", *port, *chip,
                    v.chips[*chip].name, v.port_base, v.port_base + v.chips[*chip].ports - 1));
  if (port && v.chips.size() > options_.port_series_up_to_chips)
    return make_error(Code::kInvalidArgument, 8463,
                      fmt::format("history: ports have no history on a fabric of {} chips (only "
                                  "up to {}); ask for the chip's",
                                  v.chips.size(), options_.port_series_up_to_chips));
  std::vector<std::shared_ptr<const ScanPoint>> scans;
  std::vector<FaultPoint> faults;
  {
    std::lock_guard lock(mu_);
    for (const auto& p : scans_)
      if (p->time_us > since_us) scans.push_back(p);
    for (const FaultPoint& f : faults_)
      if (f.time_us > since_us) faults.push_back(f);
  }
  nlohmann::json j{{"since_us", since_us},
                   {"capacity", capacity(v.chips.size(), v.ports.size())},
                   {"retention_s", options_.retention_s}};
  if (!chip) {
    j["scope"] = "fabric";
    nlohmann::json series = series_json(kFabricSeries);
    for (const auto& p : scans)
      for (size_t s = 0; s < kFabricSeries.size(); ++s)
        series[s]["points"].push_back({p->time_us, number(p->fabric[s])});
    nlohmann::json fs = series_json(kFaultSeries);
    for (const FaultPoint& f : faults) {
      fs[0]["points"].push_back({f.time_us, f.open});
      fs[1]["points"].push_back({f.time_us, f.received});
    }
    for (auto& s : fs) series.push_back(std::move(s));
    j["series"] = std::move(series);
    return j;
  }
  const ChipView& c = v.chips[*chip];
  j["chip"] = *chip;
  j["chip_name"] = c.name;
  j["location"] = location_text(c.location);
  nlohmann::json series = series_json(kRateSeries);
  if (!port) {
    j["scope"] = "chip";
    series[0]["help"] = "the highest utilisation of the chip's ports";
    series.push_back(series_json(std::array{kTemperatureSeries})[0]);
    for (const auto& p : scans) {
      for (size_t s = 0; s < kRateSeries.size(); ++s)
        series[s]["points"].push_back({p->time_us, number(p->chips[*chip][s])});
      series[kRateSeries.size()]["points"].push_back({p->time_us, number(p->temperature[*chip])});
    }
  } else {
    j["scope"] = "port";
    j["port"] = *port;
    const uint32_t slot = c.first_port + (*port - v.port_base);
    const PortView& pv = v.ports[slot];
    if (pv.peer != fabric::kNoNode)
      j["peer"] = fmt::format("{}:{}", v.chips[pv.peer].name, pv.peer_port + v.port_base);
    for (const auto& p : scans) {
      if (slot >= p->ports.size()) continue;
      for (size_t s = 0; s < kRateSeries.size(); ++s)
        series[s]["points"].push_back({p->time_us, number(p->ports[slot][s])});
    }
  }
  j["series"] = std::move(series);
  return j;
}

}  // namespace galaxy::nmd
