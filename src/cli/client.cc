#include "cli/client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cstdio>
#include <cstdlib>

#include "base/env.h"
#include "base/json_text.h"
#include "cli/commands.h"
#include "nmd/api.h"

namespace galaxy::cli {

RemoteOptions& remote_options() {
  static RemoteOptions o;
  return o;
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

namespace {

Code code_from_name(const std::string& name) {
  for (uint8_t c = 0; c <= static_cast<uint8_t>(Code::kResourceExhausted); ++c)
    if (name == nmd::api_code_name(static_cast<Code>(c))) return static_cast<Code>(c);
  return Code::kIoError;
}

}  // namespace

Result<nlohmann::json> call_server(const std::string& given, const std::string& method,
                                   const std::string& target, const nlohmann::json* body) {
  // The URL as users paste it (the daemon's ready file writes one with a trailing '/').
  std::string server = given;
  while (server.size() > 1 && server.back() == '/') server.pop_back();
  httplib::Client cli(server);
  if (!cli.is_valid())
    return make_error(Code::kInvalidArgument, 9502,
                      fmt::format("--server = '{}' is not an http://host:port URL", server));
  const auto seconds = static_cast<time_t>(remote_options().timeout_s);
  cli.set_read_timeout(seconds, 0);
  cli.set_write_timeout(seconds, 0);
  cli.set_connection_timeout(5, 0);
  cli.set_tcp_nodelay(true);  // head and body go in two writes: do not wait for an ACK between
  httplib::Headers headers;
  std::string token = remote_options().token;
  if (token.empty())
    if (auto env = env_string("GALAXY_NMD_TOKEN")) token = *env;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  const std::string payload = body ? body->dump() : "";
  httplib::Result res = method == "GET"   ? cli.Get(target, headers)
                        : method == "PUT" ? cli.Put(target, headers, payload, "application/json")
                                          : cli.Post(target, headers, payload, "application/json");
  if (!res)
    return make_error(Code::kIoError, 9503,
                      fmt::format("{}{}: {} (is `galaxy nmd` listening there?)", server, target,
                                  httplib::to_string(res.error())));
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded())
    return make_error(
        Code::kMalformed, 9504,
        fmt::format("{}{}: HTTP {} with a body that is not JSON", server, target, res->status));
  if (res->status >= 400 || (j.is_object() && j.contains("error"))) {
    const auto& e = j.value("error", nlohmann::json::object());
    std::string id = e.value("id", std::string("E9505"));
    int num = std::atoi(id.c_str() + (id.empty() ? 0 : 1));
    return Error{
        code_from_name(e.value("code", std::string())), static_cast<uint16_t>(num),
        fmt::format("{} (from {})", e.value("message", std::string("HTTP error")), server)};
  }
  return j;
}

Result<nlohmann::json> call_first(const std::string& method, const std::string& target,
                                  const nlohmann::json* body) {
  Result<nlohmann::json> last = make_error(Code::kInvalidArgument, 9506, "no --server given");
  for (const std::string& s : remote_options().servers) {
    last = call_server(s, method, target, body);
    if (last.ok() || last.error().code != Code::kNotFound) return last;
  }
  return last;
}

std::vector<std::pair<std::string, Result<nlohmann::json>>> call_all(const std::string& method,
                                                                     const std::string& target,
                                                                     const nlohmann::json* body) {
  std::vector<std::pair<std::string, Result<nlohmann::json>>> out;
  for (const std::string& s : remote_options().servers)
    out.emplace_back(s, call_server(s, method, target, body));
  return out;
}

void print_all(const std::vector<std::pair<std::string, Result<nlohmann::json>>>& answers,
               bool json,
               const std::function<void(const std::string&, const nlohmann::json&)>& text) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& [server, answer] : answers) {
    if (answer.ok()) {
      all.push_back({{"server", server}, {"answer", *answer}});
      if (!json) text(server, *answer);
      continue;
    }
    const Error& e = answer.error();
    all.push_back({{"server", server},
                   {"error",
                    {{"id", fmt::format("E{:04}", e.id)},
                     {"code", code_name(e.code)},
                     {"message", e.message}}}});
    if (!json) std::fprintf(stderr, "galaxy: %s\n", e.to_string().c_str());
    set_exit_code(2);
  }
  if (json) std::printf("%s\n", json_text(nlohmann::json{{"servers", all}}, 2).c_str());
}

}  // namespace galaxy::cli
