// JSON text for every JSON Galaxy writes (CLI --json, the daemon's answers, events, files).
// Strings in it may carry bytes from input users give: node descriptions in Latin-1, a gzipped
// or binary file quoted in an error. JSON text is UTF-8, so bytes that are not UTF-8 are written
// as U+FFFD instead of failing (nlohmann's default throws type_error 316, which would abort a
// command whose only fault is reporting bad input).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace galaxy {

// indent -1: one line; n >= 0: pretty-printed with n spaces.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace galaxy
