#include "base/spec.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace galaxy {

Result<Spec> Spec::parse(const std::string& text) {
  Spec s;
  auto colon = text.find(':');
  s.name = text.substr(0, colon);
  if (s.name.empty())
    return make_error(Code::kInvalidArgument, 1, fmt::format("spec '{}' has no name", text));
  if (colon == std::string::npos) return s;
  std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      auto eq = item.find('=');
      if (eq == std::string::npos) {
        s.positional.push_back(item);
      } else {
        std::string key = item.substr(0, eq);
        if (key.empty())
          return make_error(Code::kInvalidArgument, 2,
                            fmt::format("spec '{}': empty key in '{}'", text, item));
        if (s.params.count(key))
          return make_error(Code::kInvalidArgument, 3,
                            fmt::format("spec '{}': key '{}' given twice", text, key));
        s.params[key] = item.substr(eq + 1);
      }
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return s;
}

Result<int64_t> parse_int(const std::string& field, const std::string& text, int64_t min,
                          int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return make_error(Code::kInvalidArgument, 4,
                      fmt::format("{} = '{}' is not an integer", field, text));
  if (v < min || v > max)
    return make_error(Code::kOutOfRange, 5,
                      fmt::format("{} = {} is outside [{}, {}]", field, v, min, max));
  return v;
}

Result<int64_t> Spec::get_int(const std::string& key, int64_t fallback, int64_t min,
                              int64_t max) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  return parse_int(key, it->second, min, max);
}

Result<double> Spec::get_double(const std::string& key, double fallback) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || end != it->second.c_str() + it->second.size())
    return make_error(Code::kInvalidArgument, 6,
                      fmt::format("{} = '{}' is not a number", key, it->second));
  return v;
}

std::string Spec::get_string(const std::string& key, const std::string& fallback) const {
  auto it = params.find(key);
  return it == params.end() ? fallback : it->second;
}

Status Spec::check_known(const std::vector<std::string>& known) const {
  for (const auto& [k, v] : params) {
    bool found = false;
    for (const auto& n : known) found = found || n == k;
    if (!found) {
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      return make_error(Code::kInvalidArgument, 7,
                        fmt::format("{}: unknown parameter '{}' (known: {})", name, k,
                                    list.empty() ? "none" : list));
    }
  }
  return {};
}

}  // namespace galaxy
