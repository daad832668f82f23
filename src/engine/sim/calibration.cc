#include "engine/sim/calibration.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/env.h"

namespace galaxy::sim {

Time Timing::serialisation_bits(double bits) const {
  double ps = bits / (link_lane_gbps * link_lanes) * 1000.0;  // bits / (Gbit/s) = ns
  return static_cast<Time>(std::llround(ps));
}

Time Timing::pcie(uint64_t bytes) const {
  return static_cast<Time>(std::llround(static_cast<double>(bytes) / pcie_gbytes_per_s * 1000.0));
}

Time Timing::pio_submit(uint64_t bytes) const {
  const auto bursts =
      static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) / wc_buffer_bytes));
  return (1 + bursts) * pio_write;
}

Time Timing::serialisation(unsigned flits) const {
  return serialisation_bits(flits * flit_bits);
}

Time Timing::register_read_processing() const {
  return nic_sdq_fetch + nic_mp_build + nma_unpack_dispatch + nma_register_read + nma_collect_pack +
         nic_rx_dma + host_poll_detect;
}

Time Timing::eeprom_read_processing(unsigned bytes) const {
  return nic_sdq_fetch + nic_mp_build + nma_unpack_dispatch + eeprom_i2c_setup +
         bytes * eeprom_read_per_byte + nma_collect_pack + nic_rx_dma + host_poll_detect;
}

std::string default_timing_path() {
  if (auto env = env_string("GALAXY_TIMING")) return *env;
  return std::string(GALAXY_SOURCE_DIR) + "/config/th2-timing.json";
}

Result<Timing> default_timing() {
  return load_timing(default_timing_path());
}

Result<Timing> load_timing(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(Code::kIoError, 4100,
                      fmt::format("calibration file '{}' cannot be read", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(Code::kMalformed, 4101, fmt::format("{}: not a JSON object", path));
  if (j.value("format", "") != "galaxy-timing" || j.value("version", 0) != 1)
    return make_error(Code::kMalformed, 4102,
                      fmt::format("{}: format must be \"galaxy-timing\" version 1", path));
  const auto& params = j["parameters"];
  if (!params.is_object())
    return make_error(Code::kMalformed, 4103, fmt::format("{}: 'parameters' missing", path));
  Timing t;
  Status bad;
  auto num = [&](const char* name) -> double {
    if (!bad.ok()) return 0;
    auto it = params.find(name);
    if (it == params.end() || !it->is_object() || !(*it)["value"].is_number()) {
      bad =
          make_error(Code::kMalformed, 4104,
                     fmt::format("{}: parameter '{}' missing or has no numeric value", path, name));
      return 0;
    }
    double v = (*it)["value"].get<double>();
    if (!(v > 0) || !(*it)["source"].is_string()) {
      bad = make_error(
          Code::kMalformed, 4105,
          fmt::format("{}: parameter '{}' = {} must be > 0 and cite a source", path, name, v));
      return 0;
    }
    return v;
  };
  auto ns = [&](const char* name) { return static_cast<Time>(std::llround(num(name) * 1000.0)); };
  t.link_lane_gbps = num("link_lane_gbps");
  t.link_lanes = num("link_lanes");
  t.flit_bits = num("flit_bits");
  t.chip_input_pipeline = ns("chip_input_pipeline_ns");
  t.link_latency = ns("link_latency_ns");
  t.nic_sdq_fetch = ns("nic_sdq_fetch_ns");
  t.nic_mp_build = ns("nic_mp_build_ns");
  t.nic_descriptor_interval = ns("nic_descriptor_interval_ns");
  t.nma_unpack_dispatch = ns("nma_unpack_dispatch_ns");
  t.nma_register_read = ns("nma_register_read_ns");
  t.nma_collect_pack = ns("nma_collect_pack_ns");
  t.nic_rx_dma = ns("nic_rx_dma_ns");
  t.host_poll_detect = ns("host_poll_detect_ns");
  t.eeprom_i2c_setup = ns("eeprom_i2c_setup_ns");
  t.eeprom_read_per_byte = ns("eeprom_read_per_byte_ns");
  t.eeprom_write_per_byte = ns("eeprom_write_per_byte_ns");
  t.data_packet_bytes = num("data_packet_bytes");
  t.host_send = ns("host_send_ns");
  t.host_receive = ns("host_receive_ns");
  t.host_wakeup = ns("host_wakeup_ns");
  t.oob_board_overhead = ns("oob_board_overhead_ns");
  t.pcie_gbytes_per_s = num("pcie_gbytes_per_s");
  t.pio_write = ns("pio_write_ns");
  t.wc_buffer_bytes = num("wc_buffer_bytes");
  if (!bad.ok()) return bad.error();
  if (auto it = j.find("calibration_inputs"); it != j.end()) {
    if (!it->is_object())
      return make_error(
          Code::kMalformed, 4106,
          fmt::format("{}: 'calibration_inputs' must map parameters to figures", path));
    for (const auto& [name, figure] : it->items()) {
      if (!params.contains(name) || !figure.is_string())
        return make_error(Code::kMalformed, 4107,
                          fmt::format("{}: calibration input '{}' is not a parameter of the file "
                                      "or names no figure",
                                      path, name));
      t.calibration_inputs[name] = figure.get<std::string>();
    }
  }
  return t;
}

}  // namespace galaxy::sim
