#include "nmd/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "base/spec.h"
#include "nmd/api.h"
#include "nmd/daemon.h"
#include "nmd/web_assets.h"

namespace galaxy::nmd {

namespace {

constexpr const char* kHttpDuration = "galaxy_http_request_duration_seconds";

void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

void send_error(httplib::Response& res, const Error& e) {
  send_json(res, http_status(e), error_json(e));
}

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The bearer token of a request, or "" when there is none. Reads may give it as ?access_token=
// (RFC 6750 2.3): a browser's EventSource cannot set headers.
std::string bearer(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  if (h.empty() && req.method == "GET" && req.has_param("access_token"))
    return req.get_param_value("access_token");
  const std::string prefix = "Bearer ";
  if (h.compare(0, prefix.size(), prefix) != 0) return "";
  return h.substr(prefix.size());
}

Status check_token(const httplib::Request& req, const std::string& token, const char* what) {
  const std::string got = bearer(req);
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
                     to_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

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

HttpServer::HttpServer(Daemon& daemon, HttpOptions options)
    : daemon_(daemon), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::bind() {
  if (options_.token.empty())
    return make_error(Code::kInvalidArgument, 8305, "the daemon needs a write token");
  (void)daemon_.metrics().family(kHttpDuration, "HTTP request duration by route, method and code",
                                 MetricType::kHistogram,
                                 {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30});
  install();
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    if (port_ < 0) port_ = 0;
  } else if (server_->bind_to_port(options_.host.c_str(), options_.port)) {
    port_ = options_.port;
  }
  if (port_ == 0)
    return make_error(Code::kIoError, 8306,
                      fmt::format("cannot listen on {}:{} (in use, or not an address of this "
                                  "machine)",
                                  options_.host, options_.port));
  return {};
}

void HttpServer::start() {
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void HttpServer::stop() {
  stopping_ = true;
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::install() {
  httplib::Server& s = *server_;
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second daemon on
  // the same port would start silently and take half the connections.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_read_timeout(10, 0);
  s.set_write_timeout(10, 0);

  auto timed = [this](const std::string& route, const httplib::Request& req, httplib::Response& res,
                      auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (MetricFamily* f = daemon_.metrics().find(kHttpDuration))
      (void)f->observe(
          {{"route", route}, {"method", req.method}, {"code", std::to_string(res.status)}}, s);
  };

  // Reads: open, or either token when a read token is set.
  auto read_auth = [this](const httplib::Request& req) -> Status {
    if (options_.read_token.empty()) return {};
    const std::string got = bearer(req);
    if (same_secret(got, options_.read_token) || same_secret(got, options_.token)) return {};
    return check_token(req, options_.read_token, "reading");
  };
  auto read_allowed = [read_auth](const httplib::Request& req, httplib::Response& res) {
    Status st = read_auth(req);
    if (!st.ok()) send_error(res, st.error());
    return st.ok();
  };

  // Answers httplib itself gives (a body over the limit, a malformed request) carry the JSON
  // error of every other answer.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request&, httplib::Response& res) -> httplib::Server::HandlerResponse {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const Error e =
            res.status == 413
                ? Error{Code::kResourceExhausted, 8312,
                        fmt::format("the request body is larger than {} bytes",
                                    options_.max_body_bytes)}
                : Error{Code::kMalformed, 8313,
                        fmt::format("the request was refused with HTTP {}", res.status)};
        res.set_content(error_json(e).dump() + "\n", "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));

  auto api = [this, timed, read_auth](const httplib::Request& req, httplib::Response& res) {
    ApiCall call;
    call.method = req.method;
    // The raw path: a chip name may hold an encoded '/' (l1/sw00000 as l1%2Fsw00000); the
    // route's parameters are decoded after matching.
    call.path = req.target.substr(0, req.target.find('?'));
    for (const auto& [k, v] : req.params) call.query[k] = v;
    call.body = req.body;
    const std::string user = req.get_header_value("X-Galaxy-User");
    call.by = user.empty() ? "api" : user.substr(0, 64);
    const std::string what = req.method + " " + req.path;
    call.write_auth = check_token(req, options_.token, what.c_str());
    call.read_auth = read_auth(req);
    std::string route;  // filled by dispatch, read by timed after it
    timed(route, req, res, [&] {
      ApiResult r = dispatch(daemon_, call);
      route = std::move(r.route);
      send_json(res, r.status, r.body);
    });
  };

  s.Get("/api/events", [this, read_allowed](const httplib::Request& req, httplib::Response& res) {
    if (!read_allowed(req, res)) return;
    // Resume after Last-Event-ID (the browser sends it on reconnect) or ?after=; otherwise
    // only what happens from now on.
    int64_t after = 0;
    std::string resume = req.get_header_value("Last-Event-ID");
    if (resume.empty() && req.has_param("after")) resume = req.get_param_value("after");
    if (!resume.empty()) {
      auto v = parse_int("Last-Event-ID", resume, 0, INT64_MAX);
      if (!v.ok()) return send_error(res, v.error());
      after = *v;
    } else {
      after = daemon_.wait_for_event(INT64_MAX, 0);
    }
    auto last = std::make_shared<int64_t>(after);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [this, last](size_t, httplib::DataSink& sink) {
          if (stopping_) {
            sink.done();
            return true;
          }
          std::string out;
          EventQuery q{.limit = 200, .newest_first = false, .after_id = *last};
          auto events = daemon_.events().query(q);
          if (events.ok())
            for (const Event& e : *events) {
              out += sse_frame(e);
              *last = std::max(*last, e.id);
            }
          if (out.empty()) {
            daemon_.wait_for_event(*last, 1000);
            if (stopping_) {
              sink.done();
              return true;
            }
            out = ": keep-alive\n\n";
          }
          return sink.write(out.data(), out.size());
        });
  });

  // The stream and the exposition take GET only; other methods are 405 like the API's.
  auto not_allowed = [](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 405,
              error_json(Error{Code::kUnsupported, 8314,
                               fmt::format("{} is not allowed on {}", req.method, req.path)}));
  };
  for (const char* path : {"/api/events", "/metrics"}) {
    s.Post(path, not_allowed);
    s.Put(path, not_allowed);
    s.Delete(path, not_allowed);
    s.Patch(path, not_allowed);
  }
  s.Get("/metrics", [this, timed, read_allowed](const httplib::Request& req,
                                                httplib::Response& res) {
    if (!read_allowed(req, res)) return;
    timed("/metrics", req, res, [&] {
      res.set_content(daemon_.metrics().exposition(), "text/plain; version=0.0.4; charset=utf-8");
    });
  });
  s.Get("/api/.*", api);
  s.Post("/api/.*", api);
  s.Put("/api/.*", api);
  s.Delete("/api/.*", api);
  s.Patch("/api/.*", api);

  // The console: index.html at /, its files by name; the built-in copy unless --web DIR.
  s.Get("/.*", [this](const httplib::Request& req, httplib::Response& res) {
    std::string path = req.path == "/" ? "/index.html" : req.path;
    if (path.find("..") != std::string::npos)
      return send_error(res, Error{Code::kInvalidArgument, 8310,
                                   fmt::format("path = '{}' leaves the console", req.path)});
    // Only what the console is made of (as embedded): not node_modules/, e2e/ or dev/.
    const bool console_file =
        path.find('/', 1) == std::string::npos || path.rfind("/views/", 0) == 0;
    if (!options_.web_dir.empty() && console_file) {
      std::ifstream in(options_.web_dir + path, std::ios::binary);
      if (in) {
        std::stringstream ss;
        ss << in.rdbuf();
        res.set_header("Cache-Control", "no-cache");
        return res.set_content(ss.str(), content_type_of(path));
      }
    } else {
      for (const WebAsset& a : web_assets())
        if (a.path == path.substr(1)) {
          res.set_header("Cache-Control", "no-cache");
          return res.set_content(std::string(a.body), content_type_of(path));
        }
    }
    send_error(res, Error{Code::kNotFound, 8311,
                          fmt::format("no console file {} (the API is under /api)", req.path)});
  });
}

}  // namespace galaxy::nmd
