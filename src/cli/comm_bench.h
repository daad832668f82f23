// Galaxy's side of the communication benchmarks (`galaxy bench pingpong|bw|rdma`): two
// processes on a live fabric, each with its own NIC, moving data through libglex alone. The
// test names and units are those of cli/peers.h, so rows line up with the peers'.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy::cli {

struct OursOptions {
  std::string fabric;  // live fabric name (its daemons run)
  std::string host;    // NIC a's host
  std::string host_b;  // NIC b's host; empty: the same as a's
  uint32_t nic_a = 0;  // chip ids of the two NICs
  uint32_t nic_b = 0;
  int iterations = 0;  // 0: the per-test default of the peers (about a second)
  int repetitions = 5;
  int timeout_s = 60;
};

// One figure per repetition, in the unit of the test ("us", "MB/s", "Mmsg/s").
Result<std::vector<double>> run_ours(const std::string& kind, size_t bytes, const OursOptions& o);
int default_iterations(const std::string& kind, size_t bytes);

}  // namespace galaxy::cli
