// The timing model of the simulated engine, loaded from one calibration file
// (config/th2-timing.json). Every value there cites the paper figure it comes from.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "engine/sim/time.h"

namespace galaxy::sim {

struct Timing {
  double link_lane_gbps = 0;
  double link_lanes = 0;
  double flit_bits = 0;
  Time chip_input_pipeline = 0;
  Time link_latency = 0;
  Time nic_sdq_fetch = 0;
  Time nic_mp_build = 0;
  Time nic_descriptor_interval = 0;  // initiation interval of the NIC's descriptor pipeline
  Time nma_unpack_dispatch = 0;
  Time nma_register_read = 0;
  Time nma_collect_pack = 0;
  Time nic_rx_dma = 0;
  Time host_poll_detect = 0;
  Time eeprom_i2c_setup = 0;
  Time eeprom_read_per_byte = 0;
  Time eeprom_write_per_byte = 0;
  double data_packet_bytes = 0;
  Time host_send = 0;
  Time host_receive = 0;
  Time host_wakeup = 0;
  // The monitor board's round trip without its I2C bus: the management network's TCP exchange
  // and the board's software (chip/monitor_board.h adds the bus).
  Time oob_board_overhead = 0;
  double pcie_gbytes_per_s = 0;  // one direction of the NIC's PCIe link, after encoding
  Time pio_write = 0;            // one PIO write as the NIC sees it (uncached or a WC burst)
  double wc_buffer_bytes = 0;    // the CPU's write-combining buffer
  // Parameters fitted to a figure a benchmark then reports (parameter -> the figure), from the
  // file's "calibration_inputs": those rows are inputs, not results of the model.
  std::map<std::string, std::string> calibration_inputs;

  // The host's cost of submitting a descriptor of `bytes` by PIO into an on-chip HDQ: the
  // descriptor leaves the write-combining buffer in bursts, and the first visible write pays
  // for the bridge (TH-1A paper: 128 bytes take (16 + 16 + 16) PCIe clocks).
  Time pio_submit(uint64_t bytes) const;

  // Moving `bytes` over the NIC's PCIe link at its rate (DMA reads and writes of data).
  Time pcie(uint64_t bytes) const;
  // Serialisation of `flits` flits on one link.
  Time serialisation(unsigned flits) const;
  Time serialisation_bits(double bits) const;
  // One hop of a management packet: serialisation of 4 flits + link + input pipeline.
  Time mgmt_hop() const { return serialisation(4) + link_latency + chip_input_pipeline; }
  // Processing of a 1-register read with no hops (the paper's 5.9597 us).
  Time register_read_processing() const;
  Time eeprom_read_processing(unsigned bytes) const;
};

// Loads and validates a calibration file: every parameter present, positive, with a source.
Result<Timing> load_timing(const std::string& path);
// config/th2-timing.json from the source tree (or $GALAXY_TIMING if set).
Result<Timing> default_timing();
std::string default_timing_path();

}  // namespace galaxy::sim
