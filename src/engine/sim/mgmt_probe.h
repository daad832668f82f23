// A serial management request loop through the simulated fabric, as the paper measured
// (docs/system.md 2.8: N requests, one outstanding, mean latency): descriptor posted to an SDQ,
// packet through the chip models, response polled from the MPQ.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/sim/sim_fabric.h"

namespace galaxy::sim {

struct ProbeSpec {
  uint32_t server_nic = 0;  // node id of the NIC issuing the requests
  uint32_t target = 0;      // node id of the chip addressed
  wire::NmpType type = wire::NmpType::kRegReadRequest;
  std::vector<uint16_t> addresses{chip::reg::kScratch};  // 1-2 registers or 1-6 EEPROM bytes
  std::vector<uint64_t> values;  // register values or EEPROM bytes for writes
  unsigned count = 1000;
  uint8_t vp = chip::kPioVps;  // first DMA VP: management uses SDQs
  uint64_t m_key = 0;
};

struct ProbeResult {
  unsigned completed = 0;
  unsigned hops = 0;  // NRCs strictly between the server and the target (paper's h)
  double mean_us = 0;
  double min_us = 0;
  double max_us = 0;
  wire::MgmtPacket last_response;
};

Result<ProbeResult> run_probe(SimFabric& fabric, const ProbeSpec& spec);

}  // namespace galaxy::sim
