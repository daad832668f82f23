// A simulated host's memory behind its NIC (chip/host_memory.h): physical page frames handed
// out in order at registration, their bytes kept sparsely, so that a large fabric whose hosts
// touch little memory costs little. The DMA and PCIe timing are the SimFabric's.
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "chip/att.h"
#include "chip/host_memory.h"

namespace galaxy::sim {

class SimHostMemory final : public chip::HostMemory {
 public:
  // Frames for a region of `pages` pages; physical addresses never repeat.
  std::vector<uint64_t> allocate(uint64_t pages) {
    std::vector<uint64_t> f(pages);
    for (uint64_t& x : f) x = (next_frame_++) * chip::kAttPageBytes;
    return f;
  }
  Status read(uint64_t phys, std::span<uint8_t> out) override {
    walk(phys, out.size(), [&](uint8_t* page, uint64_t in, uint64_t off, uint64_t n) {
      if (page)
        std::memcpy(out.data() + off, page + in, n);
      else
        std::memset(out.data() + off, 0, n);
    });
    return {};
  }
  Status write(uint64_t phys, std::span<const uint8_t> in) override {
    walk(
        phys, in.size(),
        [&](uint8_t* page, uint64_t at, uint64_t off, uint64_t n) {
          std::memcpy(page + at, in.data() + off, n);
        },
        true);
    return {};
  }
  size_t bytes_held() const { return pages_.size() * chip::kAttPageBytes; }

 private:
  using Page = std::array<uint8_t, chip::kAttPageBytes>;
  template <class F>
  void walk(uint64_t phys, uint64_t length, F&& fn, bool create = false) {
    uint64_t done = 0;
    while (done < length) {
      const uint64_t a = phys + done;
      const uint64_t in = a % chip::kAttPageBytes;
      const uint64_t n = std::min(length - done, chip::kAttPageBytes - in);
      auto it = pages_.find(a / chip::kAttPageBytes);
      uint8_t* page = nullptr;
      if (it != pages_.end()) {
        page = it->second->data();
      } else if (create) {
        auto p = std::make_unique<Page>();
        p->fill(0);
        page = p->data();
        pages_.emplace(a / chip::kAttPageBytes, std::move(p));
      }
      fn(page, in, done, n);
      done += n;
    }
  }
  uint64_t next_frame_ = 1;  // frame 0 stays unused, so a zero physical address is never valid
  std::unordered_map<uint64_t, std::unique_ptr<Page>> pages_;
};

}  // namespace galaxy::sim
