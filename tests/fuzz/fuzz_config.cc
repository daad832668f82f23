// libFuzzer target: the configuration file parser (galaxy config apply FILE).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nm/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = galaxy::nm::parse_config(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r.ok()) {
    for (size_t i = 0; i < r->size(); ++i)
      if ((*r)[i].index != i || (*r)[i].addr >= 0x8000) std::abort();
  } else if (r.error().message.empty()) {
    std::abort();
  }
  return 0;
}
