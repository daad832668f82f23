// The daemon's HTTP layer (docs/api.md "Conventions", "Metrics", GET /api/events,
// GET /api/openapi.json): server-sent events with resume, errors of the transport (404, 405,
// 400, 413), Prometheus /metrics (checked by promtool when installed) and /api/metrics, the
// OpenAPI document, and the coverage check: every route of the OpenAPI document has a test here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "nmd/api.h"
#include "nmd_fixture.h"

namespace galaxy::nmd::api_test {
namespace {

using namespace std::chrono_literals;

int64_t newest_event_id(const NmdInstance& nmd) {
  Reply r = nmd.get("/api/log?limit=1");
  EXPECT_EQ(r.status, 200) << r.describe();
  return r.json["events"].empty() ? 0 : r.json["events"][0]["id"].get<int64_t>();
}

bool has_fault_frame(const std::vector<SseReader::Frame>& frames, int chip, int port) {
  for (const auto& f : frames) {
    if (f.event != "fault" && f.event != "alarm") continue;
    Json d = Json::parse(f.data, nullptr, false);
    if (!d.is_discarded() && d["chip"] == chip && d["port"] == port) return true;
  }
  return false;
}

// Every frame: id, event and data agree; ids strictly increase.
void expect_well_formed(const std::vector<SseReader::Frame>& frames) {
  int64_t last = 0;
  for (const auto& f : frames) {
    Json d = Json::parse(f.data, nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << f.data;
    EXPECT_EQ(d["id"], f.id);
    EXPECT_EQ(d["kind"], f.event);
    EXPECT_GT(f.id, last);
    last = f.id;
  }
}

// ---------------------------------------------------------------------------------------------
// GET /api/events

TEST_F(NmdApiTest, EventStreamDeliversAFaultLive) {
  SseReader sse(*nmd_);
  // The stream is live once it delivers something: write SCRATCH (a config_change event) every
  // 100 ms until a frame (or the keep-alive comment) arrives.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  int writes = 0;
  while (sse.text().empty() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_EQ(put("/api/chips/3/registers/SCRATCH", {{"value", ++writes}}).status, 200);
    wait_until([&] { return !sse.text().empty(); }, 100ms);
  }
  ASSERT_FALSE(sse.text().empty()) << "the event stream delivered nothing in 5 s";
  EXPECT_NE(sse.content_type().find("text/event-stream"), std::string::npos) << sse.content_type();

  ASSERT_EQ(post("/api/inject", {{"action", "link-down"}, {"chip", "0"}, {"port", 2}}).status, 200);
  EXPECT_TRUE(wait_until([&] { return has_fault_frame(sse.frames(), 0, 2); }, 2000ms))
      << "no fault/alarm frame within 2 s; stream so far:\n"
      << sse.text();
  const auto frames = sse.frames();
  expect_well_formed(frames);
  // The injection's log line came before the fault; the config_change frames of the writes too.
  bool log = false, config = false;
  for (const auto& f : frames) {
    log |= f.event == "log" && f.data.find("injected link-down") != std::string::npos;
    config |= f.event == "config_change";
  }
  EXPECT_TRUE(log) << sse.text();
  if (writes > 1) {
    EXPECT_TRUE(config) << sse.text();
  }
  sse.close();
}

TEST_F(NmdApiTest, EventStreamResumesAfterLastEventId) {
  const int64_t before = newest_event_id(*nmd_);
  ASSERT_GT(before, 0);
  ASSERT_FALSE(inject_and_wait(*nmd_).is_null());
  const int64_t newest = newest_event_id(*nmd_);

  // A reconnecting browser sends Last-Event-ID: everything after it is replayed, in order.
  SseReader sse(*nmd_, {{"Last-Event-ID", std::to_string(before)}});
  ASSERT_TRUE(wait_until(
      [&] {
        auto f = sse.frames();
        return !f.empty() && f.back().id >= newest;
      },
      2000ms))
      << sse.text();
  auto frames = sse.frames();
  expect_well_formed(frames);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.front().id, before + 1) << "nothing skipped";
  for (size_t i = 1; i < frames.size(); ++i) EXPECT_EQ(frames[i].id, frames[i - 1].id + 1);
  EXPECT_TRUE(has_fault_frame(frames, 0, 2)) << sse.text();
  sse.close();

  // ?after= is the same for clients that cannot set the header.
  {
    auto c = nmd_->client();
    std::string text;
    c->Get("/api/events?after=" + std::to_string(newest - 1), [&](const char* d, size_t n) {
      text.append(d, n);
      return text.find("\n\n") == std::string::npos;  // one frame is enough
    });
    EXPECT_EQ(text.rfind("id: " + std::to_string(newest) + "\n", 0), 0u) << text;
  }

  Reply bad = nmd_->get("/api/events", {{"Last-Event-ID", "abc"}});
  EXPECT_EQ(bad.status, 400) << bad.describe();
  EXPECT_FALSE(bad.error_id().empty());
}

// ---------------------------------------------------------------------------------------------
// Transport errors

TEST_F(NmdApiTest, UnknownRouteIs404WithJsonError) {
  for (const char* path :
       {"/api/nope", "/api/chips/0/nope", "/api/chips/0/registers", "/api/faults/1", "/api/"}) {
    Reply r = get(path);
    EXPECT_EQ(r.status, 404) << path << ": " << r.describe();
    EXPECT_EQ(r.error_id(), "E8308") << path;
    EXPECT_EQ(r.json["error"]["code"], "not_found");
    EXPECT_NE(r.content_type.find("application/json"), std::string::npos);
  }
  Reply put_unknown = put("/api/nope", Json::object());
  EXPECT_EQ(put_unknown.status, 404) << put_unknown.describe();
  EXPECT_EQ(put_unknown.error_id(), "E8308");
}

TEST_F(NmdApiTest, WrongMethodOnAKnownPathIs405) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"DELETE", "/api/status"},
      {"POST", "/api/status"},
      {"PUT", "/api/chips/0"},
      {"PATCH", "/api/config"},
      {"GET", "/api/inject"},
      {"GET", "/api/faults/3/ack"},
      {"POST", "/api/chips/0/registers/SCRATCH"},
      {"DELETE", "/api/routes"}};
  for (const auto& [method, path] : cases) {
    Reply r = nmd_->request(method, path, "{}", kToken);
    EXPECT_EQ(r.status, 405) << method << " " << path << ": " << r.describe();
    EXPECT_EQ(r.error_id(), "E8307") << method << " " << path;
  }
  // Nothing happened: the config is as it was.
  EXPECT_EQ(get("/api/config").json["scan_interval_s"], 0.0);
}

// BUG (see report): the endpoints served outside the route table (/api/events, /api/metrics,
// /api/openapi.json, /metrics) answer another method with 404 (E8308 "no API endpoint", or an
// empty body for /metrics) instead of 405 with a JSON error.
TEST_F(NmdApiTest, WrongMethodOnTheStreamAndMetricsEndpointsIs405) {
  for (const char* path : {"/api/events", "/api/metrics", "/api/openapi.json", "/metrics"}) {
    Reply r = nmd_->request("POST", path, "{}", kToken);
    EXPECT_EQ(r.status, 405) << path << ": " << r.describe();
    EXPECT_FALSE(r.error_id().empty()) << path << ": " << r.describe();
  }
}

TEST_F(NmdApiTest, BodyThatIsNotAJsonObjectIs400) {
  for (const char* body : {"not json", "{\"value\": ", "[1, 2]", "\"text\"", "42"}) {
    Reply r = nmd_->request("PUT", "/api/config", body, kToken);
    EXPECT_EQ(r.status, 400) << body << ": " << r.describe();
    EXPECT_EQ(r.error_id(), "E8309") << body;
    EXPECT_EQ(r.json["error"]["code"], "malformed");
  }
  Reply reg = nmd_->request("PUT", "/api/chips/3/registers/SCRATCH", "value=5", kToken);
  EXPECT_EQ(reg.status, 400) << reg.describe();
  EXPECT_EQ(reg.error_id(), "E8309");
  EXPECT_EQ(get("/api/chips/3/registers/SCRATCH").json["value"], 0);
}

TEST_F(NmdApiTest, BodyOverOneMebibyteIs413) {
  const std::string big =
      "{\"scan_interval_s\": 5, \"pad\": \"" + std::string(1 << 20, 'x') + "\"}";
  Reply r = nmd_->request("PUT", "/api/config", big, kToken);
  EXPECT_EQ(r.status, 413) << r.describe();
  EXPECT_EQ(get("/api/config").json["scan_interval_s"], 0.0);
  // Just under the limit is read (and refused for its unknown field, not its size).
  const std::string under =
      "{\"scan_interval_s\": 5, \"pad\": \"" + std::string((1 << 20) - 64, 'x') + "\"}";
  Reply ok = nmd_->request("PUT", "/api/config", under, kToken);
  EXPECT_EQ(ok.status, 400) << ok.describe();
  EXPECT_EQ(ok.error_id(), "E8213");
}

// BUG (see report): errors are "an HTTP status and {"error": {...}}" (docs/api.md), but the 413
// of an over-long body comes with an empty body.
TEST_F(NmdApiTest, BodyTooLargeAnswerIsAJsonError) {
  const std::string big = "{\"pad\": \"" + std::string((1 << 20) + 10, 'x') + "\"}";
  Reply r = nmd_->request("PUT", "/api/config", big, kToken);
  ASSERT_EQ(r.status, 413) << r.describe();
  EXPECT_FALSE(r.error_id().empty()) << "413 body: '" << r.body << "'";
}

// ---------------------------------------------------------------------------------------------
// /metrics and /api/metrics

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples of an exposition (comments skipped); label values unescaped.
std::vector<Sample> parse_exposition(const std::string& text) {
  std::vector<Sample> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        i = eq + 2;  // past ="
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        s.labels[key] = value;
        i += 1;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // }
    }
    s.value = std::stod(line.substr(line.find_first_not_of(' ', i)));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> samples_of(const std::vector<Sample>& all, const std::string& name) {
  std::vector<Sample> out;
  for (const auto& s : all)
    if (s.name == name) out.push_back(s);
  return out;
}

const Sample* port_sample(const std::vector<Sample>& all, const std::string& name, int chip,
                          int port) {
  for (const auto& s : all)
    if (s.name == name && s.labels.count("chip") && s.labels.at("chip") == std::to_string(chip) &&
        s.labels.at("port") == std::to_string(port))
      return &s;
  return nullptr;
}

std::vector<Sample> scrape(const NmdInstance& nmd) {
  Reply r = nmd.get("/metrics");
  EXPECT_EQ(r.status, 200) << r.describe();
  return parse_exposition(r.body);
}

TEST_F(NmdApiTest, MetricsPassPromtool) {
  // Fill it: two scans (counters), a fault (alarms), a few requests (the HTTP histogram).
  ASSERT_EQ(post("/api/scans").status, 200);
  ASSERT_EQ(post("/api/scans").status, 200);
  ASSERT_FALSE(inject_and_wait(*nmd_).is_null());
  ASSERT_EQ(get("/api/nope").status, 404);
  Reply r = get("/metrics");
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_NE(r.content_type.find("text/plain"), std::string::npos) << r.content_type;
  EXPECT_NE(r.content_type.find("version=0.0.4"), std::string::npos) << r.content_type;

  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0)
    GTEST_SKIP() << "promtool not installed (/usr/bin/promtool; Debian: prometheus): the "
                    "exposition was not checked";
  char path[] = "/tmp/galaxy_nmd_metrics_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << r.body;
  }
  const std::string cmd = std::string(promtool) + " check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int rc = pclose(p);
  std::remove(path);
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "promtool check metrics:\n" << output;
}

TEST_F(NmdApiTest, MetricsHavePerPortSeriesWithHumanLabels) {
  ASSERT_EQ(post("/api/scans").status, 200);
  const auto all = scrape(*nmd_);
  const auto link_up = samples_of(all, "galaxy_port_link_up");
  EXPECT_EQ(link_up.size(), 96u) << "both ends of the 48 links";
  for (const auto& s : link_up) {
    for (const char* l : {"chip", "chip_name", "location", "port", "peer"})
      EXPECT_TRUE(s.labels.count(l)) << l;
    EXPECT_EQ(s.value, 1.0);
  }
  const Sample* s = port_sample(all, "galaxy_port_link_up", 0, 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->labels.at("chip_name"), "l1/sw00000");
  EXPECT_EQ(s->labels.at("location"), "switch 0");
  EXPECT_EQ(s->labels.at("peer"), "l2/sw00002:0");
  const Sample* nic = port_sample(all, "galaxy_port_link_up", 29, 0);
  ASSERT_NE(nic, nullptr);
  EXPECT_EQ(nic->labels.at("chip_name"), "nic00015");
  EXPECT_EQ(nic->labels.at("peer"), "l1/sw00013:1");
  // The scanned counters: one series per NRC port, the labels as above.
  const auto tx = samples_of(all, "galaxy_port_tx_flits_total");
  EXPECT_EQ(tx.size(), 80u) << "the 20 NRCs' 4 ports";
  const Sample* tx0 = port_sample(all, "galaxy_port_tx_flits_total", 0, 0);
  ASSERT_NE(tx0, nullptr);
  EXPECT_GT(tx0->value, 0.0);
  EXPECT_EQ(tx0->labels.at("peer"), "nic00000:0");
  // The scan's duration, and the HTTP requests by route.
  const auto scans = samples_of(all, "galaxy_scan_duration_seconds_count");
  ASSERT_EQ(scans.size(), 1u);
  EXPECT_EQ(scans[0].value, 1.0);
  bool http = false;
  for (const auto& h : samples_of(all, "galaxy_http_request_duration_seconds_count"))
    http |= h.labels.at("route") == "/api/scans" && h.labels.at("method") == "POST" &&
            h.labels.at("code") == "200";
  EXPECT_TRUE(http);
}

TEST_F(NmdApiTest, MetricsShowTheDownLinkAndTheAlarm) {
  ASSERT_EQ(post("/api/inject", {{"action", "link-down"}, {"chip", "0"}, {"port", 2}}).status, 200);
  std::vector<Sample> all;
  auto critical_alarms = [&] {
    double critical = -1;
    for (const auto& s : samples_of(all, "galaxy_alarms_active"))
      if (s.labels.at("severity") == "critical") critical = s.value;
    return critical;
  };
  // The link's state (the fabric view) and the alarm (the fault report) reach the metrics by
  // two steps of the daemon, in either order: wait for both.
  const bool down = wait_until([&] {
    all = scrape(*nmd_);
    const Sample* s = port_sample(all, "galaxy_port_link_up", 0, 2);
    return s && s->value == 0.0 && critical_alarms() >= 1.0;
  });
  EXPECT_TRUE(down) << "galaxy_port_link_up{chip=\"0\",port=\"2\"} not 0, or no critical "
                       "alarm, within 2 s";
  // The other end of the link is down too; the rest is up.
  const Sample* peer = port_sample(all, "galaxy_port_link_up", 6, 0);
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(peer->value, 0.0);
  int up = 0;
  for (const auto& s : samples_of(all, "galaxy_port_link_up")) up += s.value == 1.0;
  EXPECT_EQ(up, 94);
  EXPECT_GE(critical_alarms(), 1.0);
}

// BUG (see report): galaxy_faults_total is declared with the label "severity" only, the daemon
// adds with {severity, cause}: the add fails (ignored), and the counter never has a series.
TEST_F(NmdApiTest, MetricsCountTheFaultsReceived) {
  ASSERT_FALSE(inject_and_wait(*nmd_).is_null());
  double total = 0;
  for (const auto& s : samples_of(scrape(*nmd_), "galaxy_faults_total")) total += s.value;
  EXPECT_GE(total, 1.0) << "galaxy_faults_total has no series after a fault";
}

// BUG (see report): the catalogue declares galaxy_mgmt_requests_total{type,outcome} and
// galaxy_mgmt_request_latency_seconds{type}, but nothing in the daemon feeds them: after
// hundreds of management requests both families are still empty.
TEST_F(NmdApiTest, MetricsCountManagementRequests) {
  ASSERT_EQ(get("/api/chips/3/registers/SCRATCH").status, 200);
  ASSERT_EQ(post("/api/scans").status, 200);
  const auto all = scrape(*nmd_);
  double requests = 0;
  for (const auto& s : samples_of(all, "galaxy_mgmt_requests_total")) requests += s.value;
  EXPECT_GT(requests, 0.0) << "galaxy_mgmt_requests_total has no series";
  EXPECT_FALSE(samples_of(all, "galaxy_mgmt_request_latency_seconds_count").empty())
      << "galaxy_mgmt_request_latency_seconds has no series";
}

// BUG (see report): galaxy_alarms_active is only recomputed when the view is rebuilt (scan,
// fault), not after an acknowledgement: it still counts the acknowledged alarm.
class NmdNoRoutingTest : public NmdApiTest {
  DaemonOptions options() const override {
    DaemonOptions o = NmdInstance::default_options();
    o.routing_engine = "none";  // no re-route after the fault: the alarm is the newest event
    return o;
  }
};

TEST_F(NmdNoRoutingTest, AlarmsActiveGaugeFollowsAcknowledgements) {
  ASSERT_FALSE(inject_and_wait(*nmd_).is_null());
  auto critical = [&] {
    for (const auto& s : samples_of(scrape(*nmd_), "galaxy_alarms_active"))
      if (s.labels.at("severity") == "critical") return s.value;
    return -1.0;
  };
  // The fault and its alarm.
  ASSERT_TRUE(wait_until([&] { return critical() == 2.0; })) << critical();
  const double before = critical();
  Reply newest = get("/api/log?limit=1");
  ASSERT_EQ(newest.json["events"][0]["kind"], "alarm") << newest.body;
  const int64_t id = newest.json["events"][0]["id"];
  Reply ack = post("/api/faults/" + std::to_string(id) + "/ack", {{"by", "op"}});
  ASSERT_EQ(ack.status, 200) << ack.describe();
  EXPECT_EQ(get("/api/status").json["unacknowledged"]["critical"], before - 1);
  EXPECT_EQ(critical(), before - 1) << "galaxy_alarms_active still counts the acknowledged alarm";
}

TEST_F(NmdApiTest, ApiMetricsJsonHasTheSameFamilies) {
  ASSERT_EQ(post("/api/scans").status, 200);
  Reply text = get("/metrics");
  ASSERT_EQ(text.status, 200);
  std::map<std::string, std::string> types;  // from "# TYPE name type"
  // (No std::regex: g++ 12 warns inside <regex> under -O2 with the sanitizers.)
  size_t pos = 0;
  while (pos < text.body.size()) {
    size_t eol = text.body.find('\n', pos);
    const std::string line = text.body.substr(pos, eol - pos);
    const std::string prefix = "# TYPE ";
    if (line.rfind(prefix, 0) == 0) {
      const size_t sp = line.find(' ', prefix.size());
      if (sp != std::string::npos)
        types[line.substr(prefix.size(), sp - prefix.size())] = line.substr(sp + 1);
    }
    pos = eol == std::string::npos ? text.body.size() : eol + 1;
  }
  ASSERT_FALSE(types.empty());

  Reply json = get("/api/metrics");
  ASSERT_EQ(json.status, 200) << json.describe();
  ASSERT_TRUE(json.json.is_array()) << json.body.substr(0, 200);
  std::map<std::string, std::string> json_types;
  for (const auto& f : json.json) {
    json_types[f["name"]] = f["type"];
    EXPECT_FALSE(f["help"].get<std::string>().empty()) << f["name"];
  }
  EXPECT_EQ(json_types, types);
  for (const auto& f : json.json)
    if (f["name"] == "galaxy_port_link_up") {
      EXPECT_EQ(f["samples"].size(), 96u);
      EXPECT_EQ(f["samples"][0]["labels"].size(), 5u);
    }
}

// ---------------------------------------------------------------------------------------------
// GET /api/openapi.json

TEST_F(NmdApiTest, OpenApiDocumentIsValidLooking) {
  Reply r = get("/api/openapi.json");
  ASSERT_EQ(r.status, 200) << r.describe();
  const Json& doc = r.json;
  EXPECT_EQ(doc["openapi"], "3.0.3");
  EXPECT_FALSE(doc["info"]["title"].get<std::string>().empty());
  EXPECT_FALSE(doc["info"]["version"].get<std::string>().empty());
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearer"]["type"], "http");
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
  ASSERT_TRUE(doc["paths"].is_object());
  ASSERT_GE(doc["paths"].size(), 20u);
  std::set<std::string> operation_ids;
  for (const auto& [path, ops] : doc["paths"].items()) {
    EXPECT_EQ(path.rfind('/', 0), 0u) << path;
    for (const auto& [method, op] : ops.items()) {
      const std::string where = method + " " + path;
      EXPECT_TRUE(method == "get" || method == "post" || method == "put" || method == "delete" ||
                  method == "patch")
          << where;
      ASSERT_TRUE(op.contains("summary")) << where;
      EXPECT_FALSE(op["summary"].get<std::string>().empty()) << where;
      EXPECT_TRUE(op.contains("responses") && op["responses"].contains("200")) << where;
      if (op.contains("operationId")) {
        EXPECT_TRUE(operation_ids.insert(op["operationId"].get<std::string>()).second) << where;
      }
      if (method != "get") {
        ASSERT_TRUE(op.contains("security")) << where << " writes: it needs the token";
        EXPECT_EQ(op["security"], Json::array({{{"bearer", Json::array()}}})) << where;
      } else {
        EXPECT_FALSE(op.contains("security")) << where << ": reads are open";
      }
      // Every {name} of the path is a required path parameter.
      for (size_t open = path.find('{'); open != std::string::npos;
           open = path.find('{', open + 1)) {
        const std::string name = path.substr(open + 1, path.find('}', open) - open - 1);
        bool declared = false;
        for (const auto& p : op.value("parameters", Json::array()))
          declared |= p["name"] == name && p["in"] == "path" && p["required"] == true;
        EXPECT_TRUE(declared) << where << ": {" << name << "} not declared";
      }
      if (op.contains("requestBody")) {
        EXPECT_TRUE(op["requestBody"]["content"].contains("application/json")) << where;
      }
    }
  }
  // The route table and the document agree.
  for (const ApiRoute& route : api_routes()) {
    std::string m = route.method;
    for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ASSERT_TRUE(doc["paths"].contains(route.path)) << route.path;
    EXPECT_TRUE(doc["paths"][route.path].contains(m)) << route.method << " " << route.path;
    EXPECT_EQ(route.write, route.method != "GET") << route.method << " " << route.path;
  }
}

// BUG (see report): docs/api.md calls /api/openapi.json "the exhaustive, always-current list",
// but GET /api/metrics and GET /api/openapi.json, both served and documented, are not in it.
TEST_F(NmdApiTest, OpenApiListsEveryServedEndpoint) {
  const Json doc = get("/api/openapi.json").json;
  for (const char* path : {"/api/events", "/metrics", "/api/metrics", "/api/openapi.json"}) {
    EXPECT_TRUE(doc["paths"].contains(path) && doc["paths"][path].contains("get"))
        << "GET " << path << " is served but not in /api/openapi.json";
  }
}

// ---------------------------------------------------------------------------------------------
// Coverage: every route of the OpenAPI document has a behaviour test in this directory. A new
// route fails here until it is added to this table with the tests that exercise it.

const std::map<std::string, std::vector<std::string>>& coverage() {
  static const std::map<std::string, std::vector<std::string>> table{
      {"GET /api/status", {"NmdApiTest.StatusDescribesTheFabricAndTheDaemon"}},
      {"GET /api/topology",
       {"NmdApiTest.TopologyPhysicalSkipsAbsentLevelsOnAFatTree",
        "NmdApiTest.TopologyLogicalZoomsFromLevelsToSwitchesToChips",
        "NmdApiTest.TopologyRefusesBadViewsAndPaths",
        "NmdApiTh2Test.TopologyPhysicalZoomsThroughCabinetChassisSwitch"}},
      {"GET /api/chips",
       {"NmdApiTest.ChipsListFiltersByKindAndText",
        "NmdApiTest.ChipsListPagesAndRefusesBadParameters"}},
      {"GET /api/chips/{chip}", {"NmdApiTest.ChipDetailHasPortsWithConsistentPeers"}},
      {"GET /api/traffic",
       {"NmdApiTest.TrafficGroupsCellsAndRefusesBadGroups",
        "NmdApiTest.TrafficShowsUtilisationAfterTwoScans",
        "NmdApiTest.TrafficPerLinkHasOneCellPerLink"}},
      {"GET /api/history", {"NmdHistoryTest.ScansUnderLoadBecomePointsOfEveryScope"}},
      {"GET /api/trace",
       {"NmdApiTest.TraceFollowsTheRouteTablesHopByHop", "NmdApiTest.TraceRefusesBadEndpoints"}},
      {"GET /api/routes", {"NmdApiTest.RoutesDescribeTheLoadedRouting"}},
      {"POST /api/routes",
       {"NmdApiTest.RoutesPostLoadsAnotherEngineWithTheToken",
        "NmdApiTest.RoutesPostRefusesBadEnginesAndKeepsTheRouting"}},
      {"GET /api/chips/{chip}/registers/{addr}",
       {"NmdApiTest.RegisterReadWriteReadBack",
        "NmdApiTest.RegisterOutOfRangeIsRefusedAndChangesNothing",
        "NmdApiTest.RegisterOfUnknownChipOrOwnNicIsRefused"}},
      {"PUT /api/chips/{chip}/registers/{addr}",
       {"NmdApiTest.RegisterReadWriteReadBack", "NmdApiTest.RegisterWriteNeedsTheToken",
        "NmdApiTest.RegisterWriteTakesFull64BitJsonNumbers"}},
      {"GET /api/chips/{chip}/eeprom",
       {"NmdApiTest.EepromWriteReadRoundTrip", "NmdApiTest.EepromBadReadsAndChipsAreRefused"}},
      {"PUT /api/chips/{chip}/eeprom",
       {"NmdApiTest.EepromWriteReadRoundTrip",
        "NmdApiTest.EepromBadBytesAreRefusedAndChangeNothing"}},
      {"GET /api/chips/{chip}/status",
       {"NmdApiTest.ChipStatusComparesWithThePreviousRead",
        "NmdApiTest.ChipStatusOfUnknownChipOrOwnNicIsRefused"}},
      {"GET /api/chips/{chip}/routes", {"NmdApiTest.ChipRoutesListTheLoadedRanges"}},
      {"GET /api/faults",
       {"NmdApiTest.InjectedLinkDownIsReportedAndRoutedAround",
        "NmdFilterTest.FaultFiltersSelectTheRightSubsets",
        "NmdFilterTest.FaultFiltersRefuseBadValues"}},
      {"POST /api/faults/{id}/ack",
       {"NmdApiTest.AckMarksAFaultAcknowledged",
        "NmdApiTest.AckTakesTheUserHeaderWhenTheBodyNamesNobody",
        "NmdApiTest.AckRefusesUnknownIdsAndNonFaults"}},
      {"GET /api/log", {"NmdFilterTest.LogListsEveryKindAndFiltersByKind"}},
      {"GET /api/config", {"NmdApiTest.ConfigGetListsTheSettingsAndTheEngines"}},
      {"PUT /api/config",
       {"NmdApiTest.ConfigPutChangesFieldsAndLogsEachChange",
        "NmdApiTest.ConfigPutRefusesBadFieldsAndValuesAndChangesNothing"}},
      {"POST /api/config/writes",
       {"NmdApiTest.ConfigWritesApplyToEveryNrc",
        "NmdApiTest.ConfigWritesRefuseBadEntriesAndWriteNothing"}},
      {"GET /api/scans",
       {"NmdApiTest.ScanNowAddsASummary", "NmdApiScheduleTest.ScheduledScansRunWithTheInterval"}},
      {"POST /api/scans", {"NmdApiTest.ScanNowAddsASummary"}},
      {"POST /api/discover", {"NmdApiTest.DiscoverSweepFindsALinkThatCameBack"}},
      {"POST /api/chips/{chip}/eeprom/defaults",
       {"NmdApiTest.EepromDefaultsAreWrittenAndVerified"}},
      {"POST /api/chips/{chip}/oob",
       {"NmdApiTest.OutOfBandPowerOffRemovesAChipFromDiscoveryAndPowerOnBringsItBack"}},
      {"POST /api/inject",
       {"NmdApiTest.InjectTakesAChipDownAndRaisesAFaultCodeAsTheCliDoes",
        "NmdApiTest.InjectedLinkDownIsReportedAndRoutedAround"}},
      {"POST /api/bist", {"NmdApiTest.BistOnAPortPasses", "NmdApiTest.BistRefusesBadParameters"}},
      {"GET /api/events",
       {"NmdApiTest.EventStreamDeliversAFaultLive",
        "NmdApiTest.EventStreamResumesAfterLastEventId"}},
      {"GET /metrics",
       {"NmdApiTest.MetricsPassPromtool", "NmdApiTest.MetricsHavePerPortSeriesWithHumanLabels",
        "NmdApiTest.MetricsShowTheDownLinkAndTheAlarm"}},
      // Served and documented, not (yet) in the OpenAPI document (see OpenApiListsEvery...).
      {"GET /api/metrics", {"NmdApiTest.ApiMetricsJsonHasTheSameFamilies"}},
      {"GET /api/openapi.json", {"NmdApiTest.OpenApiDocumentIsValidLooking"}},
  };
  return table;
}

TEST(NmdApiCoverageTest, EveryOpenApiRouteHasATest) {
  const Json doc = openapi_json();
  std::set<std::string> routes;
  for (const auto& [path, ops] : doc["paths"].items())
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      routes.insert(m + " " + path);
    }
  ASSERT_FALSE(routes.empty());
  for (const std::string& r : routes)
    EXPECT_TRUE(coverage().count(r))
        << "route without a test: " << r << " (add its tests to coverage() in api_http_test.cc)";

  std::set<std::string> registered;
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < u.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *u.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j)
      registered.insert(std::string(suite.name()) + "." + suite.GetTestInfo(j)->name());
  }
  const std::set<std::string> served_outside_openapi{"GET /api/metrics", "GET /api/openapi.json"};
  for (const auto& [route, tests] : coverage()) {
    EXPECT_TRUE(routes.count(route) || served_outside_openapi.count(route))
        << "coverage() lists " << route << ", which /api/openapi.json does not have";
    EXPECT_FALSE(tests.empty()) << route;
    for (const std::string& t : tests)
      EXPECT_TRUE(registered.count(t)) << route << ": test " << t << " does not exist";
  }
}

// Every route of the document is dispatched by the server: none answers "no API endpoint" or
// "method not allowed" (with the token and an empty JSON object as the body).
TEST_F(NmdApiTest, EveryOpenApiRouteIsDispatched) {
  const Json doc = get("/api/openapi.json").json;
  for (const auto& [path, ops] : doc["paths"].items()) {
    if (path == "/api/events") continue;  // a stream: EventStream* tests
    std::string concrete = path;
    for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
             {"{chip}", "3"}, {"{addr}", "SCRATCH"}, {"{id}", "999999"}})
      if (auto at = concrete.find(name); at != std::string::npos)
        concrete.replace(at, name.size(), value);
    ASSERT_EQ(concrete.find('{'), std::string::npos) << "unknown path parameter in " << path;
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      Reply r = nmd_->request(m, concrete, m == "GET" ? "" : "{}", kToken);
      EXPECT_NE(r.status, 0) << m << " " << concrete;
      EXPECT_NE(r.status, 405) << m << " " << concrete << ": " << r.describe();
      EXPECT_NE(r.error_id(), "E8308") << m << " " << concrete << ": " << r.describe();
      EXPECT_LT(r.status, 500) << m << " " << concrete << ": " << r.describe();
    }
  }
}

}  // namespace
}  // namespace galaxy::nmd::api_test

namespace galaxy::nmd::api_test {
namespace {

// ---------------------------------------------------------------------------------------------
// A read token protects the reads too; writes still need the write token.

TEST(NmdApiReadTokenTest, ReadTokenProtectsReads) {
  NmdInstance nmd(NmdInstance::default_options(),
                  [](HttpOptions& h) { h.read_token = "read-secret"; });
  ASSERT_TRUE(nmd.ok()) << nmd.error();
  for (const char* path : {"/api/status", "/api/chips", "/api/faults", "/metrics", "/api/metrics",
                           "/api/events", "/api/chips/3/registers/SCRATCH"}) {
    Reply none = nmd.get(path);
    EXPECT_EQ(none.status, 401) << path << ": " << none.describe();
    EXPECT_EQ(none.error_id(), "E8302") << path;
    Reply wrong = nmd.get(path, {{"Authorization", "Bearer nope"}});
    EXPECT_EQ(wrong.status, 401) << path << ": " << wrong.describe();
    EXPECT_EQ(wrong.error_id(), "E8303") << path;
  }
  EXPECT_EQ(nmd.get("/api/status", {{"Authorization", "Bearer read-secret"}}).status, 200);
  EXPECT_EQ(nmd.get("/metrics", {{"Authorization", "Bearer read-secret"}}).status, 200);
  // The write token reads too.
  EXPECT_EQ(nmd.get("/api/status", {{"Authorization", std::string("Bearer ") + kToken}}).status,
            200);
  // The read token does not write.
  Reply w = nmd.put("/api/chips/3/registers/SCRATCH", {{"value", 5}}, "read-secret");
  EXPECT_EQ(w.status, 401) << w.describe();
  EXPECT_EQ(w.error_id(), "E8303");
  Reply r = nmd.get("/api/chips/3/registers/SCRATCH", {{"Authorization", "Bearer read-secret"}});
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json["value"], 0);
}

// ---------------------------------------------------------------------------------------------
// The web console is served at / (its files built in).

TEST_F(NmdApiTest, ConsoleIsServedAtTheRoot) {
  Reply index = get("/");
  ASSERT_EQ(index.status, 200) << index.describe();
  EXPECT_NE(index.content_type.find("text/html"), std::string::npos) << index.content_type;
  EXPECT_NE(index.body.find("<"), std::string::npos);
  Reply missing = get("/no-such-file.js");
  EXPECT_EQ(missing.status, 404) << missing.describe();
  EXPECT_FALSE(missing.error_id().empty());
}

// ---------------------------------------------------------------------------------------------
// Requests in parallel: the session is shared under a lock; every answer stays right.

TEST_F(NmdApiTest, ParallelRequestsAllAnswerCorrectly) {
  constexpr int kThreads = 4, kRounds = 15;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::string chip = "nic:" + std::to_string(4 + t);
      for (int i = 0; i < kRounds; ++i) {
        if (put("/api/chips/" + chip + "/registers/SCRATCH", {{"value", t * 1000 + i}}).status !=
            200)
          ++bad;
        Reply r = get("/api/chips/" + chip + "/registers/SCRATCH");
        if (r.status != 200 || r.json["value"] != t * 1000 + i) ++bad;
        if (get("/api/trace?src=nic:1&dst=nic:" + std::to_string(8 + t)).json["reachable"] != true)
          ++bad;
        if (get(i % 2 ? "/metrics" : "/api/status").status != 200) ++bad;
        if (t == 0 && i % 5 == 0 && post("/api/scans").status != 200) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(get("/api/log?kind=config_change&limit=10000").json["events"].size(),
            static_cast<size_t>(kThreads * kRounds));
}

}  // namespace
}  // namespace galaxy::nmd::api_test
