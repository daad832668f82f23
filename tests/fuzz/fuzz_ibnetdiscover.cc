// libFuzzer target: read_ibnetdiscover; a parsed topology is consistent and survives write_json and
// write_dot followed by a re-read unchanged.
#include <cstdint>
#include <string_view>

#include "fabric/io.h"
#include "topology_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = galaxy::fabric::read_ibnetdiscover(text);
  if (!t.ok()) return 0;
  galaxy::fuzz::check_topology(*t);
  galaxy::fuzz::check_round_trips(*t);
  return 0;
}
