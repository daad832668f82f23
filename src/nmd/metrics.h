// Prometheus text exposition (format 0.0.4) for the management daemon's /metrics endpoint, and
// the same data as JSON for the web GUI (issue "Management console", item 4).
//
// Naming and label conventions, enforced at registration and set time (errors name the bad part):
//  * metric names match [a-zA-Z_:][a-zA-Z0-9_:]*; label names match [a-zA-Z_][a-zA-Z0-9_]* and
//    must not start with "__" (reserved by Prometheus);
//  * counters end in "_total"; gauges and histograms do not;
//  * quantities are in base units named by a suffix: "_seconds", "_bytes", "_ratio" (0..1, not
//    percent); names with scaled units ("_milliseconds", "_kilobytes", "_percent", ...) are
//    refused;
//  * a histogram's name must not end in "_bucket", "_sum" or "_count" (its series use those), its
//    series must not use the label "le", and no other family may take one of its series' names;
//  * every series of a family has the same label NAMES (any order in calls; the family's order,
//    fixed by declare_labels or by the first series, is the order printed), no name twice;
//  * labels are human-readable where an id alone would not be: a port series carries the chip id
//    and the chip's name, its physical location ("cabinet 2/chassis 1/switch 7"), the port and the
//    peer at the other end of the link.
//
// Families and series are thread-safe: the daemon updates them while the HTTP server exposes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy::nmd {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };

// "counter", "gauge", "histogram": the words of the # TYPE line.
const char* metric_type_name(MetricType t);

struct Label {
  std::string name, value;
};

// Exposition number format: integers without exponent ("42", not "4.2e+01"), "NaN", "+Inf",
// "-Inf", other values in the shortest form that reads back exactly.
std::string format_metric_value(double v);

// Label value escaping of the text format: backslash, double quote and newline.
std::string escape_label_value(const std::string& v);

Status validate_metric_name(const std::string& name);
Status validate_label_name(const std::string& name);

// One # HELP / # TYPE block and its series. Create through MetricRegistry::family, which validates
// the name, type and buckets (validate() below) before constructing.
class MetricFamily {
 public:
  // Histogram buckets are upper bounds, strictly ascending; the "+Inf" bucket is implicit (a
  // trailing +Inf given here is dropped).
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<double> buckets = {});
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  static Status validate(const std::string& name, const std::string& help, MetricType type,
                         const std::vector<double>& buckets);

  // Fixes the label names before the first series (the catalogue does this so that a series with
  // the wrong labels is refused); an error if series with other names already exist.
  Status declare_labels(const std::vector<std::string>& names);

  Status set(const std::vector<Label>& labels, double value);      // gauge; counter, never down
  Status add(const std::vector<Label>& labels, double delta);      // counter (delta >= 0) or gauge
  Status observe(const std::vector<Label>& labels, double value);  // histogram

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<double>& buckets() const { return buckets_; }
  std::vector<std::string> label_names() const;
  size_t series_count() const;

  // Current value of a counter/gauge series, or the error kNotFound.
  Result<double> value(const std::vector<Label>& labels) const;

  void append_exposition(std::string& out) const;
  nlohmann::json to_json() const;

 private:
  struct Series {
    double value = 0;
    std::vector<uint64_t> bucket_counts;  // per bucket, not cumulative; last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  // Orders label value tuples with all-digit values compared as numbers (port 2 before port 10).
  struct NaturalLess {
    bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const;
  };

  // Label values in the family's label-name order; fixes the label names on first use.
  Result<std::vector<std::string>> key_locked(const std::vector<Label>& labels);
  Result<std::vector<std::string>> lookup_key_locked(const std::vector<Label>& labels) const;
  std::string series_name_locked(const std::vector<std::string>& key) const;
  std::string label_text_locked(const std::vector<std::string>& key, const char* le) const;

  std::string name_, help_;
  MetricType type_;
  std::vector<double> buckets_;
  mutable std::mutex mu_;
  bool labels_fixed_ = false;
  std::vector<std::string> label_names_;
  std::map<std::vector<std::string>, Series, NaturalLess> series_;
};

class MetricRegistry {
 public:
  // Get-or-create. Asking again with the same type, help and buckets returns the same family;
  // another type, help or buckets is an error, as is a name clashing with a histogram's series.
  Result<MetricFamily*> family(const std::string& name, const std::string& help, MetricType type,
                               std::vector<double> buckets = {});
  MetricFamily* find(const std::string& name) const;  // nullptr if absent

  // Text format 0.0.4 (Content-Type: text/plain; version=0.0.4): families sorted by name, series
  // by label values, histograms as cumulative _bucket{le=...} ending at "+Inf", then _sum, _count.
  std::string exposition() const;
  // [{name, help, type, samples:[{labels:{..}, value}]}]; a histogram sample is
  // {labels, buckets:[{le, count}], sum, count} with cumulative counts. Non-finite numbers are
  // the strings "NaN", "+Inf", "-Inf" (JSON has no such numbers); so is the last bucket's le.
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_;
};

// Galaxy's metric catalogue: the names the daemon uses.
inline constexpr const char* kPortTxPacketsTotal = "galaxy_port_tx_packets_total";
inline constexpr const char* kPortRxPacketsTotal = "galaxy_port_rx_packets_total";
inline constexpr const char* kPortTxFlitsTotal = "galaxy_port_tx_flits_total";
inline constexpr const char* kPortRxFlitsTotal = "galaxy_port_rx_flits_total";
inline constexpr const char* kPortRetransmissionsTotal = "galaxy_port_retransmissions_total";
inline constexpr const char* kPortCrcErrorsTotal = "galaxy_port_crc_errors_total";
inline constexpr const char* kPortDirtyDiscardsTotal = "galaxy_port_dirty_discards_total";
inline constexpr const char* kPortUtilisationRatio = "galaxy_port_utilisation_ratio";
inline constexpr const char* kPortLinkUp = "galaxy_port_link_up";
inline constexpr const char* kChipTemperatureCelsius = "galaxy_chip_temperature_celsius";
inline constexpr const char* kChipVoltageVolts = "galaxy_chip_voltage_volts";
inline constexpr const char* kFaultsTotal = "galaxy_faults_total";
inline constexpr const char* kAlarmsActive = "galaxy_alarms_active";
inline constexpr const char* kScanDurationSeconds = "galaxy_scan_duration_seconds";
inline constexpr const char* kSweepDurationSeconds = "galaxy_sweep_duration_seconds";
inline constexpr const char* kMgmtRequestLatencySeconds = "galaxy_mgmt_request_latency_seconds";
inline constexpr const char* kMgmtRequestsTotal = "galaxy_mgmt_requests_total";

// Label names of the per-port families, in printed order.
inline const std::vector<std::string>& port_label_names() {
  static const std::vector<std::string> names{"chip", "chip_name", "location", "port", "peer"};
  return names;
}

// The labels of one port series. chip: the numeric id; chip_name: its human-readable name;
// location: "cabinet C/chassis H/switch S"; peer: "<chip_name>:<port>" at the other end, or "".
std::vector<Label> port_labels(uint32_t chip, const std::string& chip_name,
                               const std::string& location, uint32_t port, const std::string& peer);

// Registers every catalogue family with its help text, buckets and declared label names.
Status register_galaxy_metrics(MetricRegistry& r);

}  // namespace galaxy::nmd
