// Communication peers that Galaxy's benchmarks compare against (spec/ANCHORS.md, "Communication
// on one host"): UCX, libfabric and Open MPI run as two processes on this host over their
// shared-memory transports, plus two physical limits (memcpy, a cache-line ping-pong).
//
// Test names: "<kind>_<bytes>", kind one of mp_lat (one-way latency of a message), put_lat,
// get_lat, put_bw, get_bw, msg_rate, tag_rate (UCX only: tag-matched message rate) and msg_bw
// (streamed sends: UCX tag_bw; libfabric's fi_pingpong gives its ping-pong bandwidth).
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace galaxy::cli {

struct PeerSample {
  std::string peer;  // "ucx", "libfabric-shm", "openmpi"
  std::string test;  // "mp_lat_8", "put_bw_1048576", ...
  std::string unit;  // "us" (latency), "MB/s" (10^6 bytes/s), "Mmsg/s"
  bool available = false;
  std::string why_unavailable;  // the reason and the command line
  std::vector<double> runs;     // one figure per repetition
  double median = 0;
  std::string command;  // server and client command lines of the last repetition
  std::string note;     // what the figure means when it differs from the test's plain meaning
};

struct PeerOptions {
  int repetitions = 3;
  int iterations = 0;        // 0: a per-test default that takes about a second
  int timeout_s = 60;        // per process pair
  bool quick = false;        // 1 repetition and few iterations, for self-checks
  std::string mpi_pingpong;  // path of the MPI peer; empty: next to /proc/self/exe
  bool tcp = false;          // over loopback TCP (UCX_TLS=tcp, fi_pingpong -p tcp -e msg): the
                             // peers' path between two hosts
};

// Runs `argv` (with `env` added) to its end or `timeout_s`: its exit status (128 + signal when
// killed) and what it printed (stdout and stderr together). Errors: it could not be started
// (E9601) or ran out of time (E9608).
struct CommandOutput {
  int status = 0;
  std::string output;
  double seconds = 0;    // wall time, start to exit (5 ms resolution)
  long max_rss_kib = 0;  // peak resident set of the program itself
};
Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env, int timeout_s);

// A program left running beside a benchmark (a fabric simulator) until stop() or destruction,
// in its own process group, its output kept in a file. Errors: as run_command's.
class BackgroundCommand {
 public:
  static Result<std::unique_ptr<BackgroundCommand>> start(const std::vector<std::string>& argv,
                                                          const std::vector<std::string>& env);
  ~BackgroundCommand();
  bool running() const;
  // Kills it and everything it started; what it printed.
  std::string stop();

  struct Impl;
  explicit BackgroundCommand(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Each runs the peer's server and client on this host and parses its figure; a peer that is not
// installed, cannot run the test or fails comes back with available = false and why.
PeerSample run_ucx(const std::string& test, size_t bytes, const PeerOptions& opt);
PeerSample run_libfabric(const std::string& test, size_t bytes, const PeerOptions& opt);
PeerSample run_openmpi(const std::string& test, size_t bytes, const PeerOptions& opt);
// All three, in that order; unavailable ones included.
std::vector<PeerSample> run_peers(const std::string& test, size_t bytes, const PeerOptions& opt);

// One repetition's samples added to those of the earlier ones (the same peers in the same
// order; a peer unavailable in either stays as first seen).
void add_repetition(std::vector<PeerSample>& all, const std::vector<PeerSample>& now);
// A peer's sample for a benchmark's JSON: its median, runs, command and note, or why it was
// unavailable.
nlohmann::json peer_json(const PeerSample& s);

// The peers a benchmark runs beside ours (--peers): a comma-separated list of ucx, libfabric and
// openmpi, or none. Errors: a name that is not a peer, a name given twice, none with others,
// nothing at all (E9621).
struct PeerChoice {
  bool ucx = false;
  bool libfabric = false;
  bool openmpi = false;
};
Result<PeerChoice> parse_peer_list(const std::string& text);

// Physical limits: single-thread memcpy of `bytes` (median of 3 passes, MB/s), and the one-way
// latency (ns) of a cache-line ping-pong between two processes through MAP_SHARED memory.
// The median of a sample (0 when empty).
double median_of(std::vector<double> v);
// This program's path (/proc/self/exe), "" when it cannot be read.
std::string self_executable();

// A command line as one string (for the record of what ran).
std::string join(const std::vector<std::string>& argv);

// The executable `name` on $PATH, or "" when there is none.
std::string find_in_path(const std::string& name);

double memcpy_mbps(size_t bytes);
double cacheline_pingpong_ns(int iterations);

// Test name split: "mp_lat_8" or ("mp_lat", 8). bytes = 0 takes the size from the name.
struct PeerTest {
  std::string kind;
  size_t bytes = 0;
  std::string name() const;
};
Result<PeerTest> parse_peer_test(const std::string& test, size_t bytes);

// Parsers of the peers' outputs, exposed for tests.
struct UcxFinal {
  double iterations = 0;
  double lat_p50_us = 0, lat_avg_us = 0, lat_overall_us = 0;
  double bw_avg_mibps = 0, bw_overall_mibps = 0;  // ucx_perftest prints MiB/s as "MB/s"
  double rate_avg = 0, rate_overall = 0;          // messages per second
};
Result<UcxFinal> parse_ucx_final(std::string_view output);
struct FiPingpongRow {
  double bytes = 0, mb_per_s = 0, usec_per_xfer = 0, mxfers_per_s = 0;
};
Result<FiPingpongRow> parse_fi_pingpong(std::string_view output);
struct MpiPingpongLine {
  double lat_us = 0, bw_mbps = 0, rate_mmps = 0;
};
Result<MpiPingpongLine> parse_mpi_pingpong(std::string_view output);

}  // namespace galaxy::cli
