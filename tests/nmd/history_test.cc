// The console's history (nmd/history.h, GET /api/history): a point per scan with the rates the
// scans measured, bounded by points, bytes and age; fault counts at each change; the API's
// errors. And the Grafana dashboard shipped in config/grafana: its panels' queries parse (promtool)
// and name only metrics the daemon exposes.
#include "nmd/history.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "nmd_fixture.h"

namespace galaxy::nmd::history_test {
namespace {

using api_test::Json;
using api_test::NmdApiTest;
using api_test::NmdInstance;

// A view of `chips` chips with one linked port each (chip n port 0 <-> chip n^1 port 0).
FabricView small_view(uint32_t chips, float util) {
  FabricView v;
  v.chips.resize(chips);
  v.ports.resize(chips);
  for (uint32_t n = 0; n < chips; ++n) {
    v.chips[n].name = "c" + std::to_string(n);
    v.chips[n].first_port = n;
    v.chips[n].ports = 1;
    v.ports[n].peer = n ^ 1;
    v.ports[n].link = LinkView::kUp;
    v.ports[n].utilisation = util * static_cast<float>(n + 1);
    v.ports[n].retransmissions_per_s = static_cast<float>(n);
  }
  return v;
}

const Json* series(const Json& j, const std::string& name) {
  for (const Json& s : j["series"])
    if (s["name"] == name) return &s;
  return nullptr;
}

TEST(History, APointPerScanWithChipFabricAndPortRates) {
  History h;
  FabricView v = small_view(4, 0.1f);
  v.scans = 2;
  h.add_scan(v, 1000);
  v.ports[3].link = LinkView::kDown;
  v.ports[2].link = LinkView::kDown;
  h.add_scan(v, 2000);
  auto fabric = h.query(v, std::nullopt, std::nullopt, -1);
  ASSERT_TRUE(fabric.ok()) << fabric.error().to_string();
  EXPECT_EQ((*fabric)["scope"], "fabric");
  const Json* mean = series(*fabric, "utilisation_mean");
  ASSERT_NE(mean, nullptr);
  ASSERT_EQ((*mean)["points"].size(), 2u);
  EXPECT_EQ((*mean)["points"][0][0], 1000);
  EXPECT_NEAR((*mean)["points"][0][1].get<double>(), 0.25, 1e-6);  // (0.1+0.2+0.3+0.4)/4
  EXPECT_NEAR((*series(*fabric, "utilisation_max"))["points"][1][1].get<double>(), 0.4, 1e-6);
  EXPECT_EQ((*series(*fabric, "retransmissions_per_s"))["points"][0][1], 6.0);  // 0+1+2+3
  EXPECT_EQ((*series(*fabric, "links_down"))["points"][0][1], 0.0);
  EXPECT_EQ((*series(*fabric, "links_down"))["points"][1][1], 1.0);
  EXPECT_EQ((*series(*fabric, "links_down"))["unit"], "links");

  auto chip = h.query(v, 2u, std::nullopt, 1000);  // only after t = 1000
  ASSERT_TRUE(chip.ok());
  EXPECT_EQ((*chip)["scope"], "chip");
  EXPECT_EQ((*chip)["chip_name"], "c2");
  ASSERT_EQ((*series(*chip, "utilisation"))["points"].size(), 1u);
  EXPECT_NEAR((*series(*chip, "utilisation"))["points"][0][1].get<double>(), 0.3, 1e-6);
  auto port = h.query(v, 3u, 0u, -1);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ((*port)["scope"], "port");
  EXPECT_EQ((*port)["peer"], "c2:0");
  EXPECT_EQ((*series(*port, "retransmissions_per_s"))["points"][1][1], 3.0);
}

TEST(History, BoundedByPointsBytesAndAge) {
  HistoryOptions o;
  o.max_points = 5;
  History by_points(o);
  FabricView v = small_view(2, 0.5f);
  for (int i = 1; i <= 8; ++i) by_points.add_scan(v, i * 1'000'000);
  EXPECT_EQ(by_points.scan_points(), 5u);
  auto j = by_points.query(v, std::nullopt, std::nullopt, -1);
  EXPECT_EQ((*series(*j, "utilisation_max"))["points"][0][0], 4'000'000) << "the oldest went";

  // 10,000 chips with ports: each point ~240 KB; 1 MiB holds 4 of them.
  o.max_points = 1000;
  o.max_bytes = 1 << 20;
  o.port_series_up_to_chips = 100'000;
  History by_bytes(o);
  FabricView big = small_view(10'000, 0.0f);
  const uint32_t cap = by_bytes.capacity(big.chips.size(), big.ports.size());
  EXPECT_GE(cap, 2u);
  EXPECT_LE(cap * big.chips.size() * 2 * 12, o.max_bytes);
  for (int i = 0; i < 10; ++i) by_bytes.add_scan(big, i);
  EXPECT_EQ(by_bytes.scan_points(), cap);

  // Age: points older than the retention go, the newest stays whatever its age.
  o = HistoryOptions{};
  o.retention_s = 10;
  History by_age(o);
  for (int s : {0, 5, 12, 30}) by_age.add_scan(v, int64_t{s} * 1'000'000);
  EXPECT_EQ(by_age.scan_points(), 1u) << "20 s and older than the point at 30 s";
  by_age.add_scan(v, 35'000'000);
  EXPECT_EQ(by_age.scan_points(), 2u);
}

TEST(History, FaultCountsGetAPointWhenTheyChange) {
  History h;
  h.add_faults(1, 0, 0);
  h.add_faults(2, 0, 0);
  h.add_faults(3, 1, 1);
  h.add_faults(4, 1, 1);
  h.add_faults(5, 0, 1);
  EXPECT_EQ(h.fault_points(), 3u);
  auto j = h.query(small_view(2, 0), std::nullopt, std::nullopt, -1);
  const Json& open = (*series(*j, "faults_open"))["points"];
  ASSERT_EQ(open.size(), 3u);
  EXPECT_EQ(open[1], Json::array({3, 1}));
  EXPECT_EQ(open[2], Json::array({5, 0}));
}

TEST(History, QueryErrorsNameTheValue) {
  HistoryOptions o;
  o.port_series_up_to_chips = 3;
  History h(o);
  FabricView v = small_view(4, 0.1f);
  auto no_chip = h.query(v, std::nullopt, 0u, -1);
  ASSERT_FALSE(no_chip.ok());
  EXPECT_EQ(no_chip.error().id, 8460);
  auto far = h.query(v, 9u, std::nullopt, -1);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().id, 8461);
  auto bad_port = h.query(v, 1u, 1u, -1);
  ASSERT_FALSE(bad_port.ok());
  EXPECT_EQ(bad_port.error().id, 8462);
  EXPECT_NE(bad_port.error().message.find("port = 1"), std::string::npos)
      << bad_port.error().message;
  auto too_big = h.query(v, 1u, 0u, -1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().id, 8463);
}

// The daemon under load: scans become points whose rates are the traffic's.
class NmdHistoryTest : public NmdApiTest {
 protected:
  DaemonOptions options() const override {
    DaemonOptions o = NmdInstance::default_options();
    o.session.load = "uniform";
    return o;
  }
};

TEST_F(NmdHistoryTest, ScansUnderLoadBecomePointsOfEveryScope) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post("/api/scans").status, 200);
  api_test::Reply fabric = get("/api/history");
  ASSERT_EQ(fabric.status, 200) << fabric.describe();
  const Json* util = series(fabric.json, "utilisation_max");
  ASSERT_NE(util, nullptr);
  ASSERT_EQ((*util)["points"].size(), 2u) << "rates from the second scan on";
  EXPECT_GT((*util)["points"][1][1].get<double>(), 0.0) << "the load runs";
  EXPECT_NE(series(fabric.json, "faults_open"), nullptr);

  api_test::Reply port = get("/api/history?chip=0&port=0");
  ASSERT_EQ(port.status, 200) << port.describe();
  EXPECT_EQ(port.json["scope"], "port");
  EXPECT_EQ((*series(port.json, "utilisation"))["points"].size(), 2u);
  const int64_t last = (*util)["points"][1][0];
  api_test::Reply since = get("/api/history?chip=nic:0&since_us=" + std::to_string(last));
  ASSERT_EQ(since.status, 200) << since.describe();
  EXPECT_TRUE((*series(since.json, "utilisation"))["points"].empty());

  EXPECT_EQ(get("/api/history?chip=no-such-chip").status, 404);
  api_test::Reply bad = get("/api/history?chip=0&port=77");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["error"]["id"], "E8462") << bad.describe();
  EXPECT_EQ(get("/api/history?port=1").status, 400);
  EXPECT_EQ(get("/api/history?since_us=x").status, 400);
}

// ---- the Grafana dashboard --------------------------------------------------------------------

const std::string kDashboard =
    std::string(GALAXY_SOURCE_DIR) + "/config/grafana/galaxy-dashboard.json";

std::string run(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// Grafana's variables in a query as Prometheus would get them: the built-in intervals as
// durations, the dashboard's own variables as their "All" value.
std::string expand(std::string expr, const std::map<std::string, std::string>& vars) {
  const std::map<std::string, std::string> builtin{
      {"__rate_interval", "5m"}, {"__interval", "1m"}, {"__range", "6h"}};
  std::string out;
  for (size_t i = 0; i < expr.size();) {
    if (expr[i] != '$') {
      out += expr[i++];
      continue;
    }
    const bool braced = i + 1 < expr.size() && expr[i + 1] == '{';
    size_t b = i + (braced ? 2 : 1), e = b;
    while (e < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[e])) || expr[e] == '_'))
      ++e;
    const std::string name = expr.substr(b, e - b);
    if (braced) ++e;
    if (auto it = builtin.find(name); it != builtin.end())
      out += it->second;
    else if (auto v = vars.find(name); v != vars.end())
      out += v->second;
    else
      out += "$UNKNOWN_VARIABLE_" + name;
    i = e;
  }
  return out;
}

TEST(GrafanaDashboard, IsAWellFormedDashboardModel) {
  std::ifstream in(kDashboard);
  ASSERT_TRUE(in) << kDashboard;
  const Json d = Json::parse(in, nullptr, false);
  ASSERT_FALSE(d.is_discarded()) << kDashboard << " is not JSON";
  for (const char* f : {"title", "uid", "schemaVersion", "panels", "templating", "time"})
    EXPECT_TRUE(d.contains(f)) << "missing " << f;
  EXPECT_TRUE(d["schemaVersion"].is_number_integer());
  bool has_ds = false;
  for (const Json& v : d["templating"]["list"])
    has_ds |= v["type"] == "datasource" && v["query"] == "prometheus";
  EXPECT_TRUE(has_ds) << "a datasource variable of type prometheus, so the dashboard imports";
  const std::set<std::string> types{"timeseries", "stat", "gauge", "table", "heatmap", "bargauge"};
  std::set<int> ids;
  std::vector<std::array<int, 4>> boxes;
  ASSERT_FALSE(d["panels"].empty());
  for (const Json& p : d["panels"]) {
    const std::string title = p.value("title", "");
    EXPECT_FALSE(title.empty());
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "panel id twice: " << p["id"];
    EXPECT_TRUE(types.count(p.value("type", ""))) << title << ": type " << p["type"];
    const Json& g = p["gridPos"];
    const std::array<int, 4> box{g["x"].get<int>(), g["y"].get<int>(), g["w"].get<int>(),
                                 g["h"].get<int>()};
    EXPECT_TRUE(box[0] >= 0 && box[2] > 0 && box[0] + box[2] <= 24 && box[1] >= 0 && box[3] > 0)
        << title << ": gridPos outside Grafana's 24 columns";
    for (const auto& o : boxes)
      EXPECT_FALSE(box[0] < o[0] + o[2] && o[0] < box[0] + box[2] && box[1] < o[1] + o[3] &&
                   o[1] < box[1] + box[3])
          << title << " overlaps another panel";
    boxes.push_back(box);
    ASSERT_FALSE(p["targets"].empty()) << title;
    std::set<std::string> refs;
    for (const Json& t : p["targets"]) {
      EXPECT_FALSE(t.value("expr", "").empty()) << title;
      EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << title << ": refId twice";
    }
  }
}

TEST_F(NmdApiTest, GrafanaDashboardQueriesParseAndNameExposedMetrics) {
  // Fill the exposition: scans (port counters), a fault, HTTP requests.
  ASSERT_EQ(post("/api/scans").status, 200);
  ASSERT_EQ(post("/api/scans").status, 200);
  ASSERT_FALSE(api_test::inject_and_wait(*nmd_).is_null());
  api_test::Reply m = get("/metrics");
  ASSERT_EQ(m.status, 200);
  std::set<std::string> families;
  std::regex type_line(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+))");
  for (std::sregex_iterator it(m.body.begin(), m.body.end(), type_line), end; it != end; ++it) {
    const std::string name = (*it)[1], type = (*it)[2];
    families.insert(name);
    if (type == "histogram")
      for (const char* s : {"_bucket", "_sum", "_count"}) families.insert(name + s);
  }
  ASSERT_TRUE(families.count("galaxy_port_link_up")) << m.body.substr(0, 500);

  std::ifstream in(kDashboard);
  const Json d = Json::parse(in, nullptr, false);
  ASSERT_FALSE(d.is_discarded());
  std::map<std::string, std::string> vars;
  for (const Json& v : d["templating"]["list"]) vars[v["name"]] = v.value("allValue", ".*");
  std::string rules = "groups:\n  - name: galaxy-dashboard\n    rules:\n";
  std::regex metric(R"(\b(galaxy_[a-z0-9_]+)\b)");
  int exprs = 0;
  for (const Json& p : d["panels"])
    for (const Json& t : p["targets"]) {
      const std::string e = expand(t["expr"], vars);
      EXPECT_EQ(e.find("$UNKNOWN_VARIABLE"), std::string::npos) << p["title"] << ": " << e;
      for (std::sregex_iterator it(e.begin(), e.end(), metric), end; it != end; ++it)
        EXPECT_TRUE(families.count((*it)[1]))
            << p["title"] << ": " << (*it)[1] << " is not a metric of the daemon";
      std::string quoted;  // YAML single quotes: '' for '
      for (char c : e) quoted += c == '\'' ? std::string("''") : std::string(1, c);
      rules += fmt::format("      - record: galaxy:dashboard:panel{}_{}\n        expr: '{}'\n",
                           p["id"].get<int>(), t["refId"].get<std::string>(), quoted);
      ++exprs;
    }
  EXPECT_GE(exprs, 10);
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0)
    GTEST_SKIP() << "promtool not installed (Debian: prometheus): the queries were not parsed";
  char path[] = "/tmp/galaxy_dashboard_rules_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << rules;
  }
  int rc = 0;
  const std::string out = run(std::string(promtool) + " check rules " + path + " 2>&1", &rc);
  std::remove(path);
  EXPECT_EQ(rc, 0) << "promtool check rules:\n" << out << "\n" << rules;
}

}  // namespace
}  // namespace galaxy::nmd::history_test
