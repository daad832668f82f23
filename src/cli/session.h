// The CLI's side of a session (nmd/session.h): the options every management subcommand takes.
#pragma once

#include <CLI/CLI.hpp>

#include "nmd/session.h"

namespace galaxy::cli {

using nmd::discover;
using nmd::find_node;
using nmd::open_discovered_session;
using nmd::open_session;
using nmd::requester_options;
using nmd::require_simulated;
using nmd::Session;
using nmd::SessionOptions;

// Adds --fabric, --host, --load, --server-nic, --seed, --json, --serial to a subcommand.
void add_session_options(CLI::App* cmd, SessionOptions& o);

}  // namespace galaxy::cli
