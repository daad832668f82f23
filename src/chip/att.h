// The address translation table (docs/system.md 1.1): registration pins a region's pages and writes
// their physical page addresses, in virtual order, into the NIC's table; the NIC nearest the
// memory translates every access, checking the key, the bounds and the access rights. There
// are no translation misses: an address outside every registration is refused, never fetched.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "base/function_ref.h"
#include "base/status.h"

namespace galaxy::chip {

inline constexpr uint64_t kAttPageBytes = 4096;
// TH-1A: 256 MB of ATT DRAM, 32 M page entries (docs/system.md 1.1).
inline constexpr uint64_t kAttMaxPages = 32u << 20;
// Access rights a region grants to peers (the owner's own descriptors need only the key).
inline constexpr uint32_t kAccessNone = 0;
inline constexpr uint32_t kAccessRead = 0x1;   // peers may RDMA-get from it
inline constexpr uint32_t kAccessWrite = 0x2;  // peers may RDMA-put into it and write events

// Pages spanned by [vaddr, vaddr + length).
constexpr uint64_t att_pages(uint64_t vaddr, uint64_t length) {
  if (length == 0) return 1;
  return (vaddr + length - 1) / kAttPageBytes - vaddr / kAttPageBytes + 1;
}

// The rule every ATT applies to an access (one home for both engines): [vaddr, vaddr + length)
// must lie inside the region [base, base + size) and the region must grant `access`.
// `key` only names the region in the error.
Status check_region(uint32_t key, uint64_t base, uint64_t size, uint32_t region_access,
                    uint64_t vaddr, uint64_t length, uint32_t access);
// The error a key that names no valid region gets.
Error unknown_key(uint32_t key);

// What a NIC translates through: the table below (the simulator, whose registrations the NIC
// holds), or an engine's own table laid out where its processes write registrations (the live
// engine's shared segment). Both check with check_region.
class AttTable {
 public:
  virtual ~AttTable() = default;
  virtual Status check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const = 0;
  // Checks, then calls fn(phys, offset, bytes) for each physically contiguous piece in order.
  using PieceFn = FunctionRef<Status(uint64_t phys, uint64_t offset, uint64_t bytes)>;
  virtual Status translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                                  const PieceFn& fn) const = 0;
};

class Att final : public AttTable {
 public:
  explicit Att(uint64_t max_pages = kAttMaxPages) : max_pages_(max_pages) {}

  // Registers [vaddr, vaddr + length) with the physical frames of its pages in virtual order
  // (frames.size() == att_pages(vaddr, length), each page-aligned). Returns the key: the
  // region's index in its low 20 bits and a generation above, so a key of a region since
  // deregistered is refused, never taken for its successor.
  Result<uint32_t> register_region(uint64_t vaddr, uint64_t length, uint32_t access,
                                   std::span<const uint64_t> frames);
  // Whether a region of `length` bytes at `vaddr` would fit now (its length, its range, the
  // table's room): asked before the region's pages are pinned, and by register_region.
  Status check_room(uint64_t vaddr, uint64_t length) const;
  Status deregister(uint32_t key);

  // Refuses unless [vaddr, vaddr + length) lies in the region of `key` and it grants `access`.
  Status check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const override;
  Status translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                          const PieceFn& fn) const override {
    return translate(key, vaddr, length, access, fn);
  }
  // Translates a checked range into physically contiguous pieces, in order: fn(phys, offset,
  // bytes) with `offset` the piece's place in the range; fn returns Status and stops the walk.
  template <class F>
  Status translate(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access, F&& fn) const {
    GALAXY_TRY(check(key, vaddr, length, access));
    const Region& r = regions_[key & kIndexMask];
    uint64_t done = 0;
    while (done < length) {
      const uint64_t va = vaddr + done;
      const uint64_t page = va / kAttPageBytes - r.vaddr / kAttPageBytes;
      const uint64_t in_page = va % kAttPageBytes;
      const uint64_t n = std::min(length - done, kAttPageBytes - in_page);
      GALAXY_TRY(fn(r.frames[page] + in_page, done, n));
      done += n;
    }
    return {};
  }

  size_t regions() const { return live_regions_; }
  uint64_t pages() const { return pages_in_use_; }

  // A key's region index (its low bits; the generation is above them).
  static constexpr uint32_t kIndexBits = 20;
  static constexpr uint32_t kIndexMask = (1u << kIndexBits) - 1;

 private:
  struct Region {
    bool valid = false;
    uint32_t generation = 0;
    uint64_t vaddr = 0;
    uint64_t length = 0;
    uint32_t access = 0;
    std::vector<uint64_t> frames;  // physical page addresses in virtual order
  };
  const Region* find(uint32_t key) const;
  uint64_t max_pages_;
  std::vector<Region> regions_;
  std::vector<uint32_t> free_;
  size_t live_regions_ = 0;
  uint64_t pages_in_use_ = 0;
};

}  // namespace galaxy::chip
