// A route table of one NRC input port (docs/system.md 1.2): for each destination node, the set of
// allowed output ports. Stored compactly because TH-2 has 5,832 NRCs x 24 input ports x 18,304
// destinations, and because the simulator reads one entry per packet per hop:
// * as runs (the first destination of each run of equal entries, and its set), while a table
//   has at most kMaxRouteRuns of them: tables loaded by range writes of a structured topology
//   (a fat tree's "everything outside this switch goes up") hold a few runs, a lookup is a
//   binary search over a few cache lines instead of a random read of a 18 KiB array;
// * else as one index per destination into a small palette of distinct port sets (a byte while
//   there are at most 256 sets, then two).
// Input ports with identical tables share one copy (copy on write, see Nrc).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "chip/port_set.h"
#include "wire/chip_id.h"

namespace galaxy::chip {

// One entry per chip id a destination may have (wire/chip_id.h).
inline constexpr uint32_t kMaxRouteDestinations = uint32_t{1} << wire::kChipIdBits;
// Above this many runs a table changes to one index per destination (and stays so).
inline constexpr size_t kMaxRouteRuns = 1024;

class RouteTable {
 public:
  PortSet get(uint32_t dest) const {
    if (dest >= size_) return {};
    if (!flat_) return run_at(dest);
    return palette_[flat_index(dest)];
  }
  // Sets `count` entries from `start`; the table grows as needed (at most kMaxRouteDestinations
  // entries).
  Status set_range(uint32_t start, uint32_t count, PortSet ports);
  // As set_range for the ports in `mask` only: each entry keeps its ports outside the mask
  // (RT_DATA written for one half of a 128-port switch, docs/registers.md).
  Status assign_range(uint32_t start, uint32_t count, PortSet ports, PortSet mask);
  uint32_t size() const { return size_; }
  // Distinct port sets, the empty set (no route) included; once the table is one index per
  // destination, its palette's, which may hold sets no entry uses any more.
  size_t palette_size() const;
  // Runs of equal entries while the table is stored as runs; 0 once it is one index per entry.
  size_t runs() const { return flat_ ? 0 : runs_.size(); }
  size_t memory_bytes() const;
  bool operator==(const RouteTable& o) const;
  // f(first, end, ports) for every stretch [first, end) of equal entries, in order, covering
  // [0, size()) (a table of one index per destination is read sequentially and coalesced).
  template <class F>
  void for_each_run(F&& f) const {
    if (!flat_) {
      for (size_t i = 0; i < runs_.size(); ++i) {
        const uint32_t end = i + 1 < runs_.size() ? runs_[i + 1].first : size_;
        if (runs_[i].first < end) f(runs_[i].first, end, runs_[i].ports);
      }
      return;
    }
    for (uint32_t first = 0; first < size_;) {
      const uint32_t at = flat_index(first);
      uint32_t end = first + 1;
      while (end < size_ && flat_index(end) == at) ++end;
      f(first, end, palette_[at]);
      first = end;
    }
  }

 private:
  struct Run {
    uint32_t first;  // runs_[i] covers [first, runs_[i + 1].first), the last one up to size_
    PortSet ports;
  };
  // The run holding `dest` (< size_), by a branch-free binary search.
  PortSet run_at(uint32_t dest) const {
    const Run* base = runs_.data();
    size_t n = runs_.size();
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half].first <= dest ? base + half : base;
      n -= half;
    }
    return base->ports;
  }
  uint32_t flat_index(uint32_t dest) const {
    return wide_ ? wide_index_[dest] : narrow_index_[dest];
  }
  void set_runs(uint32_t start, uint32_t end, PortSet ports);
  void make_flat();
  Status set_flat(uint32_t start, uint32_t count, PortSet ports);
  void fill_flat(uint32_t first, uint32_t end, uint32_t idx);
  uint32_t palette_index(PortSet ports);
  void resize_flat(uint32_t n);
  void compact();

  bool flat_ = false;
  uint32_t size_ = 0;
  std::vector<Run> runs_;                    // !flat_: sorted by first, runs_[0].first == 0
  std::vector<PortSet> palette_{PortSet{}};  // flat_: index 0 is the empty set (no route)
  std::vector<uint8_t> narrow_index_;
  std::vector<uint16_t> wide_index_;
  bool wide_ = false;
};

}  // namespace galaxy::chip
