// The SM fault campaign (`galaxy bench sm-campaign`, docs/management.md "Several servers"):
// several `galaxy nmd` servers (nmd::Daemon, as the command runs them) on one simulated fabric,
// driven in one thread on simulated time (SessionOptions::Shared). The master is killed in the
// middle of a sweep while links go down, then links flap and chips die one after another. At
// every turn of every server at most one is master; after every change the master re-routes and
// the chips at the change route around it (checked in the tables the NRCs hold); at the end every
// change is in the shared fault history. Reported: time to a new master, time to re-route.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "nm/routing.h"

namespace galaxy::nmd {

struct SmCampaignOptions {
  std::string fabric = "sim:th2";
  uint32_t servers = 3;           // 2-8; the first has the highest priority and starts as master
  uint32_t flaps = 100;           // links taken down and brought back, one after another
  uint32_t chip_kills = 10;       // NRCs whose every link goes dark, one after another
  uint32_t leaderless_downs = 2;  // of the flaps: links taken down while no server is master
  uint64_t seed = 1;
  double sm_poll_s = 2;
  unsigned sm_poll_retries = 4;
  std::string routing_engine = nm::kDefaultRoutingEngine;
  std::string db_path;         // the servers' shared event store (a new file)
  double change_limit_s = 60;  // simulated seconds a change may take to be re-routed
  // Destinations whose packets from every NIC are followed through the held tables after each
  // phase (and at each change, those the change concerns).
  uint32_t path_samples = 100;
  // A line of progress per phase and every tenth change (stderr in the CLI).
  std::function<void(const std::string&)> progress;
};

// Runs the campaign; the report (JSON) holds the figures, every check's outcome and "passed".
// An error only when the campaign could not run (a bad option, a fabric that does not build).
Result<nlohmann::json> run_sm_campaign(const SmCampaignOptions& options);

}  // namespace galaxy::nmd
