// libFuzzer target: read_map (a map file given to --map); a map read is consistent (every chip
// id once, routes rebuilt for every node) and survives write_map and a re-read unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nm/map_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = galaxy::nm::read_map(text);
  if (!m.ok()) return 0;
  const uint32_t n = m->num_nodes();
  if (m->chip_id.size() != n || m->target.size() != n || m->hops.size() != n ||
      m->node_of.size() != n || m->server_node >= n)
    std::abort();
  const std::string again = galaxy::nm::write_map(*m);
  auto back = galaxy::nm::read_map(again);
  if (!back.ok() || galaxy::nm::write_map(*back) != again || back->hops != m->hops) std::abort();
  return 0;
}
