// What the long-running commands share about running: the stop flag the terminal's signals set,
// and the wall-clock time a phase took.
#pragma once

#include <atomic>
#include <chrono>

namespace galaxy::cli {

// Installs handlers for SIGINT and SIGTERM (and SIGHUP when `hangup`) that set the returned flag;
// the command polls it, ends its loop and cleans up (a daemon removes its segment, a benchmark
// takes its private fabrics down). `restart` keeps interrupted reads and writes going
// (SA_RESTART); without it they return EINTR, so a wait ends at the signal.
const std::atomic<bool>& stop_on_signals(bool hangup = false, bool restart = false);

// Whether one of those signals has arrived.
bool stop_requested();

// Milliseconds of wall-clock time since `t0`.
double ms_since(std::chrono::steady_clock::time_point t0);

}  // namespace galaxy::cli
