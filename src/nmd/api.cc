#include "nmd/api.h"

#include <fmt/format.h>

#include "base/json_text.h"
#include "base/spec.h"

namespace galaxy::nmd {

const std::vector<ApiRoute>& api_routes() {
  static const std::vector<ApiRoute> routes = [] {
    std::vector<ApiRoute> r;
    add_fabric_routes(r);
    add_chip_io_routes(r);
    add_event_routes(r);
    return r;
  }();
  return routes;
}

bool match_path(const std::string& pattern, const std::string& path,
                std::map<std::string, std::string>& params) {
  size_t i = 0, j = 0;
  std::map<std::string, std::string> got;
  while (i < pattern.size() && j <= path.size()) {
    if (pattern[i] == '{') {
      size_t close = pattern.find('}', i);
      std::string name = pattern.substr(i + 1, close - i - 1);
      size_t end = path.find('/', j);
      if (end == std::string::npos) end = path.size();
      if (end == j) return false;  // empty segment
      got[name] = path.substr(j, end - j);
      i = close + 1;
      j = end;
      continue;
    }
    if (j >= path.size() || pattern[i] != path[j]) return false;
    ++i;
    ++j;
  }
  if (i != pattern.size() || j != path.size()) return false;
  params = std::move(got);
  return true;
}

namespace {

// The route of a call; `path_known` tells a wrong method from an unknown path.
const ApiRoute* find_route(const ApiCall& call, bool& path_known,
                           std::map<std::string, std::string>& params) {
  path_known = false;
  for (const ApiRoute& r : api_routes()) {
    std::map<std::string, std::string> got;
    if (!match_path(r.path, call.path, got)) continue;
    path_known = true;
    if (r.method != call.method) continue;
    params = std::move(got);
    return &r;
  }
  return nullptr;
}

ApiResult fail(const Error& e, int status = 0) {
  return {status ? status : http_status(e), error_json(e)};
}

ApiResult with_route(ApiResult r, const ApiRoute& route) {
  r.route = route.path;
  return r;
}

}  // namespace

const ApiRoute* find_api_route(const std::string& method, const std::string& raw_path) {
  ApiCall call;
  call.method = method;
  call.path = raw_path;
  bool known = false;
  std::map<std::string, std::string> params;
  return find_route(call, known, params);
}

ApiResult dispatch(Daemon& daemon, const ApiCall& call) {
  bool path_known = false;
  ApiRequest ar;
  const ApiRoute* route = find_route(call, path_known, ar.path);
  if (!route) {
    if (path_known)
      return fail(Error{Code::kUnsupported, 8307,
                        fmt::format("{} is not allowed on {}", call.method, call.path)},
                  405);
    return fail(Error{
        Code::kNotFound, 8308,
        fmt::format("no API endpoint {} {} (see /api/openapi.json)", call.method, call.path)});
  }
  const Status& auth = route->write ? call.write_auth : call.read_auth;
  if (!auth.ok()) return with_route(fail(auth.error()), *route);
  for (auto& [name, value] : ar.path) value = url_decode(value);
  ar.query = call.query;
  if (!call.body.empty()) {
    ar.body = nlohmann::json::parse(call.body, nullptr, false);
    if (ar.body.is_discarded() || !ar.body.is_object())
      return with_route(
          fail(Error{Code::kMalformed, 8309, "the request body is not a JSON object"}), *route);
  }
  ar.by = call.by;
  auto out = route->handler(daemon, ar);
  if (!out.ok()) return with_route(fail(out.error()), *route);
  return {200, std::move(*out), route->path};
}

std::string url_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

int http_status(const Error& e) {
  switch (e.code) {
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
    case Code::kMalformed:
    case Code::kCrcMismatch:
      return 400;
    case Code::kPermissionDenied:
      return 401;
    case Code::kNotFound:
      return 404;
    case Code::kUnsupported:
      return 409;
    case Code::kTimeout:
      return 502;
    case Code::kResourceExhausted:
      return 503;
    case Code::kIoError:
    case Code::kOk:
      return 500;
  }
  return 500;
}

std::string api_code_name(Code c) {
  std::string name = code_name(c);
  for (char& ch : name)
    if (ch == ' ') ch = '_';
  return name;
}

nlohmann::json error_json(const Error& e) {
  return {{"error",
           {{"id", fmt::format("E{:04}", e.id)},
            {"code", api_code_name(e.code)},
            {"message", e.message}}}};
}

nlohmann::json openapi_json() {
  nlohmann::json paths = nlohmann::json::object();
  const nlohmann::json error_ref = {{"$ref", "#/components/schemas/Error"}};
  for (const ApiRoute& r : api_routes()) {
    nlohmann::json params = nlohmann::json::array();
    nlohmann::json body_props = nlohmann::json::object();
    nlohmann::json body_required = nlohmann::json::array();
    for (const ApiParam& p : r.params) {
      if (p.in == "body") {
        body_props[p.name] = {{"description", p.doc}, {"type", p.type}};
        if (p.required) body_required.push_back(p.name);
        continue;
      }
      params.push_back({{"name", p.name},
                        {"in", p.in},
                        {"required", p.in == "path" || p.required},
                        {"description", p.doc},
                        {"schema", {{"type", p.type}}}});
    }
    nlohmann::json op{{"summary", r.summary},
                      {"operationId", fmt::format("{} {}", r.method, r.path)},
                      {"parameters", params},
                      {"responses",
                       {{"200",
                         {{"description", "JSON answer"},
                          {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}}},
                        {"default",
                         {{"description", "error"},
                          {"content", {{"application/json", {{"schema", error_ref}}}}}}}}}};
    if (!body_props.empty()) {
      nlohmann::json schema{{"type", "object"}, {"properties", body_props}};
      if (!body_required.empty()) schema["required"] = body_required;
      op["requestBody"] = {{"required", !body_required.empty()},
                           {"content", {{"application/json", {{"schema", schema}}}}}};
    }
    if (r.write) op["security"] = nlohmann::json::array({{{"bearer", nlohmann::json::array()}}});
    std::string method = r.method;
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[r.path][method] = std::move(op);
  }
  paths["/api/events"]["get"] = {
      {"summary", "Server-sent events: fault, alarm, config_change, scan_summary, log"},
      {"responses", {{"200", {{"description", "text/event-stream"}}}}}};
  paths["/metrics"]["get"] = {
      {"summary", "Prometheus text exposition 0.0.4"},
      {"responses", {{"200", {{"description", "text/plain; version=0.0.4"}}}}}};
  return {{"openapi", "3.0.3"},
          {"info",
           {{"title", "Galaxy management daemon"},
            {"version", "0.1.0"},
            {"description",
             "galaxy nmd: the in-band management server of a Galaxy fabric "
             "(docs/api.md)"}}},
          {"paths", paths},
          {"components",
           {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}},
            {"schemas",
             {{"Error",
               {{"type", "object"},
                {"properties",
                 {{"error",
                   {{"type", "object"},
                    {"properties",
                     {{"id", {{"type", "string"}}},
                      {"code", {{"type", "string"}}},
                      {"message", {{"type", "string"}}}}}}}}}}}}}}}};
}

Result<int64_t> query_int(const ApiRequest& r, const std::string& name, int64_t lo, int64_t hi,
                          int64_t fallback) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty()) return fallback;
  return parse_int(name, it->second, lo, hi);
}

Result<std::string> body_string(const ApiRequest& r, const std::string& name, bool required) {
  if (!r.body.is_object() || !r.body.contains(name)) {
    if (!required) return std::string();
    return make_error(Code::kInvalidArgument, 8300,
                      fmt::format("the body needs the field '{}'", name));
  }
  const auto& v = r.body[name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return make_error(Code::kInvalidArgument, 8301,
                    fmt::format("{} = {} must be a string or an integer", name, json_text(v)));
}

}  // namespace galaxy::nmd
