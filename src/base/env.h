// The environment variables Galaxy reads, in one table (name, type, default, range, help): every
// read goes through here, nothing else calls getenv (scripts/check-getenv), so each variable is
// validated the same way and an operator can list them all (`galaxy env`). An empty variable
// counts as unset.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace galaxy {

enum class EnvType : uint8_t { kString, kInt };

struct EnvVar {
  std::string_view name;
  EnvType type = EnvType::kString;
  std::string_view default_value;  // what applies when unset ("" = nothing)
  int64_t min = 0, max = 0;        // kInt: the accepted range
  std::string_view help;
};

std::span<const EnvVar> env_table();
const EnvVar* find_env(std::string_view name);

// The value of a variable of the table; std::nullopt when it is unset, empty, or not a
// variable of the table.
std::optional<std::string> env_string(std::string_view name);
// The same with the table's default when unset.
std::string env_string_or_default(std::string_view name);
// An integer variable: its value, std::nullopt when unset, or an error naming the variable and
// the value when it is not an integer within the table's range.
Result<std::optional<int64_t>> env_int(std::string_view name);
// The same with the table's default when unset.
Result<int64_t> env_int_or_default(std::string_view name);

// One line per variable, for --help.
std::string describe_env();

}  // namespace galaxy
