#include "chip/route_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace galaxy::chip {

namespace {

bool valid_range(uint32_t start, uint32_t count) {
  return count != 0 && start < kMaxRouteDestinations && count <= kMaxRouteDestinations - start;
}

}  // namespace

Status RouteTable::set_range(uint32_t start, uint32_t count, PortSet ports) {
  if (!valid_range(start, count))
    return make_error(Code::kOutOfRange, 2001,
                      fmt::format("route range start = {} count = {} exceeds {} destinations",
                                  start, count, kMaxRouteDestinations));
  if (flat_) return set_flat(start, count, ports);
  set_runs(start, start + count, ports);
  if (runs_.size() > kMaxRouteRuns) make_flat();
  return {};
}

Status RouteTable::assign_range(uint32_t start, uint32_t count, PortSet ports, PortSet mask) {
  if (!valid_range(start, count))
    return make_error(Code::kOutOfRange, 2003,
                      fmt::format("route range start = {} count = {} exceeds {} destinations",
                                  start, count, kMaxRouteDestinations));
  ports &= mask;
  // Piece by piece over the stretches of equal entries the range holds now, each written with
  // its own ports outside the mask kept.
  const uint32_t end = start + count;
  uint32_t d = start;
  while (d < end) {
    const PortSet old = get(d);
    uint32_t e = d + 1;
    while (e < end && e < size_ && get(e) == old) ++e;
    if (d >= size_) e = end;  // beyond the table every entry is empty
    GALAXY_TRY(set_range(d, e - d, (old & ~mask) | ports));
    d = e;
  }
  return {};
}

// Replaces the runs that start inside [start, end) by one run of `ports`, keeps what the entries
// from `end` on held (a run starting at `end`), fills a gap before `start` with unset entries,
// and merges equal neighbours around the change.
void RouteTable::set_runs(uint32_t start, uint32_t end, PortSet ports) {
  const uint32_t old_size = size_;
  const bool tail = end < old_size;
  const PortSet after = tail ? run_at(end) : PortSet{};
  auto before = [](const Run& r, uint32_t d) { return r.first < d; };
  auto lo = std::lower_bound(runs_.begin(), runs_.end(), start, before);
  auto hi = std::lower_bound(lo, runs_.end(), end, before);
  std::array<Run, 3> add{};
  size_t k = 0;
  if (start > old_size) add[k++] = {old_size, PortSet{}};
  add[k++] = {start, ports};
  if (tail && (hi == runs_.end() || hi->first != end)) add[k++] = {end, after};
  const auto at = static_cast<size_t>(lo - runs_.begin());
  runs_.insert(runs_.erase(lo, hi), add.begin(), add.begin() + static_cast<std::ptrdiff_t>(k));
  size_ = std::max(size_, end);
  // Only the inserted runs and the run after them can now equal their predecessor.
  const size_t first_check = std::max<size_t>(at, 1);
  const size_t last_check = std::min(at + k, runs_.size() - 1);
  size_t w = first_check;
  for (size_t i = first_check; i <= last_check; ++i) {
    if (runs_[i].ports == runs_[w - 1].ports) continue;
    runs_[w++] = runs_[i];
  }
  if (w <= last_check)
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(w),
                runs_.begin() + static_cast<std::ptrdiff_t>(last_check + 1));
}

void RouteTable::make_flat() {
  palette_ = {PortSet{}};
  resize_flat(size_);
  for_each_run([&](uint32_t first, uint32_t end, PortSet ports) {
    fill_flat(first, end, palette_index(ports));
  });  // still reading the runs: flat_ is set after
  flat_ = true;
  runs_.clear();
  runs_.shrink_to_fit();
}

uint32_t RouteTable::palette_index(PortSet ports) {
  for (uint32_t i = 0; i < palette_.size(); ++i)
    if (palette_[i] == ports) return i;
  palette_.push_back(ports);
  if (!wide_ && palette_.size() > 256) {
    wide_index_.assign(narrow_index_.begin(), narrow_index_.end());
    narrow_index_.clear();
    narrow_index_.shrink_to_fit();
    wide_ = true;
  }
  return static_cast<uint32_t>(palette_.size() - 1);
}

void RouteTable::resize_flat(uint32_t n) {
  if (wide_)
    wide_index_.resize(std::max<size_t>(wide_index_.size(), n), 0);
  else
    narrow_index_.resize(std::max<size_t>(narrow_index_.size(), n), 0);
  size_ = std::max(size_, n);
}

Status RouteTable::set_flat(uint32_t start, uint32_t count, PortSet ports) {
  // A palette can only run out after >65,535 distinct sets were written over time: drop the
  // sets no entry uses any more before adding another.
  if (palette_.size() >= 65536) compact();
  if (palette_.size() >= 65536)
    return make_error(Code::kResourceExhausted, 2002,
                      "route table: 65,536 distinct port sets already in use");
  uint32_t idx = palette_index(ports);
  resize_flat(start + count);
  fill_flat(start, start + count, idx);
  return {};
}

void RouteTable::fill_flat(uint32_t first, uint32_t end, uint32_t idx) {
  if (wide_)
    std::fill(wide_index_.begin() + first, wide_index_.begin() + end, static_cast<uint16_t>(idx));
  else
    std::fill(narrow_index_.begin() + first, narrow_index_.begin() + end,
              static_cast<uint8_t>(idx));
}

void RouteTable::compact() {
  std::vector<PortSet> old = std::move(palette_);
  std::vector<uint32_t> remap(old.size(), UINT32_MAX);
  palette_ = {PortSet{}};
  remap[0] = 0;
  for (uint32_t d = 0; d < size_; ++d) {
    uint32_t i = flat_index(d);
    if (remap[i] == UINT32_MAX) {
      remap[i] = static_cast<uint32_t>(palette_.size());
      palette_.push_back(old[i]);
    }
    if (wide_)
      wide_index_[d] = static_cast<uint16_t>(remap[i]);
    else
      narrow_index_[d] = static_cast<uint8_t>(remap[i]);
  }
}

size_t RouteTable::palette_size() const {
  if (flat_) return palette_.size();
  std::vector<PortSet> sets{PortSet{}};
  for (const Run& r : runs_) sets.push_back(r.ports);
  std::sort(sets.begin(), sets.end());
  return static_cast<size_t>(std::unique(sets.begin(), sets.end()) - sets.begin());
}

size_t RouteTable::memory_bytes() const {
  return sizeof(*this) + runs_.capacity() * sizeof(Run) + palette_.capacity() * sizeof(PortSet) +
         narrow_index_.capacity() + wide_index_.capacity() * sizeof(uint16_t);
}

bool RouteTable::operator==(const RouteTable& o) const {
  uint32_t n = size_ > o.size_ ? size_ : o.size_;
  for (uint32_t d = 0; d < n; ++d)
    if (get(d) != o.get(d)) return false;
  return true;
}

}  // namespace galaxy::chip
