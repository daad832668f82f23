#include "chip/route_table.h"

#include <fmt/format.h>

namespace galaxy::chip {

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

void RouteTable::resize(uint32_t n) {
  if (n <= size_) return;
  if (wide_)
    wide_index_.resize(n, 0);
  else
    narrow_index_.resize(n, 0);
  size_ = n;
}

Status RouteTable::set_range(uint32_t start, uint32_t count, PortSet ports) {
  if (count == 0 || start >= kMaxRouteDestinations || count > kMaxRouteDestinations - start)
    return make_error(Code::kOutOfRange, 2001,
                      fmt::format("route range start = {} count = {} exceeds {} destinations",
                                  start, count, kMaxRouteDestinations));
  // A palette can only run out after >65,535 distinct sets were written over time: drop the
  // sets no entry uses any more before adding another.
  if (palette_.size() >= 65536) compact();
  if (palette_.size() >= 65536)
    return make_error(Code::kResourceExhausted, 2002,
                      "route table: 65,536 distinct port sets already in use");
  uint32_t idx = palette_index(ports);
  resize(start + count);
  for (uint32_t d = start; d < start + count; ++d) {
    if (wide_)
      wide_index_[d] = static_cast<uint16_t>(idx);
    else
      narrow_index_[d] = static_cast<uint8_t>(idx);
  }
  return {};
}

void RouteTable::compact() {
  std::vector<PortSet> old = std::move(palette_);
  std::vector<uint32_t> remap(old.size(), UINT32_MAX);
  palette_ = {0};
  remap[0] = 0;
  for (uint32_t d = 0; d < size_; ++d) {
    uint32_t i = wide_ ? wide_index_[d] : narrow_index_[d];
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

size_t RouteTable::memory_bytes() const {
  return sizeof(*this) + palette_.capacity() * sizeof(PortSet) + narrow_index_.capacity() +
         wide_index_.capacity() * sizeof(uint16_t);
}

bool RouteTable::operator==(const RouteTable& o) const {
  uint32_t n = size_ > o.size_ ? size_ : o.size_;
  for (uint32_t d = 0; d < n; ++d)
    if (get(d) != o.get(d)) return false;
  return true;
}

}  // namespace galaxy::chip
