// The daemon's HTTP server under the loads that starve a thread-per-connection server: many event
// streams, slow and idle connections, kept-alive clients (one write per answer, no delayed-ACK
// stall), bodies over the limit in every transfer encoding, requests that never end, and the
// documented limits on streams and connections (503 beyond them).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "nmd_fixture.h"

namespace galaxy::nmd::api_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A client on a plain socket, to send exactly the bytes a test needs (partial requests,
// chunked bodies, Expect) and see what the server does with them.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // False once the server has closed (EPIPE/ECONNRESET).
  bool send(std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads what arrives until `done(text)` or the peer closes or `timeout` passes.
  std::string read_until(const std::function<bool(const std::string&)>& done,
                         std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!done(in_) && !eof_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof_ = true;
        break;
      }
      in_.append(buf, static_cast<size_t>(n));
    }
    return in_;
  }
  // One whole answer with a Content-Length body; status 0 when none came in time.
  Reply read_reply(std::chrono::milliseconds timeout = 5000ms) {
    auto whole = [](const std::string& t) {
      const size_t end = t.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      const size_t cl = t.find("Content-Length: ");
      if (cl == std::string::npos || cl > end) return true;
      return t.size() >= end + 4 + std::stoul(t.substr(cl + 16));
    };
    read_until(whole, timeout);
    Reply r;
    if (!whole(in_) || in_.rfind("HTTP/1.1 ", 0) != 0) return r;
    r.status = std::stoi(in_.substr(9, 3));
    const size_t end = in_.find("\r\n\r\n");
    r.body = in_.substr(end + 4);
    r.json = Json::parse(r.body, nullptr, false);
    in_.clear();
    return r;
  }
  bool closed_by_server(std::chrono::milliseconds timeout) {
    read_until([](const std::string&) { return false; }, timeout);
    return eof_;
  }
  const std::string& received() const { return in_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string in_;
};

std::string auth_header() {
  return fmt::format("Authorization: Bearer {}\r\n", kToken);
}

class NmdHttpTest : public ::testing::Test {
 protected:
  std::unique_ptr<NmdInstance> start(const std::function<void(HttpOptions&)>& http = {}) {
    auto n = std::make_unique<NmdInstance>(NmdInstance::default_options(), http);
    EXPECT_TRUE(n->ok()) << n->error();
    return n;
  }
  // Median wall time of `reps` GET /api/status on one kept-alive connection, in ms; every
  // answer must be 200.
  static double median_status_ms(const NmdInstance& nmd, int reps) {
    auto c = nmd.client();
    c->set_keep_alive(true);
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = Clock::now();
      auto r = c->Get("/api/status");
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      EXPECT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

TEST_F(NmdHttpTest, StatusAnswersWhileTwentyEventStreamsAreOpenAndEveryStreamGetsTheEvent) {
  // Eight workers (the fixture's), twenty streams: streams must not hold workers.
  auto nmd = start([](HttpOptions& h) { h.threads = 8; });
  ASSERT_TRUE(nmd->ok());
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < 20; ++i) {
    streams.push_back(std::make_unique<RawClient>(nmd->port()));
    ASSERT_TRUE(streams.back()->send("GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  for (auto& s : streams) {
    const std::string head = s->read_until(
        [](const std::string& t) { return t.find("\r\n\r\n") != std::string::npos; }, 5000ms);
    ASSERT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
    EXPECT_NE(head.find("text/event-stream"), std::string::npos) << head;
  }
  const auto t0 = Clock::now();
  Reply status = nmd->get("/api/status");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(status.status, 200) << status.describe();
  EXPECT_LT(ms, 1000) << "GET /api/status behind 20 open event streams";

  ASSERT_EQ(nmd->put("/api/chips/3/registers/SCRATCH", {{"value", 7}}).status, 200);
  for (auto& s : streams) {
    const std::string text = s->read_until(
        [](const std::string& t) { return t.find("event: config_change") != std::string::npos; },
        5000ms);
    EXPECT_NE(text.find("event: config_change"), std::string::npos) << text;
  }
}

TEST_F(NmdHttpTest, SlowAndIdleConnectionsDelayNoRequest) {
  auto nmd = start([](HttpOptions& h) { h.threads = 4; });
  ASSERT_TRUE(nmd->ok());
  // 40 connections that never send, 40 that stopped half-way through a request line.
  std::vector<std::unique_ptr<RawClient>> idle, slow;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<RawClient>(nmd->port()));
    slow.push_back(std::make_unique<RawClient>(nmd->port()));
    ASSERT_TRUE(idle.back()->connected() && slow.back()->connected());
    ASSERT_TRUE(slow.back()->send("GET /api/sta"));
  }
  // Let the server take them all in before measuring.
  std::this_thread::sleep_for(100ms);
  const double median = median_status_ms(*nmd, 21);
  EXPECT_LT(median, 100) << "median GET /api/status with 80 idle or slow connections open";
  // The slow ones are still served when they finish.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(slow[static_cast<size_t>(i)]->send("tus HTTP/1.1\r\nHost: t\r\n\r\n"));
    EXPECT_EQ(slow[static_cast<size_t>(i)]->read_reply().status, 200);
  }
}

TEST_F(NmdHttpTest, KeptAliveRequestsAreNotHeldByDelayedAcks) {
  auto nmd = start();
  ASSERT_TRUE(nmd->ok());
  // An answer written as two segments (head, then body) without TCP_NODELAY waits for the
  // client's delayed ACK: ~40 ms per request on a kept-alive connection.
  const double median = median_status_ms(*nmd, 31);
  EXPECT_LT(median, 20) << "median GET /api/status on one kept-alive connection";
  // Writes too: a PUT with a body, answered on the same connection.
  auto c = nmd->client();
  c->set_keep_alive(true);
  httplib::Headers h{{"Authorization", std::string("Bearer ") + kToken}};
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = Clock::now();
    auto r =
        c->Put("/api/chips/3/registers/SCRATCH", h, Json{{"value", i}}.dump(), "application/json");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ASSERT_TRUE(r && r->status == 200);
  }
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[ms.size() / 2], 20) << "median PUT on one kept-alive connection";
}

TEST_F(NmdHttpTest, ChunkedBodyOverTheLimitIs413) {
  auto nmd = start();
  ASSERT_TRUE(nmd->ok());
  RawClient c(nmd->port());
  ASSERT_TRUE(c.send("PUT /api/chips/3/registers/SCRATCH HTTP/1.1\r\nHost: t\r\n" + auth_header() +
                     "Transfer-Encoding: chunked\r\n\r\n"));
  const std::string piece(64 * 1024, ' ');
  size_t sent = 0;
  // 2 MiB in 64 KiB chunks, or until the server stops taking them.
  while (sent < (2u << 20) && c.send(fmt::format("{:x}\r\n{}\r\n", piece.size(), piece)))
    sent += piece.size();
  c.send("0\r\n\r\n");
  Reply r = c.read_reply();
  EXPECT_EQ(r.status, 413) << c.received().substr(0, 300);
  EXPECT_EQ(r.error_id(), "E8312") << r.body;
  EXPECT_TRUE(c.closed_by_server(5000ms));
  // Within the limit, chunked is fine.
  RawClient ok(nmd->port());
  const std::string body = Json{{"value", 5}}.dump();
  ASSERT_TRUE(ok.send("PUT /api/chips/3/registers/SCRATCH HTTP/1.1\r\nHost: t\r\n" + auth_header() +
                      "Transfer-Encoding: chunked\r\n\r\n" +
                      fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body)));
  EXPECT_EQ(ok.read_reply().status, 200);
}

TEST_F(NmdHttpTest, ContentLengthOverTheLimitIs413BeforeTheBodyIsRead) {
  auto nmd = start([](HttpOptions& h) { h.max_body_bytes = 1000; });
  ASSERT_TRUE(nmd->ok());
  RawClient c(nmd->port());
  ASSERT_TRUE(c.send("PUT /api/chips/3/registers/SCRATCH HTTP/1.1\r\nHost: t\r\n" + auth_header() +
                     "Content-Length: 50000000\r\n\r\n"));
  Reply r = c.read_reply(2000ms);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.error_id(), "E8312") << r.body;
}

TEST_F(NmdHttpTest, HeadersOverTheLimitAre431) {
  auto nmd = start([](HttpOptions& h) { h.max_header_bytes = 2048; });
  ASSERT_TRUE(nmd->ok());
  RawClient c(nmd->port());
  ASSERT_TRUE(c.send("GET /api/status HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(4096, 'x') +
                     "\r\n\r\n"));
  Reply r = c.read_reply();
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(r.error_id(), "E8315") << r.body;
}

TEST_F(NmdHttpTest, ARequestThatNeverEndsIs408AndAnIdleConnectionIsClosed) {
  auto nmd = start([](HttpOptions& h) {
    h.request_timeout_ms = 300;
    h.idle_timeout_ms = 300;
  });
  ASSERT_TRUE(nmd->ok());
  RawClient slow(nmd->port());
  ASSERT_TRUE(slow.send("GET /api/status HTTP/1.1\r\nHost: t\r\n"));
  Reply r = slow.read_reply(3000ms);
  EXPECT_EQ(r.status, 408);
  EXPECT_EQ(r.error_id(), "E8316") << r.body;

  RawClient idle(nmd->port());
  ASSERT_TRUE(idle.connected());
  EXPECT_TRUE(idle.closed_by_server(3000ms));
  // A kept-alive connection that goes quiet after an answer is closed too.
  RawClient kept(nmd->port());
  ASSERT_TRUE(kept.send("GET /api/status HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(kept.read_reply().status, 200);
  EXPECT_TRUE(kept.closed_by_server(3000ms));
}

TEST_F(NmdHttpTest, Expect100ContinueIsAnswered) {
  auto nmd = start();
  ASSERT_TRUE(nmd->ok());
  RawClient c(nmd->port());
  const std::string body = Json{{"value", 9}}.dump();
  ASSERT_TRUE(c.send("PUT /api/chips/3/registers/SCRATCH HTTP/1.1\r\nHost: t\r\n" + auth_header() +
                     "Expect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n"));
  const std::string got = c.read_until(
      [](const std::string& t) { return t.find("\r\n\r\n") != std::string::npos; }, 2000ms);
  ASSERT_EQ(got.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << got;
  ASSERT_TRUE(c.send(body));
  // The final answer follows the interim one.
  const std::string all = c.read_until(
      [](const std::string& t) { return t.find("HTTP/1.1 200") != std::string::npos; }, 5000ms);
  EXPECT_NE(all.find("HTTP/1.1 200"), std::string::npos) << all;
}

TEST_F(NmdHttpTest, EventStreamsAndConnectionsBeyondTheLimitsAre503) {
  auto nmd = start([](HttpOptions& h) {
    h.max_streams = 2;
    h.max_connections = 4;
  });
  ASSERT_TRUE(nmd->ok());
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::make_unique<RawClient>(nmd->port()));
    ASSERT_TRUE(streams.back()->send("GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n"));
    const std::string head = streams.back()->read_until(
        [](const std::string& t) { return t.find("\r\n\r\n") != std::string::npos; }, 5000ms);
    ASSERT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
  }
  {
    RawClient third(nmd->port());
    ASSERT_TRUE(third.send("GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n"));
    Reply r = third.read_reply();
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.error_id(), "E8317") << r.body;
    // `third` is still open (a kept-alive 503): with the two streams, three of four connections.
    RawClient fourth(nmd->port());
    ASSERT_TRUE(fourth.send("GET /api/status HTTP/1.1\r\nHost: t\r\n\r\n"));
    EXPECT_EQ(fourth.read_reply().status, 200);
    RawClient fifth(nmd->port());
    Reply refused = fifth.read_reply();
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.error_id(), "E8318") << refused.body;
  }
  // Closing a stream makes room for another.
  streams.pop_back();
  EXPECT_TRUE(wait_until(
      [&] {
        RawClient again(nmd->port());
        if (!again.send("GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n")) return false;
        return again
                   .read_until(
                       [](const std::string& t) { return t.find("\r\n\r\n") != std::string::npos; },
                       1000ms)
                   .find("HTTP/1.1 200") != std::string::npos;
      },
      3000ms));
}

TEST_F(NmdHttpTest, SnapshotReadsAnswerWhileTheSessionIsBusyAndCachedAnswersFollowChanges) {
  auto nmd = start([](HttpOptions& h) { h.threads = 2; });
  ASSERT_TRUE(nmd->ok());
  // A long operation holds the session (as a scan of a large fabric does), and requests that
  // need it wait on every worker.
  std::atomic<bool> holding{false};
  std::thread busy([&] {
    nmd->daemon().with_session([&](Session&) {
      holding = true;
      std::this_thread::sleep_for(1500ms);
      return 0;
    });
  });
  ASSERT_TRUE(wait_until([&] { return holding.load(); }));
  std::vector<std::thread> waiting;
  for (int i = 0; i < 3; ++i)
    waiting.emplace_back([&] { (void)nmd->get("/api/chips/3/registers/SCRATCH"); });
  std::this_thread::sleep_for(100ms);
  for (const char* path : {"/api/status", "/api/topology", "/api/chips", "/api/faults", "/api/log",
                           "/api/config", "/api/routes", "/api/chips/3", "/metrics"}) {
    const auto t0 = Clock::now();
    Reply r = nmd->get(path);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    EXPECT_EQ(r.status, 200) << path << " " << r.describe();
    EXPECT_LT(ms, 500) << path << " waited for the session";
  }
  busy.join();
  for (auto& t : waiting) t.join();
  // A cached answer is made again once what it reads changed: a new event, an acknowledgement.
  Reply before = nmd->get("/api/log?limit=5");
  ASSERT_EQ(before.status, 200);
  ASSERT_EQ(nmd->put("/api/chips/3/registers/SCRATCH", {{"value", 11}}).status, 200);
  Reply after = nmd->get("/api/log?limit=5");
  EXPECT_NE(before.body, after.body);
  EXPECT_NE(after.body.find("SCRATCH"), std::string::npos) << after.body;
  ASSERT_FALSE(inject_and_wait(*nmd).is_null());
  Reply faults = nmd->get("/api/faults?limit=1");
  ASSERT_EQ(faults.json["faults"].size(), 1u);
  const int64_t id = faults.json["faults"][0]["id"];
  EXPECT_EQ(faults.json["faults"][0]["acknowledged"], false);
  ASSERT_EQ(nmd->post("/api/faults/" + std::to_string(id) + "/ack").status, 200);
  Reply acked = nmd->get("/api/faults?limit=1");
  EXPECT_EQ(acked.json["faults"][0]["acknowledged"], true) << acked.body;
}

// The ids of the `kind` events a stream has received, in order.
std::vector<std::string> stream_ids(const std::string& text, const std::string& kind) {
  std::vector<std::string> out;
  for (size_t at = text.find("id: "); at != std::string::npos; at = text.find("id: ", at + 1)) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;
    if (text.compare(nl + 1, 7 + kind.size(), "event: " + kind) == 0)
      out.push_back(text.substr(at + 4, nl - at - 4));
  }
  return out;
}

TEST_F(NmdHttpTest, EveryLaneServesItsStreamsCachesAndDeadlines) {
  // Three I/O lanes, connections spread over them in turn: six consecutive connections put two
  // on each lane.
  auto nmd = start([](HttpOptions& h) {
    h.threads = 2;
    h.io_threads = 3;
  });
  ASSERT_TRUE(nmd->ok());
  std::vector<std::unique_ptr<RawClient>> streams, readers;
  for (int i = 0; i < 6; ++i) {
    streams.push_back(std::make_unique<RawClient>(nmd->port()));
    ASSERT_TRUE(streams.back()->send("GET /api/events HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  std::vector<std::string> before;
  for (int i = 0; i < 3; ++i) {
    readers.push_back(std::make_unique<RawClient>(nmd->port()));
    ASSERT_TRUE(readers.back()->send("GET /api/log?limit=5 HTTP/1.1\r\nHost: t\r\n\r\n"));
    Reply r = readers.back()->read_reply();
    ASSERT_EQ(r.status, 200) << r.describe();
    before.push_back(r.body);
  }
  for (auto& s : streams)
    ASSERT_NE(
        s->read_until([](const std::string& t) { return t.find("\r\n\r\n") != std::string::npos; },
                      5000ms)
            .find("HTTP/1.1 200"),
        std::string::npos);
  for (int v = 21; v <= 23; ++v)
    ASSERT_EQ(nmd->put("/api/chips/3/registers/SCRATCH", {{"value", v}}).status, 200);
  // Every stream, whatever its lane, gets each change once and in order.
  std::vector<std::string> first;
  for (auto& s : streams) {
    const std::string text = s->read_until(
        [](const std::string& t) { return stream_ids(t, "config_change").size() >= 3; }, 5000ms);
    std::this_thread::sleep_for(50ms);  // a duplicate would be on its way by now
    const auto ids =
        stream_ids(s->read_until([](const std::string&) { return false; }, 50ms), "config_change");
    ASSERT_EQ(ids.size(), 3u) << text;
    if (first.empty()) first = ids;
    EXPECT_EQ(ids, first);
  }
  // Each lane's cache of answers is made again after the change.
  for (size_t i = 0; i < readers.size(); ++i) {
    ASSERT_TRUE(readers[i]->send("GET /api/log?limit=5 HTTP/1.1\r\nHost: t\r\n\r\n"));
    Reply r = readers[i]->read_reply();
    ASSERT_EQ(r.status, 200) << r.describe();
    EXPECT_NE(r.body, before[i]);
    EXPECT_NE(r.body.find("SCRATCH"), std::string::npos) << r.body;
  }

  // Each lane's deadlines are kept: idle connections on all three are closed.
  auto quick = start([](HttpOptions& h) {
    h.io_threads = 3;
    h.idle_timeout_ms = 300;
  });
  ASSERT_TRUE(quick->ok());
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 6; ++i) idle.push_back(std::make_unique<RawClient>(quick->port()));
  for (auto& c : idle) EXPECT_TRUE(c->closed_by_server(3000ms));
}

}  // namespace
}  // namespace galaxy::nmd::api_test
