#include "cli/run_control.h"

#include <signal.h>

namespace galaxy::cli {

namespace {

// Lock-free, so storing to it is async-signal-safe.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void request_stop(int) {
  g_stop_requested.store(true);
}

}  // namespace

const std::atomic<bool>& stop_on_signals(bool hangup, bool restart) {
  struct sigaction sa {};
  sa.sa_handler = request_stop;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (hangup) sigaction(SIGHUP, &sa, nullptr);
  return g_stop_requested;
}

bool stop_requested() {
  return g_stop_requested.load();
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace galaxy::cli
