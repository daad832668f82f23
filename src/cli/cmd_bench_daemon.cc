// galaxy bench daemon — the management daemon under load, on loopback, in this process: the
// HTTP API with 32 and 64 kept-alive clients on the read endpoints (requests/s, p50, p99), the
// status latency while event streams and slow connections are open, and a fault storm (link
// flaps injected through the API) with every injected change accounted for: stored as a fault,
// sent on an event stream, alarmed, and the fabric's view back to no link down at the end.
// Memory before and after. Goals (issue "The management daemon ... under load and faults") are
// printed beside the figures.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/json_text.h"
#include "base/log.h"
#include "base/sysinfo.h"
#include "cli/bench_sim.h"
#include "cli/option_checks.h"
#include "nmd/daemon.h"
#include "nmd/http_server.h"

namespace galaxy::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct DaemonBenchOptions {
  std::string fabric = "sim:fattree:k=8,levels=3";
  double seconds = 3;
  std::vector<unsigned> clients{32, 64};
  std::vector<std::string> paths;  // empty: read_paths()
  unsigned streams = 64;
  unsigned slow = 200;
  unsigned flaps = 1000;
  double storm_s = 10;
  bool json = false;
  bool during_scan = true;
  int io_threads = 0;  // HttpOptions::io_threads
};

constexpr const char* kToken = "bench-daemon-token";

// The read endpoints a console or a script polls.
const std::vector<std::string>& read_paths() {
  static const std::vector<std::string> p = {"/api/status",
                                             "/api/chips",
                                             "/api/chips/0",
                                             "/api/faults?limit=50",
                                             "/api/log?limit=50",
                                             "/api/config",
                                             "/api/routes",
                                             "/api/scans",
                                             "/api/traffic",
                                             "/api/topology",
                                             "/api/faults?severity=critical&limit=20"};
  return p;
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// The length of the first whole answer in `in` (head and Content-Length body), 0 if incomplete;
// its status in `status`.
size_t whole_answer(const std::string& in, int& status) {
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return 0;
  size_t length = 0;
  const size_t cl = in.find("Content-Length: ");
  if (cl != std::string::npos && cl < end) length = std::stoul(in.substr(cl + 16));
  if (in.size() < end + 4 + length) return 0;
  status = in.size() >= 12 ? std::atoi(in.c_str() + 9) : 0;
  return end + 4 + length;
}

std::string get_request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n";
}

// One request on a kept-alive connection, waited for; its status, or 0.
int round_trip(int fd, const std::string& request, std::string& in, std::string* body = nullptr) {
  if (!send_all(fd, request)) return 0;
  char buf[65536];
  for (;;) {
    int status = 0;
    if (size_t n = whole_answer(in, status)) {
      if (body) *body = in.substr(in.find("\r\n\r\n") + 4, n - in.find("\r\n\r\n") - 4);
      in.erase(0, n);
      return status;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) return 0;
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return 0;
    in.append(buf, static_cast<size_t>(r));
  }
}

struct DuringScan {
  double scan_s = 0;
  int reads = 0;  // answered while the scan ran
  double trace_p50_ms = 0, trace_max_ms = 0, reg_p50_ms = 0, reg_max_ms = 0;
  std::string trace;
};

double percentile(std::vector<double> v, double q);

// A status scan of the whole fabric (POST /api/scans) and, while it runs, path traces between
// the first and last NIC and register reads of a switch, one after the other, each timed.
DuringScan run_during_scan(nmd::Daemon& d, int port) {
  DuringScan r;
  std::string last_nic, nrc;
  {
    auto v = d.view();
    for (uint32_t c = 0; c < v->chips.size(); ++c) {
      if (v->chips[c].kind == fabric::NodeKind::kNic) last_nic = std::to_string(c);
      if (nrc.empty() && v->chips[c].kind == fabric::NodeKind::kNrc) nrc = std::to_string(c);
    }
  }
  r.trace = "nic:0 -> chip " + last_nic;
  std::atomic<bool> scanning{true};
  std::thread scan([&] {
    int fd = connect_loopback(port);
    std::string in;
    const auto t0 = Clock::now();
    (void)round_trip(fd,
                     "POST /api/scans HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " +
                         std::string(kToken) + "\r\nContent-Length: 0\r\n\r\n",
                     in);
    r.scan_s = std::chrono::duration<double>(Clock::now() - t0).count();
    scanning = false;
    ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the scan has the session
  int fd = connect_loopback(port);
  std::string in;
  std::vector<double> trace_ms, reg_ms;
  while (scanning) {
    auto t0 = Clock::now();
    if (round_trip(fd, get_request("/api/trace?src=nic:0&dst=" + last_nic), in) == 200 &&
        scanning) {
      trace_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ++r.reads;
    }
    t0 = Clock::now();
    if (round_trip(fd, get_request("/api/chips/" + nrc + "/registers/SCRATCH"), in) == 200 &&
        scanning) {
      reg_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      ++r.reads;
    }
  }
  ::close(fd);
  scan.join();
  r.trace_p50_ms = percentile(trace_ms, 0.5);
  r.trace_max_ms = trace_ms.empty() ? 0 : *std::max_element(trace_ms.begin(), trace_ms.end());
  r.reg_p50_ms = percentile(reg_ms, 0.5);
  r.reg_max_ms = reg_ms.empty() ? 0 : *std::max_element(reg_ms.begin(), reg_ms.end());
  return r;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

struct LoadResult {
  unsigned clients = 0;
  uint64_t requests = 0, failed = 0;
  double seconds = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// `n` kept-alive clients, each sending its next request (the next read endpoint) as soon as its
// previous answer is whole, for `seconds`; one thread drives them all, so the figures are the
// server's and not a crowd of client threads'.
LoadResult run_load(int port, unsigned n, double seconds, const std::vector<std::string>& paths) {
  struct Client {
    int fd = -1;
    std::string in;
    Clock::time_point sent;
    size_t next = 0;
  };
  std::vector<Client> cs(n);
  LoadResult r;
  r.clients = n;
  for (unsigned i = 0; i < n; ++i) {
    cs[i].fd = connect_loopback(port);
    cs[i].next = i;
  }
  std::vector<double> lat;
  const auto t0 = Clock::now();
  const auto end =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto send_next = [&](Client& c) {
    c.sent = Clock::now();
    const std::string& p = paths[c.next++ % paths.size()];
    if (!send_all(c.fd, get_request(p))) {
      ::close(c.fd);
      c.fd = -1;
    }
  };
  // epoll, as load generators such as wrk do: a poll() over every client per answer would cost
  // more than the server's work.
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (unsigned i = 0; i < n; ++i) {
    if (cs[i].fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    send_next(cs[i]);
  }
  std::vector<epoll_event> ready(n);
  char buf[65536];
  while (Clock::now() < end) {
    const int got_n = ::epoll_wait(ep, ready.data(), static_cast<int>(n), 100);
    for (int k = 0; k < got_n; ++k) {
      Client& c = cs[ready[static_cast<size_t>(k)].data.u32];
      if (c.fd < 0) continue;
      ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got <= 0) {
        ++r.failed;
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      c.in.append(buf, static_cast<size_t>(got));
      int status = 0;
      if (size_t used = whole_answer(c.in, status)) {
        c.in.erase(0, used);
        lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c.sent).count());
        ++r.requests;
        if (status != 200) ++r.failed;
        send_next(c);
      }
    }
  }
  ::close(ep);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& c : cs)
    if (c.fd >= 0) ::close(c.fd);
  r.p50_ms = percentile(lat, 0.5);
  r.p99_ms = percentile(lat, 0.99);
  r.max_ms = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  return r;
}

struct StarveResult {
  unsigned streams_open = 0, slow_open = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  unsigned failed = 0;
};

// Event streams and connections that send a byte a second stay open while GET /api/status is
// timed.
StarveResult run_starve(int port, unsigned streams, unsigned slow) {
  StarveResult r;
  std::vector<int> sfd, wfd;
  for (unsigned i = 0; i < streams; ++i) {
    int fd = connect_loopback(port);
    if (fd >= 0 && send_all(fd, get_request("/api/events"))) {
      sfd.push_back(fd);
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  for (unsigned i = 0; i < slow; ++i) {
    int fd = connect_loopback(port);
    if (fd >= 0 && send_all(fd, "GET /api/status HTTP/1.1\r\nX-Slow: ")) {
      wfd.push_back(fd);
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  r.streams_open = static_cast<unsigned>(sfd.size());
  r.slow_open = static_cast<unsigned>(wfd.size());
  std::atomic<bool> done{false};
  std::thread feeder([&] {
    char buf[65536];
    auto next_byte = Clock::now();
    while (!done) {
      std::vector<pollfd> pf;
      for (int fd : sfd) pf.push_back({fd, POLLIN, 0});
      if (!pf.empty()) ::poll(pf.data(), pf.size(), 50);
      for (auto& p : pf)
        if (p.revents & POLLIN) (void)!::recv(p.fd, buf, sizeof buf, 0);
      if (Clock::now() >= next_byte) {
        for (int fd : wfd) (void)!::send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        next_byte += std::chrono::seconds(1);
      }
      if (pf.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<double> lat;
  int fd = connect_loopback(port);
  std::string in;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = Clock::now();
    if (round_trip(fd, get_request("/api/status"), in) != 200) ++r.failed;
    lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::close(fd);
  done = true;
  feeder.join();
  for (int f : sfd) ::close(f);
  for (int f : wfd) ::close(f);
  r.p50_ms = percentile(lat, 0.5);
  r.p99_ms = percentile(lat, 0.99);
  r.max_ms = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  return r;
}

struct StormResult {
  unsigned links = 0, flaps = 0;
  double seconds = 0;
  uint64_t downs = 0, ups = 0;                // injected
  uint64_t downs_stored = 0, ups_stored = 0;  // changes with a stored fault (either end)
  uint64_t duplicates = 0;                    // faults beyond one per change
  uint64_t faults_stored = 0, faults_streamed = 0, alarms = 0;
  uint64_t inferred = 0;  // recorded without a report (a later report or a read proved them)
  int64_t links_down_after = -1;
  double settle_s = 0;
};

StormResult run_storm(nmd::Daemon& d, int port, unsigned flaps, double storm_s) {
  StormResult r;
  // Switch-to-switch links: losing one leaves every NIC reachable.
  std::vector<std::pair<uint32_t, uint8_t>> links;
  std::map<std::pair<int64_t, int32_t>, size_t> end_of;  // (chip, port) -> link index
  {
    auto v = d.view();
    for (uint32_t c = 0; c < v->chips.size(); ++c) {
      if (v->chips[c].kind != fabric::NodeKind::kNrc) continue;
      for (uint8_t p = 0; p < v->chips[c].ports; ++p) {
        const auto& pv = v->port(c, p);
        if (pv.peer == fabric::kNoNode || pv.peer <= c) continue;
        if (v->chips[pv.peer].kind != fabric::NodeKind::kNrc) continue;
        end_of[{c, p}] = links.size();
        end_of[{pv.peer, pv.peer_port}] = links.size();
        links.emplace_back(c, p);
      }
    }
  }
  r.links = static_cast<unsigned>(links.size());
  if (links.empty()) return r;
  const int64_t first_id = d.wait_for_event(INT64_MAX, 0);

  // An event stream open through the storm counts what it is sent.
  std::atomic<bool> done{false};
  std::atomic<uint64_t> streamed{0};
  int sfd = connect_loopback(port);
  send_all(sfd, get_request("/api/events?after=" + std::to_string(first_id)));
  std::thread reader([&] {
    std::string text;
    char buf[65536];
    while (!done) {
      pollfd p{sfd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::recv(sfd, buf, sizeof buf, 0);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      size_t pos;
      while ((pos = text.find("event: fault\n")) != std::string::npos) {
        ++streamed;
        text.erase(0, pos + 13);
      }
      if (text.size() > 16) text.erase(0, text.size() - 16);
    }
  });

  int fd = connect_loopback(port);
  std::string in;
  std::vector<uint32_t> flapped(links.size(), 0);
  const auto t0 = Clock::now();
  const double step = storm_s / (2.0 * flaps);
  for (unsigned i = 0; i < 2 * flaps; ++i) {
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(step * i)));
    const size_t l = (i / 2) % links.size();
    const bool down = i % 2 == 0;
    const json body{{"action", down ? "link-down" : "link-up"},
                    {"chip", std::to_string(links[l].first)},
                    {"port", links[l].second}};
    const std::string b = json_text(body);
    const std::string req =
        "POST /api/inject HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + std::string(kToken) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(b.size()) +
        "\r\n\r\n" + b;
    if (round_trip(fd, req, in) == 200) {
      (down ? r.downs : r.ups) += 1;
      if (!down) ++flapped[l];
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.flaps = flaps;
  // Settled once the stored faults stop changing for 2 s (at most 60 s).
  const auto s0 = Clock::now();
  auto faults_now = [&] {
    nmd::EventQuery q{.kind = nmd::EventKind::kFault, .after_id = first_id};
    auto n = d.events().count(q);
    return n.ok() ? *n : int64_t{-1};
  };
  int64_t last = faults_now();
  auto quiet_since = Clock::now();
  while (Clock::now() - s0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t now = faults_now();
    // Reports that came during a re-route's computation are taken when it ends: not settled.
    if (now != last || d.counters().rerouting) {
      last = now;
      quiet_since = Clock::now();
    } else if (Clock::now() - quiet_since >= std::chrono::seconds(2)) {
      break;
    }
  }
  r.settle_s = std::chrono::duration<double>(Clock::now() - s0).count();

  // Accounting: per link and end, the faults of each kind against the changes injected.
  std::map<std::pair<int64_t, int32_t>, std::pair<uint64_t, uint64_t>> per_end;  // downs, ups
  int64_t after = first_id;
  for (;;) {
    nmd::EventQuery q{.limit = 10000, .newest_first = false, .after_id = after};
    auto events = d.events().query(q);
    if (!events.ok() || events->empty()) break;
    for (const nmd::Event& e : *events) {
      after = e.id;
      if (e.kind == nmd::EventKind::kAlarm && e.cause == "link down") ++r.alarms;
      if (e.kind != nmd::EventKind::kFault) continue;
      ++r.faults_stored;
      if (e.detail.find("\"inferred\":true") != std::string::npos) ++r.inferred;
      if (e.cause == "link_down") ++per_end[{e.chip, e.port}].first;
      if (e.cause == "link_up") ++per_end[{e.chip, e.port}].second;
    }
    if (events->size() < q.limit) break;
  }
  // A change is recorded once for the link, at whichever end reported it (or was read).
  std::vector<uint64_t> downs_at(links.size(), 0), ups_at(links.size(), 0);
  for (const auto& [end, counts] : per_end) {
    auto it = end_of.find(end);
    if (it == end_of.end()) continue;
    downs_at[it->second] += counts.first;
    ups_at[it->second] += counts.second;
  }
  for (size_t l = 0; l < links.size(); ++l) {
    r.downs_stored += std::min<uint64_t>(downs_at[l], flapped[l]);
    r.ups_stored += std::min<uint64_t>(ups_at[l], flapped[l]);
    r.duplicates += (downs_at[l] > flapped[l] ? downs_at[l] - flapped[l] : 0) +
                    (ups_at[l] > flapped[l] ? ups_at[l] - flapped[l] : 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  done = true;
  reader.join();
  ::close(sfd);
  r.faults_streamed = streamed;
  std::string body;
  if (round_trip(fd, get_request("/api/status"), in, &body) == 200) {
    json s = json::parse(body, nullptr, false);
    if (s.is_object()) r.links_down_after = s.value("links_down", int64_t{-1});
  }
  ::close(fd);
  return r;
}

void run_bench_daemon(const DaemonBenchOptions& o) {
  // The storm's thousands of faults would each be a log line: the figures are what is printed.
  log::Options quiet;
  quiet.level = log::Level::kError;
  (void)log::configure(quiet);
  const double rss_before = rss_mb();
  const std::string db = (std::filesystem::temp_directory_path() /
                          ("galaxy-bench-daemon-" + std::to_string(::getpid()) + ".db"))
                             .string();
  nmd::DaemonOptions dopt;
  dopt.session.fabric = o.fabric;
  dopt.db_path = db;
  // The daemon's defaults otherwise: a status scan at start (which also tells the fault ledger
  // every link's state) and every minute, sweeps every 5 minutes, an audit every 5 s.
  auto d = nmd::Daemon::create(dopt);
  if (!d.ok()) throw std::runtime_error(d.error().to_string());
  (*d)->start();
  nmd::HttpOptions h;
  h.host = "127.0.0.1";
  h.port = 0;
  h.token = kToken;
  h.io_threads = o.io_threads;
  nmd::HttpServer server(**d, h);
  if (Status st = server.bind(); !st.ok()) throw std::runtime_error(st.to_string());
  server.start();
  const int port = server.port();
  const double rss_started = rss_mb();
  if (!o.json) {
    std::printf(
        "galaxy bench daemon: %s, HTTP on 127.0.0.1:%d (loopback), %d I/O threads, %d workers\n",
        o.fabric.c_str(), port, server.io_threads(), h.threads);
    std::printf("  memory: %.1f MB before the daemon, %.1f MB with it running\n", rss_before,
                rss_started);
  }
  json out{{"fabric", o.fabric},
           {"io_threads", server.io_threads()},
           {"rss_mb_before", rss_before},
           {"rss_mb_started", rss_started}};

  out["load"] = json::array();
  for (unsigned n : o.clients) {
    LoadResult r = run_load(port, n, o.seconds, o.paths.empty() ? read_paths() : o.paths);
    const double rps = r.seconds > 0 ? static_cast<double>(r.requests) / r.seconds : 0;
    out["load"].push_back({{"clients", n},
                           {"requests", r.requests},
                           {"failed", r.failed},
                           {"requests_per_s", rps},
                           {"p50_ms", r.p50_ms},
                           {"p99_ms", r.p99_ms},
                           {"max_ms", r.max_ms}});
    if (!o.json)
      std::printf(
          "  %3u kept-alive clients, read endpoints: %8.0f requests/s  p50 %6.2f ms  p99 %6.2f "
          "ms  max %6.1f ms  failed %llu   (goal p50 <= 1 ms, p99 <= 20 ms)\n",
          n, rps, r.p50_ms, r.p99_ms, r.max_ms, static_cast<unsigned long long>(r.failed));
  }

  StarveResult s = run_starve(port, o.streams, o.slow);
  out["starve"] = {{"streams", s.streams_open}, {"slow_connections", s.slow_open},
                   {"status_p50_ms", s.p50_ms}, {"status_p99_ms", s.p99_ms},
                   {"status_max_ms", s.max_ms}, {"failed", s.failed}};
  if (!o.json)
    std::printf(
        "  GET /api/status with %u event streams and %u slow connections open: p50 %.2f ms  p99 "
        "%.2f ms  max %.1f ms  failed %u   (goal <= 100 ms)\n",
        s.streams_open, s.slow_open, s.p50_ms, s.p99_ms, s.max_ms, s.failed);

  if (o.during_scan) {
    // The daemon scans the fabric once at start (its default): the timed scan waits for that
    // one to end, so that it measures a request behind one scan, not behind two interleaved.
    const auto wait_until = Clock::now() + std::chrono::minutes(5);
    while ((*d)->counters().scans == 0 && Clock::now() < wait_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    DuringScan ds = run_during_scan(**d, port);
    out["during_scan"] = {{"scan_s", ds.scan_s},
                          {"answered", ds.reads},
                          {"trace_p50_ms", ds.trace_p50_ms},
                          {"trace_max_ms", ds.trace_max_ms},
                          {"reg_p50_ms", ds.reg_p50_ms},
                          {"reg_max_ms", ds.reg_max_ms}};
    if (!o.json)
      std::printf(
          "  during a status scan of %.2f s: %d traces (%s) and register reads answered; trace "
          "p50 %.1f ms max %.1f ms, register read p50 %.1f ms max %.1f ms   (goal <= 200 ms)\n",
          ds.scan_s, ds.reads, ds.trace.c_str(), ds.trace_p50_ms, ds.trace_max_ms, ds.reg_p50_ms,
          ds.reg_max_ms);
  }

  StormResult st = run_storm(**d, port, o.flaps, o.storm_s);
  const uint64_t lost = (st.downs - st.downs_stored) + (st.ups - st.ups_stored);
  out["storm"] = {{"links", st.links},
                  {"flaps", st.flaps},
                  {"seconds", st.seconds},
                  {"downs", st.downs},
                  {"ups", st.ups},
                  {"downs_stored", st.downs_stored},
                  {"ups_stored", st.ups_stored},
                  {"lost", lost},
                  {"duplicates", st.duplicates},
                  {"faults_stored", st.faults_stored},
                  {"inferred", st.inferred},
                  {"faults_streamed", st.faults_streamed},
                  {"alarms", st.alarms},
                  {"links_down_after", st.links_down_after},
                  {"settle_s", st.settle_s}};
  const double rss_after = rss_mb();
  out["rss_mb_after"] = rss_after;
  if (!o.json) {
    std::printf(
        "  fault storm: %u flaps of %u switch links in %.1f s: %llu link-downs and %llu "
        "link-ups injected\n",
        st.flaps, st.links, st.seconds, static_cast<unsigned long long>(st.downs),
        static_cast<unsigned long long>(st.ups));
    std::printf(
        "    stored as faults: %llu of %llu downs, %llu of %llu ups; lost %llu, duplicated %llu "
        "  (goal: every change exactly once, 0 lost)\n",
        static_cast<unsigned long long>(st.downs_stored), static_cast<unsigned long long>(st.downs),
        static_cast<unsigned long long>(st.ups_stored), static_cast<unsigned long long>(st.ups),
        static_cast<unsigned long long>(lost), static_cast<unsigned long long>(st.duplicates));
    std::printf(
        "    faults stored %llu (%llu inferred from a later report or a read, their own report "
        "lost), sent on the event stream %llu; link-down alarms %llu; links down afterwards "
        "%lld; settled in %.1f s\n",
        static_cast<unsigned long long>(st.faults_stored),
        static_cast<unsigned long long>(st.inferred),
        static_cast<unsigned long long>(st.faults_streamed),
        static_cast<unsigned long long>(st.alarms), static_cast<long long>(st.links_down_after),
        st.settle_s);
    std::printf("  memory after: %.1f MB (%+.1f MB since the daemon started)\n", rss_after,
                rss_after - rss_started);
  }
  server.stop();
  (*d)->stop();
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix, ec);
  if (o.json) std::printf("%s\n", json_text(out, 2).c_str());
}

}  // namespace

void add_bench_daemon_subcommand(CLI::App* bench) {
  auto o = std::make_shared<DaemonBenchOptions>();
  auto* c = bench->add_subcommand(
      "daemon",
      "The management daemon under load on loopback: kept-alive clients, event streams and slow "
      "connections, a fault storm with every change accounted for, memory");
  c->add_option("--fabric", o->fabric, "simulated fabric the daemon manages")
      ->capture_default_str();
  c->add_option("--seconds", o->seconds, "length of each client load")
      ->capture_default_str()
      ->check(real_in(0.1, 600, Bounds::kClosed));
  c->add_option("--clients", o->clients, "concurrent kept-alive clients, one load per value")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  c->add_option("--paths", o->paths,
                "the endpoints the clients read, in turn (default: status, chips, a chip, faults, "
                "log, config, routes, scans, traffic, topology)");
  c->add_option("--streams", o->streams, "event streams open while status is timed")
      ->capture_default_str()
      ->check(integer_in(0, 4000));
  c->add_option("--slow", o->slow, "connections sending a byte a second meanwhile")
      ->capture_default_str()
      ->check(integer_in(0, 4000));
  c->add_option("--flaps", o->flaps, "link flaps (a down, then an up) in the storm")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  c->add_option("--storm-s", o->storm_s, "the storm's length")
      ->capture_default_str()
      ->check(real_in(0.1, 3600, Bounds::kClosed));
  c->add_flag("!--no-scan", o->during_scan,
              "leave out the traces and register reads timed during a status scan");
  c->add_option("--io-threads", o->io_threads,
                "the daemon's HTTP I/O threads (its --http-io-threads; 0: one per core, at most 4)")
      ->capture_default_str()
      ->check(integer_in(0, 64));
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_bench_daemon(*o); });
}

}  // namespace galaxy::cli
