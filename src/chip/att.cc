#include "chip/att.h"

#include <fmt/format.h>

namespace galaxy::chip {

Status Att::check_room(uint64_t vaddr, uint64_t length) const {
  if (length == 0)
    return make_error(Code::kInvalidArgument, 2060, "ATT: length = 0, expected at least 1 byte");
  if (vaddr + length < vaddr)
    return make_error(Code::kOutOfRange, 2061,
                      fmt::format("ATT: vaddr {:#x} + length {} wraps around", vaddr, length));
  const uint64_t pages = att_pages(vaddr, length);
  if (pages_in_use_ + pages > max_pages_)
    return make_error(Code::kResourceExhausted, 2065,
                      fmt::format("ATT full: {} pages in use, {} more asked, {} entries",
                                  pages_in_use_, pages, max_pages_));
  return {};
}

Result<uint32_t> Att::register_region(uint64_t vaddr, uint64_t length, uint32_t access,
                                      std::span<const uint64_t> frames) {
  GALAXY_TRY(check_room(vaddr, length));
  if ((access & ~(kAccessRead | kAccessWrite)) != 0)
    return make_error(Code::kInvalidArgument, 2062,
                      fmt::format("ATT: access = {:#x}, expected bits of {:#x}", access,
                                  kAccessRead | kAccessWrite));
  const uint64_t pages = att_pages(vaddr, length);
  if (frames.size() != pages)
    return make_error(Code::kInvalidArgument, 2063,
                      fmt::format("ATT: {} page frames for {} pages", frames.size(), pages));
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i] % kAttPageBytes != 0)
      return make_error(Code::kInvalidArgument, 2064,
                        fmt::format("ATT: frame {} = {:#x} is not page-aligned", i, frames[i]));
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (regions_.size() > kIndexMask)
      return make_error(
          Code::kResourceExhausted, 2066,
          fmt::format("ATT: {} regions registered, the most there can be", regions_.size()));
    index = static_cast<uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  Region& r = regions_[index];
  r.valid = true;
  r.generation = (r.generation + 1) & ((1u << (32 - kIndexBits)) - 1);
  if (r.generation == 0) r.generation = 1;  // key 0 is never valid
  r.vaddr = vaddr;
  r.length = length;
  r.access = access;
  r.frames.assign(frames.begin(), frames.end());
  ++live_regions_;
  pages_in_use_ += pages;
  return (r.generation << kIndexBits) | index;
}

Error unknown_key(uint32_t key) {
  return make_error(Code::kPermissionDenied, 2067,
                    fmt::format("ATT: key {:#x} names no registered region", key));
}

Status check_region(uint32_t key, uint64_t base, uint64_t size, uint32_t region_access,
                    uint64_t vaddr, uint64_t length, uint32_t access) {
  if (vaddr < base || vaddr + length < vaddr || vaddr + length > base + size)
    return make_error(Code::kOutOfRange, 2068,
                      fmt::format("ATT: [{:#x}, +{}) is outside region {:#x} = [{:#x}, +{})", vaddr,
                                  length, key, base, size));
  if ((region_access & access) != access)
    return make_error(Code::kPermissionDenied, 2069,
                      fmt::format("ATT: region {:#x} does not grant {} to peers", key,
                                  access == kAccessRead ? "read" : "write"));
  return {};
}

const Att::Region* Att::find(uint32_t key) const {
  const uint32_t index = key & kIndexMask;
  if (index >= regions_.size() || !regions_[index].valid ||
      regions_[index].generation != key >> kIndexBits)
    return nullptr;
  return &regions_[index];
}

Status Att::deregister(uint32_t key) {
  if (!find(key)) return unknown_key(key);
  Region& r = regions_[key & kIndexMask];
  r.valid = false;
  pages_in_use_ -= r.frames.size();
  r.frames.clear();
  r.frames.shrink_to_fit();
  free_.push_back(key & kIndexMask);
  --live_regions_;
  return {};
}

Status Att::check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const {
  const Region* found = find(key);
  if (!found) return unknown_key(key);
  return check_region(key, found->vaddr, found->length, found->access, vaddr, length, access);
}

}  // namespace galaxy::chip
