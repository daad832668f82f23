#include "nmd/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace galaxy::nmd {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

bool is_name_char(char c, bool colon) {
  return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

// Scaled units the naming convention replaces by base units (seconds, bytes, ratio).
constexpr const char* kNonBaseUnits[] = {
    "_milliseconds", "_microseconds", "_nanoseconds", "_minutes", "_hours",  "_days",
    "_kilobytes",    "_megabytes",    "_gigabytes",   "_bits",    "_percent"};

constexpr const char* kHistogramSuffixes[] = {"_bucket", "_sum", "_count"};

std::string escape_help(const std::string& h) {
  std::string out;
  out.reserve(h.size());
  for (char c : h) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const char* metric_type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Exact integers below 2^53 print as integers; fmt's shortest form would print 1e+06.
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Status validate_metric_name(const std::string& name) {
  if (name.empty()) return make_error(Code::kInvalidArgument, 8100, "metric name is empty");
  for (size_t i = 0; i < name.size(); ++i) {
    if (!(i == 0 ? is_name_start(name[i], true) : is_name_char(name[i], true))) {
      return make_error(Code::kInvalidArgument, 8101,
                        fmt::format("metric name '{}' has the invalid character '{}' at {}; "
                                    "names match [a-zA-Z_:][a-zA-Z0-9_:]*",
                                    name, name[i], i));
    }
  }
  return Status();
}

Status validate_label_name(const std::string& name) {
  if (name.empty()) return make_error(Code::kInvalidArgument, 8102, "label name is empty");
  for (size_t i = 0; i < name.size(); ++i) {
    if (!(i == 0 ? is_name_start(name[i], false) : is_name_char(name[i], false))) {
      return make_error(Code::kInvalidArgument, 8103,
                        fmt::format("label name '{}' has the invalid character '{}' at {}; "
                                    "names match [a-zA-Z_][a-zA-Z0-9_]*",
                                    name, name[i], i));
    }
  }
  if (name.rfind("__", 0) == 0) {
    return make_error(
        Code::kInvalidArgument, 8104,
        fmt::format("label name '{}' starts with '__', reserved by Prometheus", name));
  }
  return Status();
}

// ---------------------------------------------------------------------------------------------
// MetricFamily

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type,
                           std::vector<double> buckets)
    : name_(std::move(name)), help_(std::move(help)), type_(type), buckets_(std::move(buckets)) {
  if (!buckets_.empty() && std::isinf(buckets_.back()) && buckets_.back() > 0) buckets_.pop_back();
}

Status MetricFamily::validate(const std::string& name, const std::string& help, MetricType type,
                              const std::vector<double>& buckets) {
  GALAXY_TRY(validate_metric_name(name));
  if (help.empty()) {
    return make_error(Code::kInvalidArgument, 8105,
                      fmt::format("metric '{}' has no help text", name));
  }
  for (const char* unit : kNonBaseUnits) {
    if (name.find(unit) != std::string::npos) {
      return make_error(Code::kInvalidArgument, 8106,
                        fmt::format("metric name '{}' uses the scaled unit '{}'; use base units "
                                    "(_seconds, _bytes, _ratio)",
                                    name, unit));
    }
  }
  const bool total = ends_with(name, "_total");
  if (type == MetricType::kCounter && !total) {
    return make_error(Code::kInvalidArgument, 8107,
                      fmt::format("counter name '{}' does not end in '_total'", name));
  }
  if (type != MetricType::kCounter && total) {
    return make_error(Code::kInvalidArgument, 8108,
                      fmt::format("{} name '{}' ends in '_total', reserved for counters",
                                  metric_type_name(type), name));
  }
  if (type != MetricType::kHistogram) {
    if (!buckets.empty()) {
      return make_error(Code::kInvalidArgument, 8109,
                        fmt::format("{} '{}' has buckets; only histograms have buckets",
                                    metric_type_name(type), name));
    }
    return Status();
  }
  for (const char* suffix : kHistogramSuffixes) {
    if (ends_with(name, suffix)) {
      return make_error(
          Code::kInvalidArgument, 8110,
          fmt::format("histogram name '{}' ends in '{}', which its own series use", name, suffix));
    }
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    const bool last = i + 1 == buckets.size();
    if (std::isnan(buckets[i]) || (std::isinf(buckets[i]) && !(last && buckets[i] > 0))) {
      return make_error(Code::kInvalidArgument, 8111,
                        fmt::format("histogram '{}' bucket {} = {} is not a finite bound", name, i,
                                    format_metric_value(buckets[i])));
    }
    if (i > 0 && !(buckets[i] > buckets[i - 1])) {
      return make_error(
          Code::kInvalidArgument, 8112,
          fmt::format("histogram '{}' bucket {} = {} is not above bucket {} = {}", name, i,
                      format_metric_value(buckets[i]), i - 1, format_metric_value(buckets[i - 1])));
    }
  }
  return Status();
}

bool MetricFamily::NaturalLess::operator()(const std::vector<std::string>& a,
                                           const std::vector<std::string>& b) const {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;
    if (all_digits(a[i]) && all_digits(b[i])) return std::stoll(a[i]) < std::stoll(b[i]);
    return a[i] < b[i];
  }
  return a.size() < b.size();
}

Status MetricFamily::declare_labels(const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    GALAXY_TRY(validate_label_name(names[i]));
    if (type_ == MetricType::kHistogram && names[i] == "le") {
      return make_error(Code::kInvalidArgument, 8113,
                        fmt::format("histogram '{}' cannot use the label 'le'", name_));
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) {
        return make_error(
            Code::kInvalidArgument, 8114,
            fmt::format("metric '{}': label name '{}' appears twice", name_, names[i]));
      }
    }
  }
  std::lock_guard lock(mu_);
  if (labels_fixed_ && label_names_ != names) {
    return make_error(Code::kInvalidArgument, 8115,
                      fmt::format("metric '{}': label names already fixed as [{}]", name_,
                                  fmt::join(label_names_, ",")));
  }
  label_names_ = names;
  labels_fixed_ = true;
  return Status();
}

std::vector<std::string> MetricFamily::label_names() const {
  std::lock_guard lock(mu_);
  return label_names_;
}

size_t MetricFamily::series_count() const {
  std::lock_guard lock(mu_);
  return series_.size();
}

std::string MetricFamily::series_name_locked(const std::vector<std::string>& key) const {
  std::string out = name_ + "{";
  for (size_t i = 0; i < key.size(); ++i) {
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", label_names_[i], escape_label_value(key[i]));
  }
  return out + "}";
}

Result<std::vector<std::string>> MetricFamily::lookup_key_locked(
    const std::vector<Label>& labels) const {
  auto describe = [&] {
    std::string s;
    for (const Label& l : labels) s += fmt::format("{}{}", s.empty() ? "" : ",", l.name);
    return s;
  };
  std::vector<std::string> key(label_names_.size());
  std::vector<bool> seen(label_names_.size(), false);
  if (labels.size() != label_names_.size()) {
    return make_error(Code::kInvalidArgument, 8116,
                      fmt::format("metric '{}': labels [{}] do not match the family's [{}]", name_,
                                  describe(), fmt::join(label_names_, ",")));
  }
  for (const Label& l : labels) {
    auto it = std::find(label_names_.begin(), label_names_.end(), l.name);
    if (it == label_names_.end()) {
      return make_error(Code::kInvalidArgument, 8117,
                        fmt::format("metric '{}': label '{}' is not among the family's [{}]", name_,
                                    l.name, fmt::join(label_names_, ",")));
    }
    const size_t i = static_cast<size_t>(it - label_names_.begin());
    if (seen[i]) {
      return make_error(Code::kInvalidArgument, 8118,
                        fmt::format("metric '{}': label name '{}' appears twice", name_, l.name));
    }
    seen[i] = true;
    key[i] = l.value;
  }
  return key;
}

Result<std::vector<std::string>> MetricFamily::key_locked(const std::vector<Label>& labels) {
  if (!labels_fixed_) {
    std::vector<std::string> names;
    for (const Label& l : labels) {
      GALAXY_TRY(validate_label_name(l.name));
      if (type_ == MetricType::kHistogram && l.name == "le") {
        return make_error(Code::kInvalidArgument, 8119,
                          fmt::format("histogram '{}' cannot use the label 'le'", name_));
      }
      if (std::find(names.begin(), names.end(), l.name) != names.end()) {
        return make_error(Code::kInvalidArgument, 8120,
                          fmt::format("metric '{}': label name '{}' appears twice", name_, l.name));
      }
      names.push_back(l.name);
    }
    label_names_ = std::move(names);
    labels_fixed_ = true;
  }
  return lookup_key_locked(labels);
}

Status MetricFamily::set(const std::vector<Label>& labels, double value) {
  if (type_ == MetricType::kHistogram) {
    return make_error(Code::kInvalidArgument, 8121,
                      fmt::format("set() on histogram '{}'; use observe()", name_));
  }
  std::lock_guard lock(mu_);
  auto key = key_locked(labels);
  if (!key) return key.error();
  if (type_ == MetricType::kCounter) {
    auto it = series_.find(*key);
    const double old = it == series_.end() ? 0.0 : it->second.value;
    if (std::isnan(value) || value < old) {
      return make_error(Code::kInvalidArgument, 8122,
                        fmt::format("counter {} cannot go from {} to {}", series_name_locked(*key),
                                    format_metric_value(old), format_metric_value(value)));
    }
  }
  series_[*key].value = value;
  return Status();
}

Status MetricFamily::add(const std::vector<Label>& labels, double delta) {
  if (type_ == MetricType::kHistogram) {
    return make_error(Code::kInvalidArgument, 8123,
                      fmt::format("add() on histogram '{}'; use observe()", name_));
  }
  std::lock_guard lock(mu_);
  auto key = key_locked(labels);
  if (!key) return key.error();
  if (type_ == MetricType::kCounter && (std::isnan(delta) || delta < 0)) {
    return make_error(Code::kInvalidArgument, 8124,
                      fmt::format("counter {} cannot add {}", series_name_locked(*key),
                                  format_metric_value(delta)));
  }
  series_[*key].value += delta;
  return Status();
}

Status MetricFamily::observe(const std::vector<Label>& labels, double value) {
  if (type_ != MetricType::kHistogram) {
    return make_error(
        Code::kInvalidArgument, 8125,
        fmt::format("observe() on {} '{}'; use set() or add()", metric_type_name(type_), name_));
  }
  std::lock_guard lock(mu_);
  auto key = key_locked(labels);
  if (!key) return key.error();
  if (std::isnan(value)) {
    return make_error(Code::kInvalidArgument, 8126,
                      fmt::format("histogram {} cannot observe NaN", series_name_locked(*key)));
  }
  Series& s = series_[*key];
  if (s.bucket_counts.empty()) s.bucket_counts.assign(buckets_.size() + 1, 0);
  const size_t b = static_cast<size_t>(std::lower_bound(buckets_.begin(), buckets_.end(), value) -
                                       buckets_.begin());
  ++s.bucket_counts[b];
  s.sum += value;
  ++s.count;
  return Status();
}

Result<double> MetricFamily::value(const std::vector<Label>& labels) const {
  std::lock_guard lock(mu_);
  auto key = lookup_key_locked(labels);
  if (!key) return key.error();
  auto it = series_.find(*key);
  if (it == series_.end()) {
    return make_error(Code::kNotFound, 8127, fmt::format("no series {}", series_name_locked(*key)));
  }
  return it->second.value;
}

std::string MetricFamily::label_text_locked(const std::vector<std::string>& key,
                                            const char* le) const {
  if (key.empty() && le == nullptr) return "";
  std::string out = "{";
  for (size_t i = 0; i < key.size(); ++i) {
    if (i) out += ',';
    out += label_names_[i];
    out += "=\"";
    out += escape_label_value(key[i]);
    out += '"';
  }
  if (le != nullptr) {
    if (!key.empty()) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  return out + "}";
}

void MetricFamily::append_exposition(std::string& out) const {
  std::lock_guard lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, escape_help(help_), name_,
                     metric_type_name(type_));
  for (const auto& [key, s] : series_) {
    if (type_ != MetricType::kHistogram) {
      out += fmt::format("{}{} {}\n", name_, label_text_locked(key, nullptr),
                         format_metric_value(s.value));
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= buckets_.size(); ++b) {
      cumulative += s.bucket_counts[b];
      const std::string le = b < buckets_.size() ? format_metric_value(buckets_[b]) : "+Inf";
      out += fmt::format("{}_bucket{} {}\n", name_, label_text_locked(key, le.c_str()), cumulative);
    }
    const std::string labels = label_text_locked(key, nullptr);
    out += fmt::format("{}_sum{} {}\n", name_, labels, format_metric_value(s.sum));
    out += fmt::format("{}_count{} {}\n", name_, labels, s.count);
  }
}

nlohmann::json MetricFamily::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& [key, s] : series_) {
    nlohmann::json labels = nlohmann::json::object();
    for (size_t i = 0; i < key.size(); ++i) labels[label_names_[i]] = key[i];
    if (type_ != MetricType::kHistogram) {
      samples.push_back({{"labels", labels}, {"value", json_number(s.value)}});
      continue;
    }
    nlohmann::json buckets = nlohmann::json::array();
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= buckets_.size(); ++b) {
      cumulative += s.bucket_counts[b];
      buckets.push_back(
          {{"le", json_number(b < buckets_.size() ? buckets_[b]
                                                  : std::numeric_limits<double>::infinity())},
           {"count", cumulative}});
    }
    samples.push_back({{"labels", labels},
                       {"buckets", buckets},
                       {"sum", json_number(s.sum)},
                       {"count", s.count}});
  }
  return {
      {"name", name_}, {"help", help_}, {"type", metric_type_name(type_)}, {"samples", samples}};
}

// ---------------------------------------------------------------------------------------------
// MetricRegistry

Result<MetricFamily*> MetricRegistry::family(const std::string& name, const std::string& help,
                                             MetricType type, std::vector<double> buckets) {
  GALAXY_TRY(MetricFamily::validate(name, help, type, buckets));
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    MetricFamily& f = *it->second;
    if (f.type() != type) {
      return make_error(Code::kInvalidArgument, 8128,
                        fmt::format("metric '{}' is registered as a {}, not a {}", name,
                                    metric_type_name(f.type()), metric_type_name(type)));
    }
    if (f.help() != help) {
      return make_error(Code::kInvalidArgument, 8129,
                        fmt::format("metric '{}' is registered with the help '{}', not '{}'", name,
                                    f.help(), help));
    }
    MetricFamily probe(name, help, type, std::move(buckets));
    if (probe.buckets() != f.buckets()) {
      return make_error(Code::kInvalidArgument, 8130,
                        fmt::format("histogram '{}' is registered with other buckets", name));
    }
    return &f;
  }
  // A histogram's series are <name>_bucket, _sum and _count: no other family may take those names.
  for (const auto& [other, f] : families_) {
    for (const char* suffix : kHistogramSuffixes) {
      if ((f->type() == MetricType::kHistogram && name == other + suffix) ||
          (type == MetricType::kHistogram && other == name + suffix)) {
        return make_error(Code::kInvalidArgument, 8131,
                          fmt::format("metric '{}' clashes with the series of histogram '{}'", name,
                                      type == MetricType::kHistogram ? name : other));
      }
    }
  }
  auto f = std::make_unique<MetricFamily>(name, help, type, std::move(buckets));
  MetricFamily* raw = f.get();
  families_.emplace(name, std::move(f));
  return raw;
}

MetricFamily* MetricRegistry::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  return it == families_.end() ? nullptr : it->second.get();
}

std::string MetricRegistry::exposition() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) f->append_exposition(out);
  return out;
}

nlohmann::json MetricRegistry::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, f] : families_) out.push_back(f->to_json());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Catalogue

std::vector<Label> port_labels(uint32_t chip, const std::string& chip_name,
                               const std::string& location, uint32_t port,
                               const std::string& peer) {
  return {{"chip", std::to_string(chip)},
          {"chip_name", chip_name},
          {"location", location},
          {"port", std::to_string(port)},
          {"peer", peer}};
}

Status register_galaxy_metrics(MetricRegistry& r) {
  struct Entry {
    const char* name;
    const char* help;
    MetricType type;
    std::vector<std::string> labels;
    std::vector<double> buckets;
  };
  const std::vector<std::string>& port = port_label_names();
  // Scans and sweeps span a few milliseconds (one chip) to minutes (a full machine); management
  // requests from sub-millisecond (local) to the multi-second retry timeouts.
  const std::vector<double> sweep_buckets{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  const std::vector<double> latency_buckets{0.0001, 0.0005, 0.001, 0.005, 0.01,
                                            0.05,   0.1,    0.5,   1,     5};
  const std::vector<Entry> catalogue{
      {kPortTxPacketsTotal, "Packets sent by the port.", MetricType::kCounter, port, {}},
      {kPortRxPacketsTotal, "Packets received by the port.", MetricType::kCounter, port, {}},
      {kPortTxFlitsTotal, "Flits sent by the port.", MetricType::kCounter, port, {}},
      {kPortRxFlitsTotal, "Flits received by the port.", MetricType::kCounter, port, {}},
      {kPortRetransmissionsTotal,
       "Link-level retransmissions by the port.",
       MetricType::kCounter,
       port,
       {}},
      {kPortCrcErrorsTotal, "Packets received with a CRC error.", MetricType::kCounter, port, {}},
      {kPortDirtyDiscardsTotal,
       "Packets discarded as dirty (after a link fault).",
       MetricType::kCounter,
       port,
       {}},
      {kPortUtilisationRatio,
       "Fraction of the link bandwidth in use (0..1).",
       MetricType::kGauge,
       port,
       {}},
      {kPortLinkUp, "1 if the port's link is up, 0 if down.", MetricType::kGauge, port, {}},
      {kChipTemperatureCelsius,
       "The chip's TEMPERATURE as the last scan read it.",
       MetricType::kGauge,
       {"chip", "chip_name", "location"},
       {}},
      {kChipVoltageVolts,
       "The chip's core VOLTAGE as the last scan read it.",
       MetricType::kGauge,
       {"chip", "chip_name", "location"},
       {}},
      {kFaultsTotal,
       "Fault reports received, by severity and cause.",
       MetricType::kCounter,
       {"severity", "cause"},
       {}},
      {kAlarmsActive,
       "Alarms currently raised, by severity.",
       MetricType::kGauge,
       {"severity"},
       {}},
      {kScanDurationSeconds,
       "Duration of fabric scans.",
       MetricType::kHistogram,
       {},
       sweep_buckets},
      {kSweepDurationSeconds,
       "Duration of fabric sweeps.",
       MetricType::kHistogram,
       {},
       sweep_buckets},
      {kMgmtRequestLatencySeconds,
       "Latency of management requests, by request type.",
       MetricType::kHistogram,
       {"type"},
       latency_buckets},
      {kMgmtRequestsTotal,
       "Management requests, by request type and outcome.",
       MetricType::kCounter,
       {"type", "outcome"},
       {}},
  };
  for (const Entry& e : catalogue) {
    auto f = r.family(e.name, e.help, e.type, e.buckets);
    if (!f) return f.error();
    GALAXY_TRY((*f)->declare_labels(e.labels));
  }
  return Status();
}

}  // namespace galaxy::nmd
