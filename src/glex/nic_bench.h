// The TH-1A NIC paper's measurements (docs/system.md 1.1), taken on the simulated engine through
// libglex's device interface: ping-pong latency of the smallest RDMA, submitted by PIO or by
// DMA, as an immediate or a put; and the unidirectional bandwidth of pipelined puts. Nothing
// here knows the paper's numbers: the figures come out of the chip models and the timing file.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/sim/sim_fabric.h"

namespace galaxy::glex {

struct NicBenchOptions {
  uint32_t iterations = 200;  // ping-pong round trips per latency figure
  uint32_t latency_bytes = 8;
  std::vector<uint64_t> bandwidth_sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
  uint64_t bandwidth_total = 16 << 20;  // bytes moved per size (at least two puts)
};

struct NicFigures {
  double pio_immediate_us = 0;  // PIO-submitted immediate RDMA: the minimum latency
  double pio_put_us = 0;        // PIO-submitted put (one DMA read of the data)
  double dma_immediate_us = 0;  // DMA-submitted immediate RDMA (one DMA read: the descriptor)
  double dma_put_us = 0;        // DMA-submitted put (two: descriptor, data)
  std::vector<std::pair<uint64_t, double>> bandwidth;  // put size -> GB/s
  double peak_gbytes_per_s = 0;
};

// Two NICs of one NRC: the shortest path a fabric offers (NIC - NRC - NIC).
Result<std::pair<uint32_t, uint32_t>> nearest_nic_pair(const fabric::Topology& t);

// Runs every measurement between NICs `a` and `b` (routes must be loaded).
Result<NicFigures> measure_nic(sim::SimFabric& f, uint32_t a, uint32_t b,
                               const NicBenchOptions& o = {});

}  // namespace galaxy::glex
