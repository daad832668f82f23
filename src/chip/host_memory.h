// The NIC's port to host memory (docs/system.md 1.1): DMA reads and writes at the physical
// addresses the ATT gives. The engine supplies it: the simulator a modelled host memory (its DMA
// and PCIe timing are the engine's), the live engine the process's memory.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"

namespace galaxy::chip {

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual Status read(uint64_t phys, std::span<uint8_t> out) = 0;
  virtual Status write(uint64_t phys, std::span<const uint8_t> in) = 0;
  // Writes become visible in order, and all of them before the NIC tells anyone they happened:
  // the NIC calls flush before an ack leaves, before a completion enters its EQ, and between
  // the two words of an event. A memory that posts writes (buffers them) completes them here
  // and reports the first that failed; the default posts nothing.
  virtual Status flush() { return {}; }
};

}  // namespace galaxy::chip
