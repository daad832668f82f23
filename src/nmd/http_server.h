// The daemon's HTTP side (docs/api.md): the API route table, /api/events (server-sent events),
// /metrics and /api/metrics, /api/openapi.json and the web console's files. Write requests need
// the bearer token; reads are open unless a read token is set. Every request is timed into
// galaxy_http_request_duration_seconds{route,method,code}.
//
// A few I/O threads (lanes, one per core by default) own the sockets (Boost.Beast over Asio):
// each accepted connection stays on one lane, whose thread reads its requests, writes its answers
// and feeds its event stream, so an open stream, an idle kept-alive connection or a client that
// sends a byte a second costs a socket and a little memory, never a thread. Reads of the
// daemon's snapshots are answered on the lane; only other complete requests reach the worker
// threads, which run the API (a scan may take seconds there without stopping anything else). Limits
// (HttpOptions) bound connections, streams, header and body sizes under every transfer encoding,
// and the time a request may take to arrive.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace galaxy::nmd {

class Daemon;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (tests)
  std::string token;                     // write token (required)
  std::string read_token;                // "" = reads open
  std::string web_dir;                   // serve the console from here instead of the built-in copy
  size_t max_body_bytes = 1 << 20;       // Content-Length or chunked alike: beyond, 413
  size_t max_header_bytes = 16 << 10;    // request line and headers: beyond, 431
  int threads = 16;                      // workers running API requests (not connections)
  int io_threads = 0;                    // lanes owning the sockets; 0: one per core, at most 4
  size_t max_connections = 4096;         // open sockets, streams included: beyond, 503 and close
  size_t max_streams = 1024;             // open /api/events streams: beyond, 503
  int request_timeout_ms = 10'000;       // a started request must arrive whole within this
  int idle_timeout_ms = 60'000;          // a kept-alive connection with no request is closed
  int write_timeout_ms = 30'000;         // an answer or stream data the client does not take
  int keepalive_ms = 15'000;             // a quiet event stream gets a comment line this often
  size_t stream_buffer_bytes = 8 << 20;  // frames a slow stream reader may owe; beyond, closed
  int backlog = 4096;                    // listen(2) backlog (the kernel caps it at somaxconn)
};

// "127.0.0.1:8080", "[::1]:8080", ":8080" (all interfaces) -> host, port.
Status parse_listen(const std::string& text, std::string& host, int& port);
// 32 random hex digits from the system's entropy source.
std::string random_token();

class HttpServer {
 public:
  HttpServer(Daemon& daemon, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; the port is known after (port()). Then start() serves in threads of
  // its own until stop().
  Status bind();
  void start();
  void stop();
  int port() const;
  int io_threads() const;  // the lanes serving connections (HttpOptions::io_threads resolved)

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace galaxy::nmd
