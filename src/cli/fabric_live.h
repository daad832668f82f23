// `galaxy fabric up | down | status` for live fabrics (cmd_fabric_live.cc), and the same as
// functions for the benchmarks and tests that bring up a private live fabric.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy::cli {

void add_fabric_live_subcommands(CLI::App* fabric);

struct LiveUpRequest {
  std::string spec;
  std::string engine = "minhop";
  std::string impair;
  std::vector<std::string> hosts;  // empty: those with a local address
  uint64_t op_timeout_ms = 5000;
  uint64_t spin_us = 50;     // each daemon polls this long before sleeping
  uint32_t frame_bytes = 0;  // each daemon's largest frame to another host; 0: by the MTU
  double timeout_s = 20;
  bool json = false;
  bool route = true;  // discover, route and load through the management server
};
// Starts the daemons (detached processes) and brings the fabric up; the JSON has the daemons
// and the bring-up figures.
Result<nlohmann::json> live_fabric_up(const LiveUpRequest& rq);
Result<nlohmann::json> live_fabric_down(const std::string& spec);
// A benchmark's private live fabric of `hosts` (1 or 2) hosts on loopback (a 2-level fat tree of
// 4-port switches, named <tag><pid>, ports from the process id), brought up; its spec. Stop it
// with live_fabric_down.
Result<std::string> private_loopback_fabric(const std::string& tag, int hosts, bool json);

}  // namespace galaxy::cli
