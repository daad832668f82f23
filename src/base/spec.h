// Spec strings: "name:pos1,pos2,key=value,key=value" as used on the command line for
// fabrics (`fattree:k=24,levels=3`, `torus:8x8x8`) and loads (`alltoall:groups=8`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy {

struct Spec {
  std::string name;
  std::vector<std::string> positional;
  std::map<std::string, std::string> params;

  static Result<Spec> parse(const std::string& text);

  bool has(const std::string& key) const { return params.count(key) != 0; }
  // Typed getters: absent -> fallback; present but bad -> error naming key and value.
  Result<int64_t> get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  Result<double> get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // Error for any key not in `known` (so typos are not silently ignored).
  Status check_known(const std::vector<std::string>& known) const;
};

Result<int64_t> parse_int(const std::string& field, const std::string& text, int64_t min,
                          int64_t max);

}  // namespace galaxy
