// `galaxy bench sim` (cmd_bench_sim.cc) and `galaxy bench nic` (cmd_bench_nic.cc): the simulated
// engine's speed and the simulated NIC beside the TH-1A paper's figures.
#pragma once

#include <CLI/CLI.hpp>

namespace galaxy::cli {

void add_bench_sim_subcommand(CLI::App* bench);
void add_bench_nic_subcommand(CLI::App* bench);
// `galaxy bench scale` (cmd_bench_scale.cc): how bring-up grows with the fabric.
void add_bench_scale_subcommand(CLI::App* bench);
// `galaxy bench daemon` (cmd_bench_daemon.cc): the management daemon under load and faults.
void add_bench_daemon_subcommand(CLI::App* bench);
// `galaxy bench coll` (cmd_bench_coll.cc): offloaded collectives beside point-to-point.
void add_bench_coll_subcommand(CLI::App* bench);
// `galaxy bench coll-live` (cmd_bench_coll_live.cc): live collectives beside Open MPI.
void add_bench_coll_live_subcommand(CLI::App* bench);
void add_bench_ibsm_subcommand(CLI::App* bench);
// `galaxy bench sm-campaign` (cmd_bench_sm.cc): several management servers through faults.
void add_bench_sm_campaign_subcommand(CLI::App* bench);
void add_bench_via_subcommand(CLI::App* bench);
void add_bench_mpi_subcommand(CLI::App* bench);

}  // namespace galaxy::cli
