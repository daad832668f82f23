#include "engine/live/shared_maps.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace galaxy::live {

SharedMaps::~SharedMaps() {
  for (auto& [key, m] : maps_) munmap(m.base, m.length);
}

uint8_t* SharedMaps::inside(const Mapping& m, const AttEntry& e, uint64_t vaddr, uint64_t length) {
  // The same registration index and generation on another NIC of the host is another memfd.
  if (m.memfd != e.memfd || m.memfd_base != e.memfd_base || vaddr < m.memfd_base) return nullptr;
  const uint64_t offset = vaddr - m.memfd_base;
  if (offset > m.length || length > m.length - offset) return nullptr;
  return m.base + offset;
}

bool SharedMaps::owner_alive(int32_t pid, uint64_t vaddr, uint64_t now_ns) {
  if (pid == last_alive_pid_ && now_ns - last_alive_check_ns_ < kOwnerCheckNs) return true;
  // A byte of its memory read across: false for a process that is gone and for one that has
  // died but is not yet reaped (it has no memory left), as for every other access.
  uint8_t byte;
  iovec l{&byte, 1};
  iovec r{reinterpret_cast<void*>(vaddr), 1};
  if (process_vm_readv(pid, &l, 1, &r, 1, 0) != 1) return false;
  last_alive_check_ns_ = now_ns;
  last_alive_pid_ = pid;
  return true;
}

uint8_t* SharedMaps::at(uint32_t index, const AttEntry& e, uint64_t vaddr, uint64_t length,
                        uint64_t now_ns) {
  if (e.memfd < 0 || !owner_alive(e.pid, e.base, now_ns)) return nullptr;
  const Key key{e.pid, index, e.generation};
  if (last_ != maps_.end() && last_->first == key)
    if (uint8_t* p = inside(last_->second, e, vaddr, length)) return p;
  auto it = maps_.find(key);
  if (it != maps_.end() && (it->second.memfd != e.memfd || it->second.memfd_base != e.memfd_base)) {
    munmap(it->second.base, it->second.length);
    if (last_ == it) last_ = maps_.end();
    maps_.erase(it);
    it = maps_.end();
  }
  if (it == maps_.end()) {
    // Only a memfd is mapped: the entry is the owner's to write, and its number could name any
    // file the owner holds open, which this process may reach with more rights than the owner.
    const std::string path = fmt::format("/proc/{}/fd/{}", e.pid, e.memfd);
    char target[64];
    const ssize_t n = readlink(path.c_str(), target, sizeof target);
    constexpr std::string_view kMemfd = "/memfd:";
    if (n < static_cast<ssize_t>(kMemfd.size()) ||
        std::string_view(target, kMemfd.size()) != kMemfd)
      return nullptr;
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return nullptr;
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && fcntl(fd, F_GET_SEALS) >= 0)
      p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return nullptr;
    it = maps_
             .emplace(key, Mapping{e.memfd, e.memfd_base, static_cast<uint8_t*>(p),
                                   static_cast<uint64_t>(st.st_size)})
             .first;
  }
  last_ = it;
  return inside(it->second, e, vaddr, length);
}

void SharedMaps::drop_if(FunctionRef<bool(uint32_t index, int32_t pid, uint32_t generation)> gone) {
  for (auto it = maps_.begin(); it != maps_.end();) {
    const auto& [pid, index, generation] = it->first;
    if (!gone(index, pid, generation)) {
      ++it;
      continue;
    }
    munmap(it->second.base, it->second.length);
    if (last_ == it) last_ = maps_.end();
    it = maps_.erase(it);
  }
}

}  // namespace galaxy::live
