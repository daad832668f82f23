#include "wire/chip_id.h"

#include <fmt/format.h>

namespace galaxy::wire {

std::optional<std::string> chip_id_refusal(
    std::string_view format, std::initializer_list<std::pair<std::string_view, ChipId>> ids) {
  for (const auto& [name, id] : ids)
    if (id > kChipIdMask)
      return fmt::format("{}: {} = {:#x} exceeds the {}-bit chip id", format, name, id,
                         kChipIdBits);
  return std::nullopt;
}

}  // namespace galaxy::wire
