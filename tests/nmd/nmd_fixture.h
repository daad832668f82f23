// Test fixture of the management daemon's HTTP API: an in-process Daemon and HttpServer on a free
// loopback port, an httplib client, and small helpers (JSON replies, polling with deadlines,
// temporary database files, a server-sent event reader).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "nmd/daemon.h"
#include "nmd/http_server.h"

namespace galaxy::nmd::api_test {

inline constexpr const char* kToken = "test-token-123";
inline constexpr const char* kFatTree = "sim:fattree:k=4";

using Json = nlohmann::json;

// One HTTP answer: status, body, the body parsed as JSON (discarded when it is not JSON).
struct Reply {
  int status = 0;  // 0: no answer (connection failed)
  std::string body;
  std::string content_type;
  Json json;

  bool is_json() const { return !json.is_discarded() && !json.is_null(); }
  // The error id ("E8203") of an error answer, "" when the body is not one.
  std::string error_id() const {
    if (!is_json() || !json.is_object() || !json.contains("error") || !json["error"].is_object() ||
        !json["error"].contains("id") || !json["error"]["id"].is_string())
      return "";
    return json["error"]["id"].get<std::string>();
  }
  std::string describe() const {
    return "HTTP " + std::to_string(status) + ": " + body.substr(0, 600);
  }
};

// Polls `done` every 10 ms until it is true or `timeout` passes; returns its last value.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A database path unique to this test and process, removed (with -wal and -shm) at both ends.
class TempDb {
 public:
  TempDb() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("galaxy_nmd_api_") + (info ? info->name() : "x") + "_" +
                       std::to_string(::getpid()) + ".db";
    path_ = (std::filesystem::path(::testing::TempDir()) / name).string();
    remove_all();
  }
  ~TempDb() { remove_all(); }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  const std::string& path() const { return path_; }

 private:
  void remove_all() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix, ec);
  }
  std::string path_;
};

// A daemon and its HTTP server. The daemon's loop runs (tick 5 ms), no scheduled scans or
// sweeps unless the options say so.
class NmdInstance {
 public:
  static DaemonOptions default_options(const std::string& fabric = kFatTree,
                                       const std::string& db = ":memory:") {
    DaemonOptions o;
    o.session.fabric = fabric;
    o.db_path = db;
    o.scan_interval_s = 0;
    o.sweep_interval_s = 0;
    o.tick_ms = 5;
    return o;
  }

  // On failure, error() says why and daemon() must not be used.
  explicit NmdInstance(const DaemonOptions& o,
                       const std::function<void(HttpOptions&)>& http_options = {}) {
    auto d = Daemon::create(o);
    if (!d.ok()) {
      error_ = "Daemon::create: " + d.error().to_string();
      return;
    }
    daemon_ = std::move(*d);
    daemon_->start();
    HttpOptions h;
    h.host = "127.0.0.1";
    h.port = 0;
    h.token = kToken;
    h.threads = 8;
    if (http_options) http_options(h);
    server_ = std::make_unique<HttpServer>(*daemon_, h);
    Status st = server_->bind();
    if (!st.ok()) {
      error_ = "HttpServer::bind: " + st.to_string();
      return;
    }
    server_->start();
    // Serving once it answers anything (with a read token set, reads answer 401).
    const bool up = wait_until([&] { return get("/api/openapi.json").status != 0; },
                               std::chrono::milliseconds(5000));
    if (!up) error_ = "the server did not answer /api/openapi.json within 5 s";
  }
  ~NmdInstance() { stop(); }
  NmdInstance(const NmdInstance&) = delete;
  NmdInstance& operator=(const NmdInstance&) = delete;

  // Stops and destroys the server, then the daemon (closing its event store).
  void stop() {
    if (server_) server_->stop();
    server_.reset();
    if (daemon_) daemon_->stop();
    daemon_.reset();
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  Daemon& daemon() { return *daemon_; }
  int port() const { return server_ ? server_->port() : 0; }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port());
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(30, 0);
    c->set_write_timeout(10, 0);
    return c;
  }

  // Any method. `token`: "" = no Authorization header.
  Reply request(const std::string& method, const std::string& path, const std::string& body = "",
                const std::string& token = "", httplib::Headers headers = {}) const {
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto c = client();
    const char* ct = "application/json";
    auto send = [&]() -> httplib::Result {
      if (method == "POST") return c->Post(path, headers, body, ct);
      if (method == "PUT") return c->Put(path, headers, body, ct);
      if (method == "DELETE") return c->Delete(path, headers, body, ct);
      if (method == "PATCH") return c->Patch(path, headers, body, ct);
      return c->Get(path, headers);
    };
    httplib::Result r = send();
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.body = r->body;
    out.content_type = r->get_header_value("Content-Type");
    out.json = Json::parse(out.body, nullptr, false);
    return out;
  }
  Reply get(const std::string& path, httplib::Headers headers = {}) const {
    return request("GET", path, "", "", std::move(headers));
  }
  // Writes with the right token by default.
  Reply post(const std::string& path, const Json& body = Json::object(),
             const std::string& token = kToken) const {
    return request("POST", path, body.dump(), token);
  }
  Reply put(const std::string& path, const Json& body, const std::string& token = kToken) const {
    return request("PUT", path, body.dump(), token);
  }

 private:
  std::string error_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<HttpServer> server_;
};

inline bool is_critical_at(const Json& e, int chip, int port) {
  return e["severity"] == "critical" && e["chip"] == chip && e["port"] == port &&
         (e["kind"] == "fault" || e["kind"] == "alarm");
}

// The chip 0 (l1/sw00000) port 2 link goes to l2/sw00002 port 0: an NRC-to-NRC link whose loss
// the fat tree routes around (port 3 is the other up-link).
inline constexpr int kFaultChip = 0;
inline constexpr int kFaultPort = 2;

// Injects link-down at chip/port and waits (at most 2 s) until /api/faults shows a critical
// fault or alarm there and /api/status counts the report (the daemon publishes its counters
// once the report is handled: re-discovery, alarms, re-route). Returns /api/faults then (null
// when it did not come).
inline Json inject_and_wait(const NmdInstance& nmd, int chip = kFaultChip, int port = kFaultPort) {
  const int64_t received = nmd.get("/api/status").json.value("faults_received", int64_t{0});
  Reply inj = nmd.post("/api/inject",
                       {{"action", "link-down"}, {"chip", std::to_string(chip)}, {"port", port}});
  EXPECT_EQ(inj.status, 200) << inj.describe();
  if (inj.status != 200) return nullptr;
  EXPECT_EQ(inj.json["injected"], "link-down");
  EXPECT_EQ(inj.json["port"], port);
  const bool seen = wait_until([&] {
    if (nmd.get("/api/status").json.value("faults_received", int64_t{0}) <= received) return false;
    const Reply f = nmd.get("/api/faults");
    for (const auto& e : f.json["faults"])
      if (is_critical_at(e, chip, port)) return true;
    return false;
  });
  EXPECT_TRUE(seen) << "no critical fault/alarm at chip " << chip << " port " << port
                    << " within 2 s: " << nmd.get("/api/faults").body;
  return seen ? nmd.get("/api/faults").json : Json(nullptr);
}

// A server-sent event stream read in a thread of its own.
class SseReader {
 public:
  struct Frame {
    int64_t id = -1;
    std::string event;
    std::string data;
  };

  SseReader(const NmdInstance& nmd, httplib::Headers headers = {})
      : client_(nmd.client()), headers_(std::move(headers)) {
    thread_ = std::thread([this] {
      auto r = client_->Get(
          "/api/events", headers_,
          [this](const httplib::Response& res) {
            std::lock_guard lock(mu_);
            content_type_ = res.get_header_value("Content-Type");
            return true;
          },
          [this](const char* data, size_t n) {
            std::lock_guard lock(mu_);
            text_.append(data, n);
            return !stop_;
          });
      std::lock_guard lock(mu_);
      if (r) status_ = r->status;
      done_ = true;
    });
  }
  ~SseReader() { close(); }
  SseReader(const SseReader&) = delete;
  SseReader& operator=(const SseReader&) = delete;

  void close() {
    stop_ = true;
    if (client_) client_->stop();
    if (thread_.joinable()) thread_.join();
  }

  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }
  // Complete frames received so far (comments such as ": keep-alive" are skipped).
  std::vector<Frame> frames() const {
    std::vector<Frame> out;
    const std::string t = text();
    size_t pos = 0;
    while (true) {
      size_t end = t.find("\n\n", pos);
      if (end == std::string::npos) break;
      Frame f;
      bool any = false;
      size_t line = pos;
      while (line < end) {
        size_t eol = std::min(t.find('\n', line), end);
        std::string l = t.substr(line, eol - line);
        if (l.rfind("id: ", 0) == 0) {
          f.id = std::stoll(l.substr(4));
          any = true;
        } else if (l.rfind("event: ", 0) == 0) {
          f.event = l.substr(7);
          any = true;
        } else if (l.rfind("data: ", 0) == 0) {
          f.data += l.substr(6);
          any = true;
        }
        line = eol + 1;
      }
      if (any) out.push_back(std::move(f));
      pos = end + 2;
    }
    return out;
  }
  bool finished() const {
    std::lock_guard lock(mu_);
    return done_;
  }
  int status() const {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string content_type() const {
    std::lock_guard lock(mu_);
    return content_type_;
  }

 private:
  std::unique_ptr<httplib::Client> client_;
  httplib::Headers headers_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::string text_;
  bool done_ = false;
  int status_ = 0;
  std::string content_type_;
};

// gtest fixture: one fat tree (k = 4: 16 NICs, 20 NRCs, 48 links) per test, in-memory events.
class NmdApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nmd_ = std::make_unique<NmdInstance>(options());
    ASSERT_TRUE(nmd_->ok()) << nmd_->error();
  }
  void TearDown() override { nmd_.reset(); }
  virtual DaemonOptions options() const { return NmdInstance::default_options(); }

  Reply get(const std::string& path) const { return nmd_->get(path); }
  Reply post(const std::string& path, const Json& body = Json::object(),
             const std::string& token = kToken) const {
    return nmd_->post(path, body, token);
  }
  Reply put(const std::string& path, const Json& body, const std::string& token = kToken) const {
    return nmd_->put(path, body, token);
  }
  Daemon& daemon() { return nmd_->daemon(); }

  std::unique_ptr<NmdInstance> nmd_;
};

}  // namespace galaxy::nmd::api_test
