#include "nmd/http_server.h"

#include <fmt/format.h>

#include "base/json_text.h"
#include "base/sysinfo.h"

// Beast's string_view is std::string_view (Boost 1.74 defaults to boost::string_view).
#define BOOST_BEAST_USE_STD_STRING_VIEW 1

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "base/spec.h"
#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd/web_assets.h"

namespace galaxy::nmd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kHttpDuration = "galaxy_http_request_duration_seconds";
// A refused request's body is read and dropped for at most this long after the answer, so
// the client, still sending, reads the answer instead of a reset connection.
constexpr auto kLingerTime = std::chrono::seconds(2);

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string header(const Request& req, http::field f) {
  auto it = req.find(f);
  return it == req.end() ? std::string() : std::string(it->value());
}
std::string header(const Request& req, const char* name) {
  auto it = req.find(name);
  return it == req.end() ? std::string() : std::string(it->value());
}

// An application/x-www-form-urlencoded query ('+' is a space, %XX decoded); a repeated name
// keeps its last value.
std::map<std::string, std::string> parse_query(std::string_view q) {
  std::map<std::string, std::string> out;
  auto decode = [](std::string_view s) {
    std::string t(s);
    for (char& c : t)
      if (c == '+') c = ' ';
    return url_decode(t);
  };
  while (!q.empty()) {
    const size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    out[decode(pair.substr(0, eq))] =
        eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1));
  }
  return out;
}

std::string content_type_of(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

std::string sse_frame(const Event& e) {
  return fmt::format("id: {}\nevent: {}\ndata: {}\n\n", e.id, event_kind_name(e.kind),
                     json_text(to_json(e)));
}

// The bearer token of a request ("" when none). Reads may give it as ?access_token= (RFC 6750
// 2.3): a browser's EventSource cannot set headers.
std::string bearer(const Request& req, const std::map<std::string, std::string>& query) {
  const std::string h = header(req, http::field::authorization);
  if (h.empty() && req.method() == http::verb::get)
    if (auto it = query.find("access_token"); it != query.end()) return it->second;
  const std::string prefix = "Bearer ";
  return h.compare(0, prefix.size(), prefix) == 0 ? h.substr(prefix.size()) : std::string();
}

Status check_token(const std::string& got, const std::string& token, const std::string& what) {
  if (got.empty())
    return make_error(Code::kPermissionDenied, 8302,
                      fmt::format("{} needs the token: send 'Authorization: Bearer <token>' (the "
                                  "daemon printed it at start)",
                                  what));
  if (!same_secret(got, token))
    return make_error(Code::kPermissionDenied, 8303,
                      fmt::format("{}: the bearer token is not this daemon's", what));
  return {};
}

std::map<std::string, std::string> query_of(const Request& req) {
  const std::string_view target = req.target();
  const size_t q = target.find('?');
  return parse_query(q == std::string_view::npos ? std::string_view() : target.substr(q + 1));
}

// One chunk of a chunked body (RFC 9112 7.1).
std::string chunk(const std::string& data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

}  // namespace

// A request as the API and the console see it, and the answer a worker built for it.
struct Answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Connection;

// Answers of cached routes (ApiRoute::cached_by) by request target, with the generation they
// were made from.
struct CachedAnswer {
  uint64_t generation = 0;
  Answer answer;
};
using AnswerCache = std::map<std::string, CachedAnswer>;

// One I/O thread and what it alone touches: its io_context, the sockets accepted onto it (their
// requests, answers, deadlines and event streams) and its cache of answers. The server spreads
// accepted connections over its lanes in turn; a connection stays on its lane until it closes.
struct Lane {
  explicit Lane(size_t i) : index(i), keepalive_timer(ioc), deadline_timer(ioc) {}
  const size_t index;
  asio::io_context ioc;
  asio::steady_timer keepalive_timer;
  asio::steady_timer deadline_timer;  // its connections' deadlines, checked every 50 ms
  std::thread thread;
  int64_t pumped = 0;  // the newest event id handed to this lane's streams
  AnswerCache cache;
};

// HttpOptions::io_threads: 0 is one lane per core, at most kMaxAutoLanes.
constexpr unsigned kMaxAutoLanes = 4;

std::vector<std::unique_ptr<Lane>> make_lanes(int io_threads) {
  unsigned n =
      io_threads > 0 ? static_cast<unsigned>(io_threads) : std::min(online_cores(), kMaxAutoLanes);
  std::vector<std::unique_ptr<Lane>> out;
  for (unsigned i = 0; i < n; ++i) out.push_back(std::make_unique<Lane>(i));
  return out;
}

class HttpServer::Impl {
 public:
  Impl(Daemon& daemon, HttpOptions options)
      : daemon_(daemon),
        o_(std::move(options)),
        lanes_(make_lanes(o_.io_threads)),
        acceptor_(lanes_.front()->ioc),
        workers_(static_cast<size_t>(std::max(1, o_.threads))) {}
  ~Impl() { stop(); }

  Status bind();
  void start();
  void stop();
  int port() const { return port_; }
  int io_threads() const { return static_cast<int>(lanes_.size()); }

  // --- used by connections (I/O thread unless said otherwise) ---
  const HttpOptions& options() const { return o_; }
  asio::thread_pool& workers() { return workers_; }
  bool stopping() const { return stopping_; }
  // The whole answer to a request that is not an event stream: on a worker, or on the I/O
  // thread when answers_inline.
  // `route`: the API route when the caller found it already (answers_inline); `cache`: the
  // calling lane's, which only its I/O thread touches (workers pass none).
  Answer answer(const Request& req, const ApiRoute* route = nullptr, AnswerCache* cache = nullptr);
  // GET of the console's files, /metrics and the API routes that read snapshots only.
  // Sets *route to the API route found, if any.
  bool answers_inline(const Request& req, const ApiRoute** route) const;
  Status read_auth(const Request& req) const;
  // The same with the request's bearer token already taken out (bearer()).
  Status read_auth_with(const std::string& got) const;
  Answer error_answer(const Error& e) const;
  Answer error_answer(int status, const Error& e) const;
  void observe(const std::string& route, const std::string& method, int status, double s);
  Daemon& daemon() { return daemon_; }

  // Connection registry, for the limits and to close them all at stop().
  bool admit(const std::shared_ptr<Connection>& c);
  void forget(Connection* c);
  bool admit_stream(const std::shared_ptr<Connection>& c);
  void forget_stream(Connection* c);

 private:
  using Frames = std::vector<std::pair<int64_t, std::string>>;
  void accept();
  void pump(int64_t last);  // its own thread: new events from the store to every live stream
  void deliver(Lane& lane, const Frames& frames);
  void keepalive(Lane& lane);
  void check_deadlines(Lane& lane);
  // The open connections (event streams only: `streams`) of one lane.
  std::vector<std::shared_ptr<Connection>> open_on(const Lane& lane, bool streams);

  Daemon& daemon_;
  HttpOptions o_;
  // The registries outlive the io_context: handlers it destroys at the end release the last
  // connections, which unregister themselves.
  std::mutex mu_;  // the registries (a connection may end on any thread)
  std::list<std::weak_ptr<Connection>> connections_;
  std::list<std::weak_ptr<Connection>> streams_;
  size_t open_connections_ = 0;
  size_t open_streams_ = 0;
  std::vector<std::unique_ptr<Lane>> lanes_;
  size_t next_lane_ = 0;    // lane 0's thread: where the next accepted socket goes
  tcp::acceptor acceptor_;  // on lane 0
  asio::thread_pool workers_;
  std::thread pump_thread_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;
  int port_ = 0;
};

// One accepted socket: requests one at a time (keep-alive), or, after GET /api/events, an
// event stream until either side closes.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // What the connection's one deadline is for.
  enum class Wait : uint8_t { kNone, kIdle, kRequest, kWrite, kLinger };
  Connection(HttpServer::Impl& s, Lane& lane, tcp::socket socket)
      : s_(s), lane_(lane), socket_(std::move(socket)) {}
  ~Connection() {
    if (stream_mode_) s_.forget_stream(this);
    s_.forget(this);
  }

  void start() { read_next(); }
  const Lane& lane() const { return lane_; }
  // Refuses the connection at once: too many are open.
  void refuse(const Error& e) {
    write(to_response(s_.error_answer(503, e), 11, false, false), false);
  }
  void close() {
    beast::error_code ec;
    waiting_ = Wait::kNone;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // --- event stream (I/O thread) ---
  bool live_stream() const { return stream_mode_ && !catching_up_; }
  int64_t last_id() const { return last_; }
  void push_frame(int64_t id, const std::string& frame) {
    if (id <= last_) return;
    last_ = id;
    enqueue(frame);
  }
  void keepalive(Clock::time_point now) {
    if (now - last_write_ >= std::chrono::milliseconds(s_.options().keepalive_ms))
      enqueue(": keep-alive\n\n");
    if (writing_ && now - write_started_ > std::chrono::milliseconds(s_.options().write_timeout_ms))
      close();  // the client takes nothing: it reconnects with Last-Event-ID and loses nothing
  }

 private:
  // Deadlines are kept as times and checked by the server's sweep (check_deadline), not one
  // timer per request: re-arming a timer for every request costs system calls.
  void arm(Wait w, int ms) {
    waiting_ = w;
    deadline_ = Clock::now() + std::chrono::milliseconds(std::max(ms, 0));
  }
  void disarm() { waiting_ = Wait::kNone; }

 public:
  // The server's deadline sweep (I/O thread): a request that ran out of time is answered 408
  // (its read is cancelled and ends with operation_aborted); otherwise the connection closes.
  void check_deadline(Clock::time_point now) {
    if (waiting_ == Wait::kNone || now < deadline_) return;
    const Wait w = waiting_;
    waiting_ = Wait::kNone;
    if (w == Wait::kRequest) {
      timed_out_ = true;
      beast::error_code ignored;
      socket_.cancel(ignored);
    } else {
      close();
    }
  }

 private:
  // A client that writes a request in pieces (head, then body) without TCP_NODELAY waits for
  // our ACK of the head before sending the body; Linux delays that ACK by up to 40 ms. Asking
  // for a quick ACK once the head is in and a body is due sends the pending one at once.
  void quick_ack() {
    int one = 1;
    (void)::setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  }

  void read_next() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(s_.options().max_header_bytes));
    parser_->body_limit(s_.options().max_body_bytes);
    if (buffer_.size() > 0) return read_request();
    // Idle until the next request begins.
    arm(Wait::kIdle, s_.options().idle_timeout_ms);
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  void read_request() {
    arm(Wait::kRequest, s_.options().request_timeout_ms);
    http::async_read_header(
        socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec || self->parser_->is_done()) return self->on_request(ec);
          // A client that asks first (curl does for large bodies) is told to send the body.
          if (beast::iequals(self->parser_->get()[http::field::expect], "100-continue")) {
            static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            return asio::async_write(self->socket_, asio::buffer(kContinue),
                                     [self](beast::error_code ec2, size_t) {
                                       if (ec2) return self->close();
                                       self->read_body();
                                     });
          }
          self->read_body();
        });
  }

  void read_body() {
    quick_ack();
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(beast::error_code ec) {
    if (timed_out_) ec = beast::error::timeout;
    disarm();
    if (ec == http::error::body_limit)
      return refuse_request(413, make_error(Code::kResourceExhausted, 8312,
                                            fmt::format("the request body is larger than {} bytes",
                                                        s_.options().max_body_bytes)));
    if (ec == http::error::header_limit)
      return refuse_request(
          431, make_error(Code::kResourceExhausted, 8315,
                          fmt::format("the request line and headers are larger than {} bytes",
                                      s_.options().max_header_bytes)));
    if (ec == beast::error::timeout)
      return refuse_request(408,
                            make_error(Code::kTimeout, 8316,
                                       fmt::format("the request did not arrive whole within {} ms",
                                                   s_.options().request_timeout_ms)));
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
      return close();
    if (ec)
      return refuse_request(
          400, make_error(Code::kMalformed, 8313,
                          fmt::format("the request was refused with HTTP 400: {}", ec.message())));
    Request req = parser_->release();
    parser_.reset();
    const std::string path(req.target().substr(0, req.target().find('?')));
    if (path == "/api/events" && (req.method() == http::verb::get))
      return start_stream(std::move(req));
    // Answers from the published snapshots are made here: they never wait for the session.
    // Everything else runs on a worker; the answer comes back to this thread to be written.
    if (const ApiRoute* route = nullptr; s_.answers_inline(req, &route)) {
      const bool head = req.method() == http::verb::head;
      Response res =
          to_response(s_.answer(req, route, &lane_.cache), req.version(), req.keep_alive(), head);
      const bool keep = res.keep_alive();
      return write(std::move(res), keep);
    }
    asio::post(s_.workers(), [self = shared_from_this(), req = std::move(req)]() mutable {
      Answer a = self->s_.answer(req);
      const bool head = req.method() == http::verb::head;
      Response res = to_response(std::move(a), req.version(), req.keep_alive(), head);
      asio::post(self->lane_.ioc, [self, res = std::move(res)]() mutable {
        const bool keep = res.keep_alive();
        self->write(std::move(res), keep);
      });
    });
  }

  static Response to_response(Answer a, unsigned version, bool keep_alive, bool head) {
    Response res{static_cast<http::status>(a.status), version};
    res.set(http::field::content_type, a.content_type);
    for (auto& [k, v] : a.headers) res.set(k, v);
    res.keep_alive(keep_alive);
    const size_t n = a.body.size();
    res.body() = std::move(a.body);
    res.prepare_payload();
    if (head) {  // the length of what GET would send, and no body
      res.body().clear();
      res.content_length(n);
    }
    return res;
  }

  // Answers and closes: what follows in the connection cannot be trusted to be a request.
  void refuse_request(int status, const Error& e) {
    write(to_response(s_.error_answer(status, e), 11, false, false), false);
  }

  void write(Response res, bool keep) {
    auto sp = std::make_shared<Response>(std::move(res));
    arm(Wait::kWrite, s_.options().write_timeout_ms);
    http::async_write(socket_, *sp,
                      [self = shared_from_this(), sp, keep](beast::error_code ec, size_t) {
                        if (ec) return self->close();
                        if (!keep) return self->linger();
                        self->read_next();
                      });
  }

  // Closing with unread bytes would reset the connection and could destroy the answer before
  // the client reads it: stop sending, drain what still comes for a moment, then close.
  void linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    if (linger_until_ == Clock::time_point{}) linger_until_ = Clock::now() + kLingerTime;
    if (Clock::now() >= linger_until_) return close();
    arm(Wait::kLinger, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            linger_until_ - Clock::now())
                                            .count()));
    buffer_.clear();
    socket_.async_read_some(buffer_.prepare(64 * 1024),
                            [self = shared_from_this()](beast::error_code ec2, size_t) {
                              if (ec2) return self->close();
                              self->linger();
                            });
  }

  // --- the event stream ---
  void start_stream(Request req) {
    Status auth = s_.read_auth(req);
    if (!auth.ok()) return answer_now(s_.error_answer(auth.error()), req);
    // Resume after Last-Event-ID (the browser sends it on reconnect) or ?after=; otherwise
    // only what happens from now on.
    std::string resume = header(req, "Last-Event-ID");
    if (resume.empty()) {
      auto q = query_of(req);
      if (auto it = q.find("after"); it != q.end()) resume = it->second;
    }
    int64_t after = 0;
    if (!resume.empty()) {
      auto v = parse_int("Last-Event-ID", resume, 0, INT64_MAX);
      if (!v.ok()) return answer_now(s_.error_answer(v.error()), req);
      after = *v;
    } else {
      after = s_.daemon().wait_for_event(INT64_MAX, 0);
    }
    if (!s_.admit_stream(shared_from_this()))
      return answer_now(
          s_.error_answer(503,
                          make_error(Code::kResourceExhausted, 8317,
                                     fmt::format("{} event streams are open, the most this daemon "
                                                 "serves; retry later",
                                                 s_.options().max_streams))),
          req);
    stream_mode_ = true;
    chunked_ = req.version() >= 11;
    last_ = after;
    disarm();
    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "X-Accel-Buffering: no\r\n";
    head += chunked_ ? "Transfer-Encoding: chunked\r\n\r\n" : "Connection: close\r\n\r\n";
    out_.push_back(std::move(head));
    out_bytes_ = out_.back().size();
    flush();
    watch_peer();
    catch_up();
  }

  void answer_now(Answer a, const Request& req) {
    s_.observe("/api/events", std::string(req.method_string()), a.status, 0);
    write(to_response(std::move(a), req.version(), req.keep_alive(), false), req.keep_alive());
  }

  // A stream's client sends nothing more; a read ends when it closes (or the server does).
  void watch_peer() {
    buffer_.clear();
    socket_.async_read_some(buffer_.prepare(1024),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->watch_peer();
                            });
  }

  // From the store, on a worker: everything after last_ (up to the newest the pump has handed
  // out; frames the pump hands out meanwhile are skipped by id and fetched here).
  void catch_up() {
    catching_up_ = true;
    asio::post(s_.workers(), [self = shared_from_this(), after = last_] {
      EventQuery q{.limit = 500, .newest_first = false, .after_id = after};
      auto events = self->s_.daemon().events().query(q);
      std::vector<std::pair<int64_t, std::string>> frames;
      if (events.ok())
        for (const Event& e : *events) frames.emplace_back(e.id, sse_frame(e));
      const bool full = events.ok() && events->size() == q.limit;
      asio::post(self->lane_.ioc, [self, frames = std::move(frames), full] {
        for (const auto& [id, f] : frames) self->push_frame(id, f);
        if (full || self->lane_.pumped > self->last_) return self->catch_up();
        self->catching_up_ = false;
      });
    });
  }

  void enqueue(const std::string& data) {
    if (!socket_.is_open()) return;
    out_.push_back(chunked_ ? chunk(data) : data);
    out_bytes_ += out_.back().size();
    if (out_bytes_ > s_.options().stream_buffer_bytes) return close();
    flush();
  }

  void flush() {
    if (writing_ || out_.empty()) return;
    writing_ = true;
    write_started_ = Clock::now();
    auto batch = std::make_shared<std::string>();
    for (auto& s : out_) *batch += s;
    out_.clear();
    out_bytes_ = 0;
    asio::async_write(socket_, asio::buffer(*batch),
                      [self = shared_from_this(), batch](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->last_write_ = Clock::now();
                        if (ec) return self->close();
                        self->flush();
                      });
  }

  HttpServer::Impl& s_;
  Lane& lane_;
  tcp::socket socket_;
  // One deadline at a time: for the next request to begin (idle), for it to arrive whole, for
  // an answer to be taken, for a refused request's remains. A request that runs out of time is
  // answered 408; the others close the connection.
  Wait waiting_ = Wait::kNone;
  Clock::time_point deadline_{};
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point linger_until_{};
  // Event stream state.
  bool stream_mode_ = false;
  bool chunked_ = true;
  bool catching_up_ = false;
  int64_t last_ = 0;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  bool writing_ = false;
  Clock::time_point write_started_{};
  Clock::time_point last_write_ = Clock::now();
};

// --- parse_listen, random_token ---

Status parse_listen(const std::string& text, std::string& host, int& port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return make_error(
        Code::kInvalidArgument, 8304,
        fmt::format("--listen = '{}': expected HOST:PORT, e.g. 127.0.0.1:8080", text));
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  auto p = parse_int("--listen port", text.substr(colon + 1), 0, 65535);
  if (!p.ok()) return p.error();
  host = h.empty() ? "0.0.0.0" : h;
  port = static_cast<int>(*p);
  return {};
}

std::string random_token() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
  return out;
}

// --- Impl ---

Status HttpServer::Impl::bind() {
  if (o_.token.empty())
    return make_error(Code::kInvalidArgument, 8305, "the daemon needs a write token");
  (void)daemon_.metrics().family(kHttpDuration, "HTTP request duration by route, method and code",
                                 MetricType::kHistogram,
                                 {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30});
  auto cannot = [&](const std::string& why) {
    return make_error(Code::kIoError, 8306,
                      fmt::format("cannot listen on {}:{}: {}", o_.host, o_.port, why));
  };
  beast::error_code ec;
  tcp::endpoint at;
  asio::ip::address addr = asio::ip::make_address(o_.host, ec);
  if (!ec) {
    at = tcp::endpoint(addr, static_cast<uint16_t>(o_.port));
  } else {
    tcp::resolver resolver(lanes_.front()->ioc);
    auto found = resolver.resolve(o_.host, std::to_string(o_.port),
                                  tcp::resolver::passive | tcp::resolver::address_configured, ec);
    if (ec || found.empty()) return cannot("not an address of this machine");
    at = found.begin()->endpoint();
  }
  // SO_REUSEADDR only: with SO_REUSEPORT a second daemon on the same port would start silently
  // and take half the connections.
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(o_.backlog, ec);
  if (ec) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    return cannot(ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
  return {};
}

void HttpServer::Impl::start() {
  if (started_ || !acceptor_.is_open()) return;
  started_ = true;
  const int64_t newest = daemon_.wait_for_event(INT64_MAX, 0);
  accept();
  for (auto& lane : lanes_) {
    lane->pumped = newest;
    keepalive(*lane);
    check_deadlines(*lane);
  }
  for (auto& lane : lanes_) lane->thread = std::thread([l = lane.get()] { l->ioc.run(); });
  pump_thread_ = std::thread([this, newest] { pump(newest); });
}

void HttpServer::Impl::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (pump_thread_.joinable()) pump_thread_.join();
  for (auto& lane : lanes_)
    asio::post(lane->ioc, [this, l = lane.get()] {
      beast::error_code ec;
      if (l->index == 0) acceptor_.close(ec);
      l->keepalive_timer.cancel();
      l->deadline_timer.cancel();
      for (auto& c : open_on(*l, false)) c->close();
    });
  // Requests being answered finish (their answers find closed sockets); nothing new starts.
  workers_.join();
  for (auto& lane : lanes_) {
    if (!lane->thread.joinable()) lane->ioc.run();  // bound but never started: release sockets
    lane->ioc.stop();
    if (lane->thread.joinable()) lane->thread.join();
  }
}

void HttpServer::Impl::accept() {
  Lane& lane = *lanes_[next_lane_++ % lanes_.size()];
  acceptor_.async_accept(lane.ioc, [this, &lane](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors or similar: try again shortly rather than spin.
      auto t =
          std::make_shared<asio::steady_timer>(lanes_.front()->ioc, std::chrono::milliseconds(50));
      t->async_wait([this, t](beast::error_code) {
        if (acceptor_.is_open()) accept();
      });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto c = std::make_shared<Connection>(*this, lane, std::move(socket));
    const bool admitted = admit(c);
    // From here on the connection is its lane's thread's.
    asio::post(lane.ioc, [this, c, admitted] {
      if (admitted) return c->start();
      c->refuse(make_error(Code::kResourceExhausted, 8318,
                           fmt::format("{} connections are open, the most this daemon serves; "
                                       "retry later",
                                       o_.max_connections)));
    });
    accept();
  });
}

bool HttpServer::Impl::admit(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mu_);
  connections_.push_back(c);
  return ++open_connections_ <= o_.max_connections;
}

// The connections a walk of the lists locks are let go after mu_ is: a connection whose last
// other owner went meanwhile is destroyed by the walk's reference, and its destructor forgets
// itself, which takes mu_ (under it, that thread would wait for itself for ever).
void HttpServer::Impl::forget(Connection* c) {
  std::vector<std::shared_ptr<Connection>> held;  // destroyed after `lock`
  std::lock_guard lock(mu_);
  --open_connections_;
  connections_.remove_if([&](const std::weak_ptr<Connection>& w) {
    auto p = w.lock();
    const bool gone = !p || p.get() == c;
    if (p) held.push_back(std::move(p));
    return gone;
  });
}

bool HttpServer::Impl::admit_stream(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mu_);
  if (open_streams_ >= o_.max_streams) return false;
  ++open_streams_;
  streams_.push_back(c);
  return true;
}

void HttpServer::Impl::forget_stream(Connection* c) {
  std::vector<std::shared_ptr<Connection>> held;  // destroyed after `lock` (forget)
  std::lock_guard lock(mu_);
  --open_streams_;
  streams_.remove_if([&](const std::weak_ptr<Connection>& w) {
    auto p = w.lock();
    const bool gone = !p || p.get() == c;
    if (p) held.push_back(std::move(p));
    return gone;
  });
}

std::vector<std::shared_ptr<Connection>> HttpServer::Impl::open_on(const Lane& lane, bool streams) {
  std::vector<std::shared_ptr<Connection>> out, others;  // both let go after `lock` (forget)
  std::lock_guard lock(mu_);
  for (auto& w : streams ? streams_ : connections_)
    if (auto c = w.lock()) (&c->lane() == &lane ? out : others).push_back(std::move(c));
  return out;
}

void HttpServer::Impl::pump(int64_t last) {
  while (!stopping_) {
    const int64_t newest = daemon_.wait_for_event(last, 200);
    if (stopping_) break;
    if (newest <= last) continue;
    for (;;) {
      EventQuery q{.limit = 1000, .newest_first = false, .after_id = last};
      auto events = daemon_.events().query(q);
      if (!events.ok() || events->empty()) break;
      auto frames = std::make_shared<Frames>();
      for (const Event& e : *events) frames->emplace_back(e.id, sse_frame(e));
      last = frames->back().first;
      for (auto& lane : lanes_)
        asio::post(lane->ioc, [this, l = lane.get(), frames] { deliver(*l, *frames); });
      if (events->size() < q.limit) break;
    }
  }
}

void HttpServer::Impl::deliver(Lane& lane, const Frames& frames) {
  lane.pumped = std::max(lane.pumped, frames.back().first);
  for (auto& c : open_on(lane, true))
    if (c->live_stream())
      for (const auto& [id, f] : frames) c->push_frame(id, f);
}

void HttpServer::Impl::keepalive(Lane& lane) {
  lane.keepalive_timer.expires_after(std::chrono::milliseconds(std::max(100, o_.keepalive_ms / 4)));
  lane.keepalive_timer.async_wait([this, &lane](beast::error_code ec) {
    if (ec || stopping_) return;
    const auto now = Clock::now();
    for (auto& c : open_on(lane, true)) c->keepalive(now);
    keepalive(lane);
  });
}

void HttpServer::Impl::check_deadlines(Lane& lane) {
  lane.deadline_timer.expires_after(std::chrono::milliseconds(50));
  lane.deadline_timer.async_wait([this, &lane](beast::error_code ec) {
    if (ec || stopping_) return;
    const auto now = Clock::now();
    for (auto& c : open_on(lane, false)) c->check_deadline(now);
    check_deadlines(lane);
  });
}

Status HttpServer::Impl::read_auth(const Request& req) const {
  if (o_.read_token.empty()) return {};
  return read_auth_with(bearer(req, query_of(req)));
}

Status HttpServer::Impl::read_auth_with(const std::string& got) const {
  if (o_.read_token.empty()) return {};
  if (same_secret(got, o_.read_token) || same_secret(got, o_.token)) return {};
  return check_token(got, o_.read_token, "reading");
}

Answer HttpServer::Impl::error_answer(const Error& e) const {
  return error_answer(http_status(e), e);
}

Answer HttpServer::Impl::error_answer(int status, const Error& e) const {
  Answer a;
  a.status = status;
  a.body = json_text(error_json(e)) + "\n";
  return a;
}

void HttpServer::Impl::observe(const std::string& route, const std::string& method, int status,
                               double s) {
  if (MetricFamily* f = daemon_.metrics().find(kHttpDuration))
    (void)f->observe({{"route", route}, {"method", method}, {"code", std::to_string(status)}}, s);
}

bool HttpServer::Impl::answers_inline(const Request& req, const ApiRoute** route) const {
  if (req.method() != http::verb::get && req.method() != http::verb::head) return false;
  const std::string_view target = req.target();
  const std::string raw_path(target.substr(0, target.find('?')));
  if (raw_path.rfind("/api/", 0) != 0) return true;  // the console's files, /metrics
  *route = find_api_route("GET", raw_path);
  return *route && (*route)->reads != ApiReads::kSession;
}

Answer HttpServer::Impl::answer(const Request& req, const ApiRoute* route_found,
                                AnswerCache* cache) {
  const auto t0 = Clock::now();
  const std::string method(req.method_string());
  const std::string target(req.target());
  const size_t qmark = target.find('?');
  const auto query = query_of(req);
  // The raw path: a chip name may hold an encoded '/' (l1/sw00000 as l1%2Fsw00000); the
  // route's parameters are decoded after matching.
  const std::string raw_path = target.substr(0, qmark);
  std::string route;
  Answer a;
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  if (raw_path == "/api/events" || raw_path == "/metrics") {
    route = raw_path;
    const bool events = raw_path == "/api/events";
    if (!get) {
      a = error_answer(405, make_error(Code::kUnsupported, 8314,
                                       fmt::format("{} is not allowed on {}", method, raw_path)));
    } else if (Status st = read_auth(req); !st.ok()) {
      a = error_answer(st.error());
    } else if (events) {  // HEAD: what GET would start
      a.content_type = "text/event-stream";
    } else {
      a.content_type = "text/plain; version=0.0.4; charset=utf-8";
      a.body = daemon_.metrics().exposition();
    }
  } else if (raw_path.rfind("/api/", 0) == 0) {
    ApiCall call;
    call.method = req.method() == http::verb::head ? "GET" : method;
    call.path = raw_path;
    call.query = query;
    call.body = req.body();
    const std::string user = header(req, "X-Galaxy-User");
    call.by = user.empty() ? "api" : user.substr(0, 64);
    const std::string what = method + " " + url_decode(raw_path);
    const std::string got = bearer(req, query);
    call.write_auth = check_token(got, o_.token, what);
    call.read_auth = read_auth_with(got);
    // A cached answer stays right while what it was made from is unchanged.
    // Answers of snapshot routes are made on the lanes' I/O threads, each with its own cache.
    const ApiRoute* known = route_found ? route_found
                            : get       ? find_api_route("GET", raw_path)
                                        : nullptr;
    const bool cacheable = cache && known && known->reads == ApiReads::kSnapshots &&
                           known->cached_by != 0 && call.read_auth.ok() &&
                           req.method() == http::verb::get && cache->size() < 4096;
    // Both generations only grow: their sum changes whenever either does.
    const uint64_t generation =
        (known && (known->cached_by & kCachedByView) ? daemon_.view_generation() : 0) +
        (known && (known->cached_by & kCachedByEvents) ? daemon_.events().generation() : 0);
    if (cacheable) {
      auto hit = cache->find(target);
      if (hit != cache->end() && hit->second.generation == generation) {
        observe(known->path, method, 200, std::chrono::duration<double>(Clock::now() - t0).count());
        return hit->second.answer;
      }
    }
    ApiResult r = dispatch(daemon_, call);
    route = std::move(r.route);
    a.status = r.status;
    a.body = json_text(r.body) + "\n";
    if (cacheable && a.status == 200) (*cache)[target] = {generation, a};
  } else if (!get) {
    a = error_answer(405, make_error(Code::kUnsupported, 8319,
                                     fmt::format("{} is not allowed on {} (the console is read "
                                                 "with GET; the API is under /api)",
                                                 method, raw_path)));
  } else {
    // The console: index.html at /, its files by name; the built-in copy unless --web DIR.
    const std::string decoded = url_decode(raw_path);
    const std::string path = decoded == "/" ? "/index.html" : decoded;
    bool found = false;
    if (path.find("..") != std::string::npos) {
      a = error_answer(make_error(Code::kInvalidArgument, 8310,
                                  fmt::format("path = '{}' leaves the console", decoded)));
      found = true;
    }
    // Only what the console is made of (as embedded): not node_modules/, e2e/ or dev/.
    const bool console_file =
        path.find('/', 1) == std::string::npos || path.rfind("/views/", 0) == 0;
    if (!found && !o_.web_dir.empty() && console_file) {
      std::ifstream in(o_.web_dir + path, std::ios::binary);
      if (in) {
        std::stringstream ss;
        ss << in.rdbuf();
        a.content_type = content_type_of(path);
        a.body = ss.str();
        found = true;
      }
    } else if (!found && o_.web_dir.empty()) {
      for (const WebAsset& w : web_assets())
        if (w.path == path.substr(1)) {
          a.content_type = content_type_of(path);
          a.body = std::string(w.body);
          found = true;
          break;
        }
    }
    if (found && a.status == 200) a.headers.emplace_back("Cache-Control", "no-cache");
    if (!found)
      a = error_answer(
          make_error(Code::kNotFound, 8311,
                     fmt::format("no console file {} (the API is under /api)", decoded)));
  }
  if (!route.empty())
    observe(route, method, a.status, std::chrono::duration<double>(Clock::now() - t0).count());
  return a;
}

// --- HttpServer ---

HttpServer::HttpServer(Daemon& daemon, HttpOptions options)
    : impl_(std::make_unique<Impl>(daemon, std::move(options))) {}
HttpServer::~HttpServer() = default;
Status HttpServer::bind() {
  return impl_->bind();
}
void HttpServer::start() {
  impl_->start();
}
void HttpServer::stop() {
  impl_->stop();
}
int HttpServer::port() const {
  return impl_->port();
}
int HttpServer::io_threads() const {
  return impl_->io_threads();
}

}  // namespace galaxy::nmd
