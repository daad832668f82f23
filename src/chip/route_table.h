// A route table of one NRC input port (SYSTEM.md 1.2): for each destination node, the set of
// allowed output ports. Stored compactly because TH-2 has 5,832 NRCs x 24 input ports x 18,304
// destinations: entries are indices into a small palette of distinct port sets, and input
// ports with identical tables share one copy (copy on write, see Nrc).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace galaxy::chip {

using PortSet = uint32_t;  // bit p = output port p allowed

class RouteTable {
 public:
  PortSet get(uint32_t dest) const {
    if (dest >= size_) return 0;
    return palette_[wide_ ? wide_index_[dest] : narrow_index_[dest]];
  }
  // Sets `count` entries from `start`; the table grows as needed (at most 65,536 entries).
  Status set_range(uint32_t start, uint32_t count, PortSet ports);
  uint32_t size() const { return size_; }
  size_t palette_size() const { return palette_.size(); }
  size_t memory_bytes() const;
  bool operator==(const RouteTable& o) const;

 private:
  uint32_t palette_index(PortSet ports);
  void resize(uint32_t n);
  void compact();

  std::vector<PortSet> palette_{0};  // index 0: the empty set (no route)
  std::vector<uint8_t> narrow_index_;
  std::vector<uint16_t> wide_index_;
  bool wide_ = false;
  uint32_t size_ = 0;
};

inline constexpr uint32_t kMaxRouteDestinations = 65536;

}  // namespace galaxy::chip
