#include "engine/live/nic_host.h"

#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

#include "engine/live/daemon.h"

namespace galaxy::live {

bool read_att_entry(const NicSlot& nic, uint64_t index, AttEntry* out) {
  if (index >= kAttEntries) return false;
  const AttEntry& e = nic.att[index];
  const uint32_t gen = e.generation;
  if (e.state.load(std::memory_order_acquire) != 2) return false;
  out->key = e.key;
  out->base = e.base;
  out->length = e.length;
  out->pid = e.pid;
  out->memfd = e.memfd;
  out->memfd_base = e.memfd_base;
  out->access = e.access;
  out->generation = e.generation;
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.state.load(std::memory_order_relaxed) == 2 && e.generation == gen &&
         out->generation == gen;
}

Status lookup_att(const NicSlot& nic, uint32_t key, uint64_t vaddr, uint64_t length,
                  uint32_t access, AttEntry* e) {
  if (!read_att_entry(nic, key >> kWireKeyBits, e) ||
      (e->key & kWireKeyMask) != (key & kWireKeyMask))
    return chip::unknown_key(key);
  return check_att_entry(*e, key, vaddr, length, access);
}

Status check_att_entry(const AttEntry& e, uint32_t key, uint64_t vaddr, uint64_t length,
                       uint32_t access) {
  if (e.base + e.length > kPhysAddressMask)
    return make_error(
        Code::kOutOfRange, 4758,
        fmt::format("ATT: region {:#x} at {:#x} lies above the NIC's reach", key, e.base));
  return chip::check_region(key, e.base, e.length, e.access, vaddr, length, access);
}

const char* att_refusal(uint16_t error_id, bool write) {
  switch (error_id) {
    case 2067:
      return "wrong memory key";
    case 2068:
      return "outside the registered range";
    case 2069:
      return write ? "memory not registered for write" : "memory not registered for read";
    default:
      return "refused by the ATT";
  }
}

Status SegmentAtt::check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const {
  if (known_ && key == last_key_) return check_att_entry(*known_, key, vaddr, length, access);
  known_ = nullptr;
  has_last_ = false;
  GALAXY_TRY(lookup_att(nic_, key, vaddr, length, access, &last_));
  last_key_ = key;
  has_last_ = true;
  return {};
}

Status SegmentAtt::translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                                    const PieceFn& fn) const {
  GALAXY_TRY(check(key, vaddr, length, access));
  // The process's pages are one range to cross-memory attach: one piece.
  return fn((uint64_t{key >> kWireKeyBits} << kPhysEntryShift) | vaddr, 0, length);
}

Status memory_access_status(OpStatus st, int32_t pid, uint64_t vaddr, uint64_t length) {
  switch (st) {
    case OpStatus::kSuccess:
      return {};
    case OpStatus::kPeerDead:
      return make_error(Code::kNotFound, kErrMemoryOwnerGone,
                        fmt::format("process {} that registered {:#x} is gone", pid, vaddr));
    default:
      break;
  }
  return make_error(Code::kPermissionDenied, kErrMemoryUnmapped,
                    fmt::format("[{:#x}, +{}) of process {} is not mapped", vaddr, length, pid));
}

Error deregistered_error(uint64_t phys) {
  return make_error(
      Code::kPermissionDenied, kErrMemoryDeregistered,
      fmt::format("memory at {:#x} was deregistered during the access", phys & kPhysAddressMask));
}

Status SegmentHostMemory::io(int32_t pid, uint64_t vaddr, uint8_t* local, uint64_t length,
                             bool write) {
  if (pid == own_pid_) {  // a process's NIC part in its own memory (glex/direct_rdma.h)
    void* mine = reinterpret_cast<void*>(vaddr);
    std::memcpy(write ? mine : local, write ? local : mine, length);
    return {};
  }
  return memory_access_status(copy_with(pid, write, local, vaddr, length), pid, vaddr, length);
}

Status SegmentHostMemory::read(uint64_t phys, std::span<uint8_t> out) {
  if (cached_ != 0 && phys >= cache_phys_ && phys - cache_phys_ <= cached_ &&
      out.size() <= cached_ - (phys - cache_phys_)) {
    std::memcpy(out.data(), cache_.data() + (phys - cache_phys_), out.size());
    return {};
  }
  GALAXY_TRY(flush());  // the NIC reads what it wrote
  AttEntry e{};
  const uint32_t index = static_cast<uint32_t>(phys >> kPhysEntryShift);
  if (!read_att_entry(nic_, index, &e)) return deregistered_error(phys);
  const uint64_t vaddr = phys & kPhysAddressMask;
  if (e.pid == own_pid_) return io(e.pid, vaddr, out.data(), out.size(), false);
  if (const uint8_t* at = maps_.at(index, e, vaddr, out.size(), now_ns_)) {
    std::memcpy(out.data(), at, out.size());
    return {};
  }
  if (out.size() < kReadAhead) {
    // Beyond the registration the read may stop short (an unmapped page): what came is kept,
    // and only ranges the ATT passed are ever served from it.
    cache_.resize(kReadAhead);
    iovec l{cache_.data(), kReadAhead};
    iovec r{reinterpret_cast<void*>(vaddr), kReadAhead};
    const ssize_t n = process_vm_readv(e.pid, &l, 1, &r, 1, 0);
    if (n >= static_cast<ssize_t>(out.size())) {
      cache_phys_ = phys;
      cached_ = static_cast<size_t>(n);
      std::memcpy(out.data(), cache_.data(), out.size());
      return {};
    }
    cached_ = 0;
  }
  return io(e.pid, vaddr, out.data(), out.size(), false);
}

Status SegmentHostMemory::write(uint64_t phys, std::span<const uint8_t> in) {
  if (cached_ != 0 && phys < cache_phys_ + cached_ && cache_phys_ < phys + in.size())
    cached_ = 0;  // the read-ahead no longer holds what memory holds
  if (!posted_.empty() && phys == posted_phys_ + posted_.size() &&
      posted_.size() + in.size() <= kMaxPosted) {
    posted_.insert(posted_.end(), in.begin(), in.end());
    return {};
  }
  GALAXY_TRY(flush());
  AttEntry e{};
  const uint32_t index = static_cast<uint32_t>(phys >> kPhysEntryShift);
  if (!read_att_entry(nic_, index, &e)) return deregistered_error(phys);
  const uint64_t vaddr = phys & kPhysAddressMask;
  if (e.pid == own_pid_) return io(e.pid, vaddr, const_cast<uint8_t*>(in.data()), in.size(), true);
  if (uint8_t* at = maps_.at(index, e, vaddr, in.size(), now_ns_)) {
    std::memcpy(at, in.data(), in.size());
    return {};
  }
  posted_.assign(in.begin(), in.end());
  posted_phys_ = phys;
  posted_pid_ = e.pid;
  return {};
}

void SegmentHostMemory::drop_stale() {
  maps_.drop_if([&](uint32_t index, int32_t pid, uint32_t generation) {
    AttEntry e{};
    return !read_att_entry(nic_, index, &e) || e.pid != pid || e.generation != generation;
  });
}

Status SegmentHostMemory::flush() {
  if (posted_.empty()) return {};
  Status st =
      io(posted_pid_, posted_phys_ & kPhysAddressMask, posted_.data(), posted_.size(), true);
  posted_.clear();
  return st;
}

}  // namespace galaxy::live
