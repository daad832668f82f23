#include "nmd/metrics.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace galaxy::nmd {
namespace {

// ---------------------------------------------------------------------------------------------
// An independent checker of the text format 0.0.4, written from the format description rather
// than from metrics.cc, so that the exposition is not only compared with itself.

struct ParsedSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  double value = 0;
};

bool parse_name(const std::string& s, size_t& i, bool colon, std::string& out) {
  auto start = [&](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colon && c == ':');
  };
  if (i >= s.size() || !start(s[i])) return false;
  size_t b = i;
  while (i < s.size() && (start(s[i]) || std::isdigit(static_cast<unsigned char>(s[i])))) ++i;
  out = s.substr(b, i - b);
  return true;
}

bool parse_value(const std::string& t, double& v) {
  if (t == "NaN")
    v = std::numeric_limits<double>::quiet_NaN();
  else if (t == "+Inf")
    v = std::numeric_limits<double>::infinity();
  else if (t == "-Inf")
    v = -std::numeric_limits<double>::infinity();
  else {
    if (t.empty()) return false;
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) return false;
  }
  return true;
}

// Returns an empty string on success, else the reason.
std::string parse_sample(const std::string& line, ParsedSample& s) {
  size_t i = 0;
  if (!parse_name(line, i, true, s.name)) return "bad metric name";
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      std::string lname, lvalue;
      if (!parse_name(line, i, false, lname)) return "bad label name";
      if (line.compare(i, 2, "=\"") != 0) return "expected =\" after label name";
      i += 2;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size()) return "dangling backslash";
          char e = line[i + 1];
          if (e == 'n')
            lvalue += '\n';
          else if (e == '\\' || e == '"')
            lvalue += e;
          else
            return "bad escape";
          i += 2;
        } else {
          lvalue += line[i++];
        }
      }
      if (i >= line.size()) return "unterminated label value";
      ++i;
      s.labels.emplace_back(lname, lvalue);
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return "unterminated label set";
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return "expected a space before the value";
  if (!parse_value(line.substr(i + 1), s.value)) return "bad value '" + line.substr(i + 1) + "'";
  return "";
}

std::vector<std::string> check_exposition(const std::string& text) {
  std::vector<std::string> errors;
  std::map<std::string, std::string> types, helps;
  std::set<std::string> finished_families, series_seen;
  std::string current_family;
  // Per histogram series (family + labels without le): bucket (le, count) list, sum, count.
  struct Hist {
    std::vector<std::pair<double, double>> buckets;
    bool has_sum = false, has_count = false;
    double count = 0;
  };
  std::map<std::string, Hist> hists;
  auto fail = [&](size_t n, const std::string& why) {
    errors.push_back("line " + std::to_string(n) + ": " + why);
  };
  auto enter_family = [&](size_t n, const std::string& fam) {
    if (fam == current_family) return;
    if (finished_families.count(fam)) fail(n, "family " + fam + " is not contiguous");
    if (!current_family.empty()) finished_families.insert(current_family);
    current_family = fam;
  };
  if (!text.empty() && text.back() != '\n') errors.push_back("no final newline");
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) {
      fail(n, "empty line");
      continue;
    }
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;
      enter_family(n, name);
      std::string rest;
      std::getline(ls, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      auto& slot = kind == "HELP" ? helps : types;
      if (slot.count(name)) fail(n, kind + " repeated for " + name);
      if (kind == "TYPE" && rest != "counter" && rest != "gauge" && rest != "histogram" &&
          rest != "summary" && rest != "untyped") {
        fail(n, "unknown type " + rest);
      }
      slot[name] = rest;
      continue;
    }
    ParsedSample s;
    std::string why = parse_sample(line, s);
    if (!why.empty()) {
      fail(n, why + ": " + line);
      continue;
    }
    std::string family = s.name, suffix;
    if (!types.count(family)) {
      for (const char* suf : {"_bucket", "_sum", "_count"}) {
        std::string sf(suf);
        if (s.name.size() > sf.size() &&
            s.name.compare(s.name.size() - sf.size(), sf.size(), sf) == 0) {
          std::string base = s.name.substr(0, s.name.size() - sf.size());
          if (types.count(base) && types[base] == "histogram") {
            family = base;
            suffix = sf;
          }
        }
      }
    }
    if (!types.count(family)) {
      fail(n, "sample " + s.name + " has no TYPE before it");
      continue;
    }
    if (!helps.count(family)) fail(n, "sample " + s.name + " has no HELP before it");
    enter_family(n, family);
    std::set<std::string> lnames;
    std::string key = s.name, hist_key = family;
    std::string le;
    bool has_le = false;
    for (auto& [k, v] : s.labels) {
      if (!lnames.insert(k).second) fail(n, "label " + k + " twice");
      key += "|" + k + "=" + v;
      if (k == "le") {
        has_le = true;
        le = v;
      } else {
        hist_key += "|" + k + "=" + v;
      }
    }
    if (!series_seen.insert(key).second) fail(n, "duplicate series " + line);
    if (types[family] == "counter" && (std::isnan(s.value) || s.value < 0)) {
      fail(n, "negative or NaN counter");
    }
    if (types[family] != "histogram") {
      if (has_le) fail(n, "le label outside a histogram");
      continue;
    }
    Hist& h = hists[hist_key];
    if (suffix == "_bucket") {
      double bound;
      if (!has_le || !parse_value(le, bound)) {
        fail(n, "bucket without a valid le");
        continue;
      }
      if (h.has_sum || h.has_count) fail(n, "bucket after _sum/_count");
      if (!h.buckets.empty()) {
        if (!(bound > h.buckets.back().first)) fail(n, "le not ascending");
        if (s.value < h.buckets.back().second) fail(n, "bucket counts not cumulative");
      }
      h.buckets.emplace_back(bound, s.value);
    } else if (suffix == "_sum") {
      h.has_sum = true;
    } else if (suffix == "_count") {
      h.has_count = true;
      h.count = s.value;
    } else {
      fail(n, "histogram sample without _bucket/_sum/_count suffix");
    }
  }
  for (auto& [k, h] : hists) {
    if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) {
      errors.push_back(k + ": buckets do not end with le=\"+Inf\"");
    } else if (!h.has_count || h.count != h.buckets.back().second) {
      errors.push_back(k + ": _count differs from the +Inf bucket");
    }
    if (!h.has_sum) errors.push_back(k + ": no _sum");
  }
  for (auto& [name, t] : types) {
    if (!helps.count(name)) errors.push_back(name + ": TYPE without HELP");
  }
  return errors;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += s + "\n";
  return out;
}

// ---------------------------------------------------------------------------------------------

const std::string kOddValue = "x\"y\\z\nw";

void fill_small(MetricRegistry& r) {
  auto c = r.family("demo_requests_total", "Requests handled.", MetricType::kCounter);
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE((*c)->add({{"path", kOddValue}, {"code", "200"}}, 2).ok());
  EXPECT_TRUE((*c)->add({{"path", "/a"}, {"code", "200"}}, 3).ok());
  // Label order in the call does not matter: the family's order (from the first series) is used.
  EXPECT_TRUE((*c)->add({{"code", "200"}, {"path", kOddValue}}, 1).ok());
  auto g = r.family("demo_temperature_celsius", "Board temperature.\nIn C \\ degrees.",
                    MetricType::kGauge);
  EXPECT_TRUE(g.ok());
  EXPECT_TRUE((*g)->set({}, 21.5).ok());
  auto h =
      r.family("demo_latency_seconds", "Request latency.", MetricType::kHistogram, {0.1, 0.5, 1});
  EXPECT_TRUE(h.ok());
  for (double v : {0.25, 0.5, 0.5, 2.0}) EXPECT_TRUE((*h)->observe({{"op", "read"}}, v).ok());
}

TEST(MetricsTest, GoldenExposition) {
  MetricRegistry r;
  fill_small(r);
  const std::string expected =
      "# HELP demo_latency_seconds Request latency.\n"
      "# TYPE demo_latency_seconds histogram\n"
      "demo_latency_seconds_bucket{op=\"read\",le=\"0.1\"} 0\n"
      "demo_latency_seconds_bucket{op=\"read\",le=\"0.5\"} 3\n"
      "demo_latency_seconds_bucket{op=\"read\",le=\"1\"} 3\n"
      "demo_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
      "demo_latency_seconds_sum{op=\"read\"} 3.25\n"
      "demo_latency_seconds_count{op=\"read\"} 4\n"
      "# HELP demo_requests_total Requests handled.\n"
      "# TYPE demo_requests_total counter\n"
      "demo_requests_total{path=\"/a\",code=\"200\"} 3\n"
      "demo_requests_total{path=\"x\\\"y\\\\z\\nw\",code=\"200\"} 3\n"
      "# HELP demo_temperature_celsius Board temperature.\\nIn C \\\\ degrees.\n"
      "# TYPE demo_temperature_celsius gauge\n"
      "demo_temperature_celsius 21.5\n";
  EXPECT_EQ(r.exposition(), expected);
  EXPECT_EQ(join(check_exposition(r.exposition())), "");
}

TEST(MetricsTest, ValueFormatting) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(1e6), "1000000");
  EXPECT_EQ(format_metric_value(-42), "-42");
  EXPECT_EQ(format_metric_value(12345678901234.0), "12345678901234");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  double v = 0;
  ASSERT_TRUE(parse_value(format_metric_value(0.1 + 0.2), v));
  EXPECT_EQ(v, 0.1 + 0.2);  // shortest form still reads back exactly
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsTest, SeriesSortedNaturally) {
  MetricRegistry r;
  auto g = r.family("demo_up", "Up.", MetricType::kGauge);
  ASSERT_TRUE(g.ok());
  for (const char* p : {"10", "2", "1"}) ASSERT_TRUE((*g)->set({{"port", p}}, 1).ok());
  EXPECT_EQ(r.exposition(),
            "# HELP demo_up Up.\n# TYPE demo_up gauge\n"
            "demo_up{port=\"1\"} 1\ndemo_up{port=\"2\"} 1\ndemo_up{port=\"10\"} 1\n");
}

TEST(MetricsTest, CounterDecreaseRefused) {
  MetricRegistry r;
  auto c = r.family("demo_errors_total", "Errors.", MetricType::kCounter);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->set({{"port", "3"}}, 10).ok());
  Status s = (*c)->set({{"port", "3"}}, 9);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("demo_errors_total{port=\"3\"}"), std::string::npos)
      << s.to_string();
  EXPECT_FALSE((*c)->add({{"port", "3"}}, -1).ok());
  EXPECT_FALSE((*c)->add({{"port", "3"}}, std::nan("")).ok());
  EXPECT_TRUE((*c)->set({{"port", "3"}}, 10).ok());  // equal is not a decrease
  EXPECT_EQ(*(*c)->value({{"port", "3"}}), 10);
  // A gauge may go down.
  auto g = r.family("demo_level", "Level.", MetricType::kGauge);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE((*g)->set({}, 5).ok());
  EXPECT_TRUE((*g)->add({}, -7).ok());
  EXPECT_EQ(*(*g)->value({}), -2);
}

void expect_error_naming(const Status& s, const std::string& what) {
  ASSERT_FALSE(s.ok()) << what;
  EXPECT_NE(s.error().message.find(what), std::string::npos) << s.to_string();
  EXPECT_GE(s.error().id, 8100);
  EXPECT_LE(s.error().id, 8199);
}

TEST(MetricsTest, InvalidNamesRefused) {
  MetricRegistry r;
  expect_error_naming(r.family("9lives", "h", MetricType::kGauge).status(), "9lives");
  expect_error_naming(r.family("bad-name", "h", MetricType::kGauge).status(), "bad-name");
  expect_error_naming(r.family("", "h", MetricType::kGauge).status(), "empty");
  expect_error_naming(r.family("demo_packets", "h", MetricType::kCounter).status(),
                      "demo_packets");  // counter without _total
  expect_error_naming(r.family("demo_size_total", "h", MetricType::kGauge).status(),
                      "demo_size_total");
  expect_error_naming(r.family("demo_latency_milliseconds", "h", MetricType::kGauge).status(),
                      "_milliseconds");
  expect_error_naming(r.family("demo_x_count", "h", MetricType::kHistogram).status(),
                      "demo_x_count");
  expect_error_naming(r.family("demo_h", "h", MetricType::kHistogram, {1, 1}).status(), "demo_h");
  expect_error_naming(r.family("demo_g", "", MetricType::kGauge).status(), "demo_g");
  EXPECT_TRUE(r.family("ns:demo_ok", "h", MetricType::kGauge).ok());

  auto g = r.family("demo_gauge", "h", MetricType::kGauge);
  ASSERT_TRUE(g.ok());
  expect_error_naming((*g)->set({{"0port", "1"}}, 1), "0port");
  expect_error_naming((*g)->set({{"por-t", "1"}}, 1), "por-t");
  expect_error_naming((*g)->set({{"__name", "1"}}, 1), "__name");
  expect_error_naming((*g)->set({{"port", "1"}, {"port", "2"}}, 1), "port");
  EXPECT_EQ((*g)->series_count(), 0u);
  auto h = r.family("demo_wait_seconds", "h", MetricType::kHistogram, {1});
  ASSERT_TRUE(h.ok());
  expect_error_naming((*h)->observe({{"le", "1"}}, 1), "le");
  expect_error_naming((*h)->set({}, 1), "demo_wait_seconds");
  expect_error_naming((*g)->observe({}, 1), "demo_gauge");
}

TEST(MetricsTest, InconsistentLabelNamesRefused) {
  MetricRegistry r;
  auto g = r.family("demo_gauge", "h", MetricType::kGauge);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->set({{"chip", "1"}, {"port", "2"}}, 1).ok());
  expect_error_naming((*g)->set({{"chip", "1"}}, 1), "chip");
  expect_error_naming((*g)->set({{"chip", "1"}, {"lane", "2"}}, 1), "lane");
  expect_error_naming((*g)->set({{"chip", "1"}, {"port", "2"}, {"peer", "x"}}, 1), "peer");
  expect_error_naming((*g)->declare_labels({"chip"}), "demo_gauge");
  EXPECT_EQ((*g)->series_count(), 1u);
}

TEST(MetricsTest, ReRegistration) {
  MetricRegistry r;
  auto a = r.family("demo_items", "Items.", MetricType::kGauge);
  ASSERT_TRUE(a.ok());
  auto b = r.family("demo_items", "Items.", MetricType::kGauge);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  expect_error_naming(r.family("demo_items", "Items.", MetricType::kHistogram).status(),
                      "demo_items");
  expect_error_naming(r.family("demo_items", "Other help.", MetricType::kGauge).status(),
                      "demo_items");
  ASSERT_TRUE(r.family("demo_wait_seconds", "W.", MetricType::kHistogram, {1, 2}).ok());
  expect_error_naming(r.family("demo_wait_seconds", "W.", MetricType::kHistogram, {1, 3}).status(),
                      "demo_wait_seconds");
  // A histogram's series names are taken.
  expect_error_naming(r.family("demo_wait_seconds_sum", "S.", MetricType::kGauge).status(),
                      "demo_wait_seconds");
}

TEST(MetricsTest, JsonMatchesExposition) {
  MetricRegistry r;
  fill_small(r);
  const nlohmann::json expected = nlohmann::json::parse(R"([
    {"name": "demo_latency_seconds", "help": "Request latency.", "type": "histogram",
     "samples": [{"labels": {"op": "read"},
                  "buckets": [{"le": 0.1, "count": 0}, {"le": 0.5, "count": 3},
                              {"le": 1.0, "count": 3}, {"le": "+Inf", "count": 4}],
                  "sum": 3.25, "count": 4}]},
    {"name": "demo_requests_total", "help": "Requests handled.", "type": "counter",
     "samples": [{"labels": {"path": "/a", "code": "200"}, "value": 3.0},
                 {"labels": {"path": "x\"y\\z\nw", "code": "200"}, "value": 3.0}]},
    {"name": "demo_temperature_celsius", "help": "Board temperature.\nIn C \\ degrees.",
     "type": "gauge", "samples": [{"labels": {}, "value": 21.5}]}
  ])");
  EXPECT_EQ(r.to_json(), expected) << r.to_json().dump(2);
  auto g = r.find("demo_temperature_celsius");
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->set({}, std::nan("")).ok());
  EXPECT_EQ(r.to_json()[2]["samples"][0]["value"], "NaN");
}

TEST(MetricsTest, GalaxyCatalogue) {
  MetricRegistry r;
  ASSERT_TRUE(register_galaxy_metrics(r).ok());
  ASSERT_TRUE(register_galaxy_metrics(r).ok());  // idempotent
  const std::vector<std::pair<const char*, MetricType>> names{
      {kPortTxPacketsTotal, MetricType::kCounter},
      {kPortRxPacketsTotal, MetricType::kCounter},
      {kPortTxFlitsTotal, MetricType::kCounter},
      {kPortRxFlitsTotal, MetricType::kCounter},
      {kPortRetransmissionsTotal, MetricType::kCounter},
      {kPortCrcErrorsTotal, MetricType::kCounter},
      {kPortDirtyDiscardsTotal, MetricType::kCounter},
      {kPortUtilisationRatio, MetricType::kGauge},
      {kPortLinkUp, MetricType::kGauge},
      {kFaultsTotal, MetricType::kCounter},
      {kAlarmsActive, MetricType::kGauge},
      {kScanDurationSeconds, MetricType::kHistogram},
      {kSweepDurationSeconds, MetricType::kHistogram},
      {kMgmtRequestLatencySeconds, MetricType::kHistogram},
      {kMgmtRequestsTotal, MetricType::kCounter}};
  for (auto& [name, type] : names) {
    MetricFamily* f = r.find(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->type(), type) << name;
    EXPECT_TRUE(MetricFamily::validate(f->name(), f->help(), f->type(), f->buckets()).ok()) << name;
    for (const std::string& l : f->label_names()) EXPECT_TRUE(validate_label_name(l).ok()) << l;
  }
  EXPECT_EQ(r.find(kPortLinkUp)->label_names(), port_label_names());
  EXPECT_EQ(r.find(kMgmtRequestsTotal)->label_names(),
            (std::vector<std::string>{"type", "outcome"}));
  // Declared labels are enforced: a port series without its human-readable labels is refused.
  EXPECT_FALSE(r.find(kPortCrcErrorsTotal)->add({{"chip", "1"}, {"port", "2"}}, 1).ok());
}

TEST(MetricsTest, CheckerCatchesBrokenText) {
  // The checker must be able to fail, or the large-registry test below proves nothing.
  EXPECT_NE(join(check_exposition("x_total 1\n")), "");  // no TYPE/HELP
  EXPECT_NE(join(check_exposition("# HELP h H.\n# TYPE h histogram\n"
                                  "h_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
                                  "h_sum 1\nh_count 2\n")),
            "");  // not cumulative
  EXPECT_NE(join(check_exposition("# HELP h H.\n# TYPE h histogram\n"
                                  "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n")),
            "");  // no +Inf
  EXPECT_NE(join(check_exposition("# HELP h H.\n# TYPE h histogram\n"
                                  "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n")),
            "");  // _count != +Inf
  EXPECT_NE(join(check_exposition("# HELP g G.\n# TYPE g gauge\ng{a=\"x\"y\"} 1\n")), "");
}

void fill_large(MetricRegistry& r) {
  EXPECT_TRUE(register_galaxy_metrics(r).ok());
  const char* port_metrics[] = {
      kPortTxPacketsTotal,       kPortRxPacketsTotal, kPortTxFlitsTotal,      kPortRxFlitsTotal,
      kPortRetransmissionsTotal, kPortCrcErrorsTotal, kPortDirtyDiscardsTotal};
  for (uint32_t chip = 0; chip < 25; ++chip) {
    const std::string name = chip == 7 ? "nrc \"odd\\name\"" : "nrc" + std::to_string(chip);
    const std::string loc = "cabinet " + std::to_string(chip / 8) + "/chassis " +
                            std::to_string(chip % 8 / 2) + "/switch " + std::to_string(chip % 2);
    for (uint32_t port = 0; port < 8; ++port) {
      auto labels =
          port_labels(chip, name, loc, port,
                      "nrc" + std::to_string((chip + 1) % 25) + ":" + std::to_string(port));
      for (const char* m : port_metrics) {
        EXPECT_TRUE(r.find(m)->add(labels, chip * 1000.0 + port * 1e9).ok());
      }
      EXPECT_TRUE(r.find(kPortUtilisationRatio)->set(labels, port / 8.0).ok());
      EXPECT_TRUE(r.find(kPortLinkUp)->set(labels, port % 3 ? 1 : 0).ok());
    }
  }
  for (const char* sev : {"critical", "major", "minor", "warning"}) {
    EXPECT_TRUE(r.find(kFaultsTotal)->add({{"severity", sev}, {"cause", "link_down"}}, 3).ok());
    EXPECT_TRUE(r.find(kAlarmsActive)->set({{"severity", sev}}, 1).ok());
  }
  for (double d : {0.002, 0.7, 12.0, 400.0}) {
    EXPECT_TRUE(r.find(kScanDurationSeconds)->observe({}, d).ok());
    EXPECT_TRUE(r.find(kSweepDurationSeconds)->observe({}, d * 2).ok());
  }
  for (const char* type : {"get", "set", "trap"}) {
    for (double d : {0.00005, 0.003, 0.2, 7.0, 70.0}) {
      EXPECT_TRUE(r.find(kMgmtRequestLatencySeconds)->observe({{"type", type}}, d).ok());
    }
    EXPECT_TRUE(r.find(kMgmtRequestsTotal)->add({{"type", type}, {"outcome", "ok"}}, 5).ok());
    EXPECT_TRUE(r.find(kMgmtRequestsTotal)->add({{"type", type}, {"outcome", "timeout"}}, 1).ok());
  }
}

TEST(MetricsTest, LargeRegistryPassesFormatChecker) {
  MetricRegistry r;
  fill_large(r);
  const std::string text = r.exposition();
  EXPECT_EQ(join(check_exposition(text)), "");
  // 200 ports x 9 port families, each one sample line.
  size_t port_lines = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("galaxy_port_", 0) == 0) ++port_lines;
  }
  EXPECT_EQ(port_lines, 200u * 9u);
  EXPECT_NE(text.find("chip_name=\"nrc \\\"odd\\\\name\\\"\""), std::string::npos);
  EXPECT_NE(text.find("location=\"cabinet 0/chassis 1/switch 1\""), std::string::npos);
  EXPECT_NE(text.find("galaxy_port_tx_packets_total{chip=\"24\",chip_name=\"nrc24\",location="
                      "\"cabinet 3/chassis 0/switch 0\",port=\"7\",peer=\"nrc0:7\"} 7000024000"),
            std::string::npos);
  EXPECT_NE(text.find("galaxy_scan_duration_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_EQ(r.to_json().size(), 17u);  // every family of the catalogue
}

TEST(MetricsTest, PromtoolCheckMetrics) {
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0) GTEST_SKIP() << "promtool not installed (Debian: prometheus)";
  MetricRegistry r;
  fill_large(r);
  char path[] = "/tmp/galaxy_metrics_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << r.exposition();
  }
  const std::string cmd = std::string(promtool) + " check metrics < " + path + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::remove(path);
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0);
}

}  // namespace
}  // namespace galaxy::nmd
