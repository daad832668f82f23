// Link test (docs/system.md 2.5.6): the link layer's built-in self-test, started, timed and read
// back through the per-port BIST registers (docs/registers.md): BIST_CTRL start with duration and
// intensity, wait, read BIST_STATUS (running, done, flits tested) and BIST_ERRORS in one
// two-register request per port, and BIST_CTRL stop for a test still running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

struct BistPort {
  uint32_t node = 0;  // FabricMap node
  uint8_t port = 0;
  bool operator==(const BistPort&) const = default;
};

struct BistOptions {
  uint32_t duration_us = 100;       // 1-65535 (BIST_CTRL [31:16])
  uint32_t intensity_percent = 50;  // 0-100 (BIST_CTRL [39:32])
  Picoseconds margin = 20 * kUs;    // waited beyond the duration before reading results
  // A test still running then is read again every `margin` up to this long before it is
  // stopped (a live fabric's test ends when the far end's report has come back).
  Picoseconds finish_wait = 100 * kMs;
  double max_bit_error_ratio = 0;  // a link passes with a BER estimate at most this
};

struct BistLinkResult {
  BistPort at;
  wire::ChipId chip_id = 0;
  bool started = false;  // the BIST_CTRL write was accepted
  bool running = false;  // still running when read
  bool done = false;
  bool no_wire = false;  // done with nothing to test (BIST_STATUS [2]): neither passed nor failed
  uint64_t flits = 0;
  uint64_t errors = 0;
  double bit_error_ratio = 0;  // errors / bits tested (a corrupted 198-bit flit counts as 1 bit)
  double ber_upper_95 = 0;     // 95% upper bound when no error was seen (3 / bits tested)
  bool pass = false;
  std::string problem;  // why it failed or was not read (NMA refusal, timeout, not finished)
};

struct BistResult {
  std::vector<BistLinkResult> links;  // in the order the ports were given
  unsigned passed = 0;
  unsigned failed = 0;
  unsigned untested = 0;  // links with no wire to test (BistLinkResult::no_wire)
  uint64_t requests = 0;
  Picoseconds elapsed = 0;
};

// Every linked port of `node` (one end per link).
std::vector<BistPort> bist_ports_of(const FabricMap& map, uint32_t node);
// One end of every link between two chips the server can reach: the NRC end of NIC links, the
// lower node of NRC-NRC links.
std::vector<BistPort> bist_all_links(const FabricMap& map);

class Bist {
 public:
  Bist(Requester& requester, const FabricMap& map) : requester_(requester), map_(map) {}

  // Start the test on every port at once (pipelined BIST_CTRL writes). Errors: bad options.
  // Ports whose start was refused are remembered and reported by read().
  Status start(const std::vector<BistPort>& ports, const BistOptions& options);
  // Read BIST_STATUS and BIST_ERRORS of the started ports and judge them.
  BistResult read();
  // Write the stop bit to every started port.
  Status stop();
  // start, wait duration + margin, read, stop the ones still running.
  Result<BistResult> run(const std::vector<BistPort>& ports, const BistOptions& options);

 private:
  Requester& requester_;
  const FabricMap& map_;
  BistOptions options_;
  std::vector<BistLinkResult> links_;
  uint64_t sent0_ = 0;
  Picoseconds t0_ = 0;
};

}  // namespace galaxy::nm
