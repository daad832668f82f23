// The CLI as a client of management daemons (`galaxy --server URL <command>`, docs/api.md): the
// command sends the daemon the API request that does what it would do on a fabric of its own,
// and prints the answer as it would print its own. --server may be repeated (one daemon per
// region): a chip-addressed request goes to the first daemon that knows the chip (a 404 moves on
// to the next); a listing asks every daemon.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace galaxy::cli {

struct RemoteOptions {
  std::vector<std::string> servers;  // base URLs: http://host:port
  std::string token;                 // --token, else $GALAXY_NMD_TOKEN
  double timeout_s = 300;            // a TH-2 scan takes seconds; a sweep longer
};
RemoteOptions& remote_options();
inline bool is_remote() {
  return !remote_options().servers.empty();
}

// "a b/c" -> "a%20b%2Fc" (a path segment or query value).
std::string url_encode(const std::string& text);

// One request to one daemon; an error answer becomes the daemon's Error (id, code, message).
Result<nlohmann::json> call_server(const std::string& server, const std::string& method,
                                   const std::string& target, const nlohmann::json* body);
// The first daemon's answer that is not "not found".
Result<nlohmann::json> call_first(const std::string& method, const std::string& target,
                                  const nlohmann::json* body = nullptr);
// Every daemon's answer, in --server order.
std::vector<std::pair<std::string, Result<nlohmann::json>>> call_all(
    const std::string& method, const std::string& target, const nlohmann::json* body = nullptr);

// Prints every daemon's answer: with --json {"servers": [{"server", "answer"} or {"server",
// "error"}]}; else `text` per answer and the errors on stderr. Exit code 2 if one failed.
void print_all(const std::vector<std::pair<std::string, Result<nlohmann::json>>>& answers,
               bool json,
               const std::function<void(const std::string&, const nlohmann::json&)>& text);

}  // namespace galaxy::cli
