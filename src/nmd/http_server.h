// The daemon's HTTP side (docs/api.md): the API route table, /api/events (server-sent events),
// /metrics and /api/metrics, /api/openapi.json and the web console's files. Write requests need
// the bearer token; reads are open unless a read token is set. Every request is timed into
// galaxy_http_request_duration_seconds{route,method,code}.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace httplib {
class Server;
}

namespace galaxy::nmd {

class Daemon;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (tests)
  std::string token;       // write token (required)
  std::string read_token;  // "" = reads open
  std::string web_dir;     // serve the console from here instead of the built-in copy
  size_t max_body_bytes = 1 << 20;
  int threads = 16;  // server-sent event streams hold one each
};

// "127.0.0.1:8080", "[::1]:8080", ":8080" (all interfaces) -> host, port.
Status parse_listen(const std::string& text, std::string& host, int& port);
// 32 random hex digits from the system's entropy source.
std::string random_token();

class HttpServer {
 public:
  HttpServer(Daemon& daemon, HttpOptions options);
  ~HttpServer();

  // Binds; the port is known after (port()). Then serve() in a thread of its own.
  Status bind();
  void start();
  void stop();
  int port() const { return port_; }

 private:
  void install();
  Daemon& daemon_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace galaxy::nmd
