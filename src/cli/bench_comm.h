// `galaxy bench pingpong | bw | rdma` (cmd_bench_comm.cc): libglex between two processes on a
// live fabric beside UCX, libfabric and Open MPI measured in the same run.
#pragma once

#include <CLI/CLI.hpp>

namespace galaxy::cli {

void add_bench_comm_subcommands(CLI::App* bench);

}  // namespace galaxy::cli
