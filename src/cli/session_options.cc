#include <string>

#include "cli/option_checks.h"
#include "cli/session.h"
#include "engine/sim/load.h"
#include "wire/chip_id.h"

namespace galaxy::cli {

void add_session_options(CLI::App* cmd, SessionOptions& o) {
  cmd->add_option("--fabric", o.fabric,
                  "sim:<topology>, file:<path>, or live:<topology>,hosts=<name>:<ip>,...")
      ->capture_default_str();
  cmd->add_option("--host", o.host, "live fabric: the host whose NIC the server uses");
  cmd->add_option("--load", o.load, "background load: " + sim::load_names())->capture_default_str();
  cmd->add_option("--server-nic", o.server_nic, "NIC index of the management server")
      ->capture_default_str()
      ->check(integer_in(0, wire::kMaxChipId));
  cmd->add_option("--seed", o.seed, "random seed of the simulation")
      ->capture_default_str()
      ->check(any_uint64());
  cmd->add_flag("--json", o.json, "machine-readable output");
  cmd->add_flag("--serial", o.serial, "one request at a time (the paper's mode)");
  // discover finds the map that the others may start from.
  if (cmd->get_name() != "discover")
    cmd->add_option("--map", o.map_file,
                    "start from a map saved by `galaxy discover --save-map` instead of "
                    "discovering the fabric (checked against the fabric first)");
}

}  // namespace galaxy::cli
