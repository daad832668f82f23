// The REST API's route table (docs/api.md): every endpoint is one ApiRoute — method, path
// pattern, summary, documented parameters, whether it writes (token), handler — so the HTTP
// server dispatches from it and /api/openapi.json is generated from it; nothing is listed twice.
// Handlers return JSON or an Error; the server turns an Error into its HTTP status and the JSON
// error body. The handlers are transport-free: tests and the CLI's --server client see the same
// answers.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy::nmd {

class Daemon;

struct ApiRequest {
  std::map<std::string, std::string> path;   // {chip} -> "18304"
  std::map<std::string, std::string> query;  // last value of each query parameter
  nlohmann::json body;                       // null when the request had none
  std::string by = "api";                    // who writes (for the event log)
};

struct ApiParam {
  std::string name;
  std::string in;  // "path", "query" or "body"
  std::string type;
  std::string doc;
  bool required = false;
};

using ApiHandler = std::function<Result<nlohmann::json>(Daemon&, const ApiRequest&)>;

// What answering a route reads. The HTTP server answers kSnapshots routes on its I/O thread
// (they never wait for the session, which a scan may hold for seconds) and caches their answers
// by the generations of what they read (ApiRoute::cached_by) while those stay the same.
enum class ApiReads : uint8_t {
  kSession,    // management requests to the fabric, or the session's state
  kSnapshots,  // the published view, counters, configuration, event store and metrics only
};
// ApiRoute::cached_by bits: the answer depends on the request and on these alone.
inline constexpr uint8_t kCachedByView = 1;    // Daemon::view_generation()
inline constexpr uint8_t kCachedByEvents = 2;  // EventStore::generation()

struct ApiRoute {
  std::string method;  // GET, POST, PUT
  std::string path;    // "/api/chips/{chip}/registers/{addr}"
  std::string summary;
  std::vector<ApiParam> params;
  bool write = false;  // needs the token
  ApiHandler handler;
  ApiReads reads = ApiReads::kSession;
  uint8_t cached_by = 0;  // 0: never cached
};

// The whole table, built once by the api_*.cc files' add functions.
const std::vector<ApiRoute>& api_routes();
void add_fabric_routes(std::vector<ApiRoute>& routes);   // status, topology, chips, traffic
void add_chip_io_routes(std::vector<ApiRoute>& routes);  // registers, EEPROM, status, routes
void add_event_routes(std::vector<ApiRoute>& routes);    // faults, log, config, scans, inject

// One request as the HTTP server received it, and the answer: the transport-free dispatch that
// the server, the tests and the fuzz target (tests/fuzz/fuzz_api_request.cc) share.
struct ApiCall {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;
  std::string body;        // raw bytes; must be empty or a JSON object
  std::string by = "api";  // who writes
  Status write_auth;       // the token check for writes (ok = allowed)
  Status read_auth;        // for reads
};
struct ApiResult {
  int status = 200;
  nlohmann::json body;
  std::string route = "unknown";  // the matched route pattern (a bounded metric label)
};
// Finds the route (404 unknown path, 405 known path with another method), checks the token,
// decodes the body, runs the handler; errors become their HTTP status and JSON error.
ApiResult dispatch(Daemon& daemon, const ApiCall& call);

// The route of a method and raw path (null when none matches).
const ApiRoute* find_api_route(const std::string& method, const std::string& raw_path);

// Matches a concrete path against a route pattern, filling the {name} parameters.
bool match_path(const std::string& pattern, const std::string& path,
                std::map<std::string, std::string>& params);

// %XX decoded (a path parameter as the client encoded it).
std::string url_decode(const std::string& text);

// HTTP status for an error: 400 bad input, 401, 404, 409, 502 (the fabric did not answer).
int http_status(const Error& e);
nlohmann::json error_json(const Error& e);
// code_name with '_' for ' ' ("not_found"), the API's spelling.
std::string api_code_name(Code c);

// OpenAPI 3.0 document of the table.
nlohmann::json openapi_json();

// Helpers for handlers: a query parameter parsed as an integer in [lo, hi] (default when absent).
Result<int64_t> query_int(const ApiRequest& r, const std::string& name, int64_t lo, int64_t hi,
                          int64_t fallback);
Result<std::string> body_string(const ApiRequest& r, const std::string& name, bool required);

}  // namespace galaxy::nmd
