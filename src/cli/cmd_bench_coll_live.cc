// galaxy bench coll-live — collectives between real processes on a live fabric beside Open MPI
// (spec/ANCHORS.md, "Collectives on one host"). For each process count and placement (one host;
// two hosts, the processes split evenly), it runs, interleaved, repetition after repetition:
//   * Galaxy offloaded: bench/peers/glex_coll, one process per NIC where the host has enough,
//     the NICs (the hosts' daemons) running the trees;
//   * Galaxy host-driven: the same program with GLEX_COLL_P2P;
//   * Open MPI: bench/peers/mpi_coll under mpirun with the same number of processes on this
//     machine, mpirun's default binding; over shared memory (btl self,vader) for one host, over
//     TCP (btl self,tcp) for "two hosts", since one machine cannot hold two mpirun hosts;
//   * the host CPU of an offloaded barrier: glex_ibarrier + glex_wait_cq with GLEX_SPIN_US=0, and
//     the daemons' CPU (which runs the NICs' models) over the same run.
// Barrier, 8-byte broadcast and 8-byte allreduce latency are the OSU way (glex_coll.c); the table
// shows the medians of the repetitions side by side and their ratios ours / Open MPI.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "base/env.h"
#include "base/json_text.h"
#include "base/sysinfo.h"
#include "cli/bench_sim.h"
#include "cli/fabric_live.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/peers.h"
#include "cli/run_control.h"
#include "engine/live/live_spec.h"

extern char** environ;

namespace galaxy::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct CollLiveOptions {
  std::vector<int> np = {2, 4, 8, 16};
  std::vector<int> hosts = {1, 2};
  std::string topology = "fattree:k=8,levels=2";
  std::string peers = "openmpi";
  int repetitions = 5;
  int iterations = 0;  // per test; 0: calibrated to target_ms
  int target_ms = 200;
  int warmup = 50;
  int cpu_iterations = 1000;
  int timeout_s = 180;  // one run of N processes
  bool quick = false;
  bool json = false;
};

const char* const kTests[] = {"barrier", "bcast", "allreduce"};

// The three implementations and the CPU-time run, in the order of a repetition (rotated from one
// repetition to the next, so that none always runs right after another).
enum Run { kOffloaded, kHostDriven, kOpenMpi, kCpuRun, kRuns };
const char* const kRunNames[] = {"offloaded", "host_driven", "openmpi", "offloaded_spin0"};

std::string bin_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1);
}

std::string tail(const std::string& out, size_t n = 300) {
  std::string t = out.size() > n ? out.substr(out.size() - n) : out;
  std::replace(t.begin(), t.end(), '\n', ' ');
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

// The JSON line a benchmark program printed (rank 0), among whatever else came out.
Result<nlohmann::json> result_line(const std::string& output, const std::string& what) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("{\"impl\"")) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("tests")) return j;
  }
  return make_error(Code::kMalformed, 9650,
                    fmt::format("{}: no result line in its output: {}", what, tail(output)));
}

// A UDP port of 127.0.0.1 nobody holds now, for a private fabric's host.
Result<uint16_t> free_udp_port() {
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return make_error(Code::kIoError, 9651, fmt::format("socket: {}", strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int rc = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc == 0) rc = ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int err = errno;
  ::close(s);
  if (rc != 0)
    return make_error(Code::kIoError, 9652, fmt::format("bind udp 127.0.0.1:0: {}", strerror(err)));
  return static_cast<uint16_t>(ntohs(a.sin_port));
}

// CPU time (us) of the processes `pids` so far, every thread of them: the scheduler's own
// account in /proc/<pid>/task/<tid>/schedstat (nanoseconds), not /proc/<pid>/stat's 10 ms ticks,
// which are too coarse for a few microseconds per barrier.
double cpu_us_of(const std::vector<int>& pids) {
  double ns = 0;
  for (int pid : pids) {
    std::error_code ec;
    for (const auto& task :
         std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
      std::ifstream in(task.path() / "schedstat");
      double on_cpu = 0;
      if (in >> on_cpu) ns += on_cpu;
    }
  }
  return ns / 1e3;
}

// A private live fabric on this machine with `hosts` hosts, and which NICs each host owns.
struct CollPlacement {
  int hosts = 1;
  std::string name;  // "one-host", "two-hosts"
  std::string spec;
  std::string fabric;  // its name (GLEX_FABRIC)
  std::vector<std::string> host_names;
  std::vector<std::vector<uint32_t>> nics;  // per host, chip ids in order
  std::vector<int> daemon_pids;
};

Result<CollPlacement> bring_up(int hosts, const CollLiveOptions& o) {
  CollPlacement p;
  p.hosts = hosts;
  p.name = hosts == 1 ? "one-host" : "two-hosts";
  p.fabric = fmt::format("bcoll{}h{}", ::getpid(), hosts);
  std::string list;
  for (int h = 0; h < hosts; ++h) {
    auto port = free_udp_port();
    if (!port.ok()) return port.error();
    list += fmt::format("{}h{}:127.0.0.1:{}", h ? "," : "", h + 1, *port);
  }
  p.spec = fmt::format("live:{},name={},hosts={}", o.topology, p.fabric, list);
  auto f = live::parse_live_fabric(p.spec);
  if (!f.ok()) return f.error();
  p.nics.resize(f->hosts.size());
  for (const auto& h : f->hosts) p.host_names.push_back(h.name);
  for (uint32_t i = 0; i < f->topology.num_nics(); ++i) {
    const uint32_t node = f->topology.nic_node(i);
    p.nics[f->host_of[node]].push_back(node);
  }
  LiveUpRequest rq;
  rq.spec = p.spec;
  rq.json = true;  // the daemons' lines stay out of our output
  auto up = live_fabric_up(rq);
  if (!up.ok()) return up.error();
  for (const auto& d : (*up)["daemons"]) p.daemon_pids.push_back(d["pid"].get<int>());
  return p;
}

// Which host and NIC rank r of n runs on: contiguous blocks of ranks per host (as mpirun's
// default by-slot mapping), and a NIC of its own while the host has enough.
std::pair<int, uint32_t> place(const CollPlacement& p, int r, int n) {
  const int h = static_cast<int>(static_cast<int64_t>(r) * p.hosts / n);
  int first = 0;
  while (static_cast<int64_t>(first) * p.hosts / n < h) ++first;
  const auto& nics = p.nics[static_cast<size_t>(h)];
  return {h, nics[static_cast<size_t>(r - first) % nics.size()]};
}

// Runs N processes of `argv`, rank r with `env` plus GLEX_RANK/GLEX_SIZE/GLEX_HOST/GLEX_NIC, to
// their end; stops them all as soon as one fails (the others would wait for it until their
// group's timeout) or at `timeout_s`. Returns rank 0's output.
Result<std::string> run_group(const CollPlacement& p, int n, const std::vector<std::string>& argv,
                              const std::vector<std::string>& env, int timeout_s) {
  static int serial = 0;
  const std::string dir = fmt::format("/tmp/galaxy-coll-live-{}-{}", ::getpid(), ++serial);
  std::filesystem::remove_all(dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(Code::kIoError, 9653, fmt::format("mkdir {}: {}", dir, ec.message()));
  std::vector<std::string> set = env;
  set.push_back("GLEX_FABRIC=" + p.fabric);
  set.push_back("GLEX_SIZE=" + std::to_string(n));
  set.push_back("GLEX_RENDEZVOUS=" + dir);
  std::vector<std::string> base;
  auto key = [](std::string_view kv) { return kv.substr(0, kv.find('=') + 1); };
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    const bool ours = key(kv) == "GLEX_RANK=" || key(kv) == "GLEX_HOST=" ||
                      key(kv) == "GLEX_NIC=" ||
                      std::any_of(set.begin(), set.end(),
                                  [&](const std::string& s) { return key(s) == key(kv); });
    if (!ours) base.emplace_back(kv);
  }
  base.insert(base.end(), set.begin(), set.end());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  pid_t group = 0;
  auto stop_all = [&]() {
    if (group > 0) ::kill(-group, SIGKILL);
    for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
    std::filesystem::remove_all(dir, ec);
  };
  const pid_t parent = ::getpid();
  for (int r = 0; r < n; ++r) {
    const auto [h, nic] = place(p, r, n);
    std::vector<std::string> mine = base;
    mine.push_back(fmt::format("GLEX_RANK={}", r));
    mine.push_back("GLEX_HOST=" + p.host_names[static_cast<size_t>(h)]);
    mine.push_back(fmt::format("GLEX_NIC={}", nic));
    std::vector<char*> envp;
    for (const auto& e : mine) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const std::string out = fmt::format("{}/out.{}", dir, r);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      stop_all();
      return make_error(Code::kIoError, 9654, fmt::format("open {}: {}", out, strerror(errno)));
    }
    // Only async-signal-safe calls between fork and exec; one process group for all ranks, so a
    // timeout stops every one, and each dies with us.
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fd);
      stop_all();
      return make_error(Code::kIoError, 9655, fmt::format("fork: {}", strerror(errno)));
    }
    if (pid == 0) {
      ::setpgid(0, group);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::setpgid(pid, group);
    if (group == 0) group = pid;
    ::close(fd);
    pids.push_back(pid);
    outs.push_back(out);
  }
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  std::vector<int> status(static_cast<size_t>(n), -1);
  int left = n;
  std::string failure;
  while (left > 0 && failure.empty()) {
    for (int r = 0; r < n; ++r) {
      if (status[static_cast<size_t>(r)] >= 0) continue;
      int st = 0;
      if (::waitpid(pids[static_cast<size_t>(r)], &st, WNOHANG) != pids[static_cast<size_t>(r)])
        continue;
      --left;
      status[static_cast<size_t>(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (status[static_cast<size_t>(r)] != 0 && failure.empty())
        failure =
            fmt::format("rank {} exited with status {}: {}", r, status[static_cast<size_t>(r)],
                        tail(read(outs[static_cast<size_t>(r)])));
    }
    if (left > 0 && failure.empty() && Clock::now() > deadline)
      failure = fmt::format("not done within {} s (--timeout-s)", timeout_s);
    if (left > 0 && failure.empty() && stop_requested()) failure = "interrupted";
    if (left > 0 && failure.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (left > 0) {
    ::kill(-group, SIGKILL);
    for (int r = 0; r < n; ++r)
      if (status[static_cast<size_t>(r)] < 0) ::waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
  }
  const std::string out0 = read(outs[0]);
  std::filesystem::remove_all(dir, ec);
  if (!failure.empty())
    return make_error(Code::kIoError, 9656,
                      fmt::format("{} processes of {}: {}", n, argv[0], failure));
  return out0;
}

struct Paths {
  std::string glex_coll, mpi_coll, mpirun;
  std::string mpi_missing;  // why Open MPI cannot run, with its error id
};

std::vector<std::string> program_args(const CollLiveOptions& o, bool cpu_only) {
  std::vector<std::string> a;
  a.insert(a.end(), {"--tests", cpu_only ? "cpu" : "barrier,bcast,allreduce,cpu"});
  a.insert(a.end(), {"--cpu-iters", std::to_string(o.cpu_iterations)});
  if (cpu_only) return a;
  a.insert(a.end(), {"--warmup", std::to_string(o.warmup)});
  if (o.iterations > 0)
    a.insert(a.end(), {"--iters", std::to_string(o.iterations)});
  else
    a.insert(a.end(), {"--target-ms", std::to_string(o.target_ms)});
  return a;
}

std::vector<std::string> mpi_argv(const Paths& paths, const CollPlacement& p, int n,
                                  const CollLiveOptions& o) {
  // ob1 with Open MPI's own transports: its default pml (ucx) would measure UCX instead.
  std::vector<std::string> a = {paths.mpirun,
                                "--allow-run-as-root",
                                "--oversubscribe",
                                "-np",
                                std::to_string(n),
                                "--mca",
                                "pml",
                                "ob1",
                                "--mca",
                                "btl",
                                p.hosts == 1 ? "self,vader" : "self,tcp",
                                paths.mpi_coll};
  auto rest = program_args(o, false);
  a.insert(a.end(), rest.begin(), rest.end());
  return a;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Every figure of one (placement, process count): per run kind, the JSON lines of its
// repetitions (or why it failed).
struct Cell {
  int np = 0;
  std::vector<nlohmann::json> lines[kRuns];
  std::string error[kRuns];
  std::vector<double> daemon_cpu_us;  // per barrier of the CPU-time run
  std::string command[kRuns];
};

void measure(const CollPlacement& p, const Paths& paths, const CollLiveOptions& o, Cell& c) {
  const std::string glex = paths.glex_coll;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (int k = 0; k < kRuns && !stop_requested(); ++k) {
      const Run run = static_cast<Run>((k + rep) % kRuns);
      if (!c.error[run].empty()) continue;  // failed once: not again
      if (run == kOpenMpi && !paths.mpi_missing.empty()) continue;
      std::fprintf(stderr, "galaxy bench coll-live: %s, %d processes, repetition %d/%d: %s\n",
                   p.name.c_str(), c.np, rep + 1, o.repetitions, kRunNames[run]);
      Result<std::string> out = std::string();
      if (run == kOpenMpi) {
        auto argv = mpi_argv(paths, p, c.np, o);
        c.command[run] = join(argv);
        auto r = run_command(argv, {}, o.timeout_s);
        if (!r.ok())
          out = r.error();
        else if (r->status != 0)
          out = make_error(
              Code::kIoError, 9657,
              fmt::format("mpirun exited with status {}: {}", r->status, tail(r->output)));
        else
          out = r->output;
      } else {
        std::vector<std::string> argv = {glex};
        auto rest = program_args(o, run == kCpuRun);
        argv.insert(argv.end(), rest.begin(), rest.end());
        if (run == kHostDriven) argv.push_back("--p2p");
        std::vector<std::string> env;
        if (run == kCpuRun) env.push_back("GLEX_SPIN_US=0");
        c.command[run] = fmt::format(
            "{}GLEX_FABRIC={} GLEX_SIZE={} (GLEX_RANK, GLEX_HOST, GLEX_NIC: "
            "\"ranks\") {}",
            env.empty() ? "" : env[0] + " ", p.fabric, c.np, join(argv));
        const double d0 = cpu_us_of(p.daemon_pids);
        out = run_group(p, c.np, argv, env, o.timeout_s);
        if (run == kCpuRun && out.ok())
          c.daemon_cpu_us.push_back((cpu_us_of(p.daemon_pids) - d0) / o.cpu_iterations);
      }
      Result<nlohmann::json> line =
          out.ok() ? result_line(*out, kRunNames[run]) : Result<nlohmann::json>(out.error());
      if (!line.ok()) {
        c.error[run] = line.error().to_string();
        std::fprintf(stderr, "galaxy bench coll-live: %s, %d processes: %s failed: %s\n",
                     p.name.c_str(), c.np, kRunNames[run], c.error[run].c_str());
        continue;
      }
      c.lines[run].push_back(*line);
    }
  }
}

// The median over repetitions of tests.<test>.<field>; null when the run kind has none.
nlohmann::json median_field(const std::vector<nlohmann::json>& lines, const std::string& test,
                            const std::string& field, std::vector<double>* runs = nullptr) {
  std::vector<double> v;
  for (const auto& l : lines)
    if (l["tests"].contains(test) && l["tests"][test].contains(field))
      v.push_back(l["tests"][test][field].get<double>());
  if (runs) *runs = v;
  if (v.empty()) return nullptr;
  return cli::median_of(v);
}

nlohmann::json ratio(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_null() || b.is_null() || b.get<double>() <= 0) return nullptr;
  return a.get<double>() / b.get<double>();
}

nlohmann::json cell_json(const Cell& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const char* test : kTests) {
    nlohmann::json row{{"np", c.np}, {"test", test}, {"unit", "us"}};
    for (Run run : {kOffloaded, kHostDriven, kOpenMpi}) {
      std::vector<double> runs;
      row[kRunNames[run]] = median_field(c.lines[run], test, "us", &runs);
      row[std::string(kRunNames[run]) + "_runs"] = runs;
    }
    row["ratio_offloaded_openmpi"] = ratio(row["offloaded"], row["openmpi"]);
    row["ratio_host_driven_openmpi"] = ratio(row["host_driven"], row["openmpi"]);
    rows.push_back(row);
  }
  nlohmann::json cpu{{"np", c.np}};
  const auto& zero = c.lines[kCpuRun];
  cpu["spin0"] = {
      {"how", "glex_ibarrier + glex_wait_cq, GLEX_SPIN_US=0"},
      {"wall_us", median_field(zero, "cpu", "wall_us")},
      {"cpu_us", median_field(zero, "cpu", "cpu_us")},
      {"cpu_us_avg", median_field(zero, "cpu", "cpu_us_avg")},
      {"post_us", median_field(zero, "cpu", "post_us")},
      {"post_cpu_us", median_field(zero, "cpu", "post_cpu_us")},
      {"context_switches", median_field(zero, "cpu", "context_switches")},
      {"sleeps", median_field(zero, "cpu", "sleeps")},
      {"cq_entries", median_field(zero, "cpu", "cq_entries")},
      {"daemon_cpu_us", c.daemon_cpu_us.empty() ? nlohmann::json()
                                                : nlohmann::json(cli::median_of(c.daemon_cpu_us))}};
  const auto& beyond = cpu["spin0"];
  cpu["spin0"]["cpu_beyond_post_us"] =
      beyond["cpu_us"].is_null() || beyond["post_cpu_us"].is_null()
          ? nlohmann::json()
          : nlohmann::json(beyond["cpu_us"].get<double>() - beyond["post_cpu_us"].get<double>());
  for (Run run : {kOffloaded, kHostDriven, kOpenMpi}) {
    const auto& l = c.lines[run];
    nlohmann::json how = l.empty() || !l[0]["tests"].contains("cpu") ? nlohmann::json()
                                                                     : l[0]["tests"]["cpu"]["how"];
    cpu[kRunNames[run]] = {{"how", how},
                           {"wall_us", median_field(l, "cpu", "wall_us")},
                           {"cpu_us", median_field(l, "cpu", "cpu_us")},
                           {"context_switches", median_field(l, "cpu", "context_switches")}};
  }
  nlohmann::json j{{"np", c.np}, {"rows", rows}, {"cpu", cpu}};
  nlohmann::json errors, commands;
  for (int run = 0; run < kRuns; ++run) {
    if (!c.error[run].empty()) errors[kRunNames[run]] = c.error[run];
    if (!c.command[run].empty()) commands[kRunNames[run]] = c.command[run];
  }
  if (!errors.is_null()) j["errors"] = errors;
  j["commands"] = commands;
  return j;
}

std::string fmt_us(const nlohmann::json& v) {
  return v.is_null() ? "n/a" : fmt::format("{:.4g}", v.get<double>());
}
std::string fmt_ratio(const nlohmann::json& v) {
  return v.is_null() ? "-" : fmt::format("{:.2f}", v.get<double>());
}

void print_text(const nlohmann::json& j) {
  std::printf("galaxy bench coll-live: %s\n", j["machine"].get<std::string>().c_str());
  for (const auto& note : j["notes"]) std::printf("  %s\n", note.get<std::string>().c_str());
  for (const auto& pl : j["placements"]) {
    std::printf("\n%s: %s\n", pl["placement"].get<std::string>().c_str(),
                pl["fabric"].get<std::string>().c_str());
    std::printf("  Open MPI: %s\n", pl["openmpi_transport"].get<std::string>().c_str());
    if (pl.contains("error")) {
      std::printf("  ERROR %s\n", pl["error"].get<std::string>().c_str());
      continue;
    }
    std::printf(
        "  latency, us (medians of %d repetitions; ratio = ours / Open MPI, below 1: ours "
        "faster)\n",
        j["repetitions"].get<int>());
    std::printf("  %4s %-10s %11s %11s %11s %9s %9s\n", "np", "test", "offloaded", "host-drv",
                "openmpi", "off/mpi", "hd/mpi");
    for (const auto& cell : pl["cells"]) {
      for (const auto& r : cell["rows"])
        std::printf("  %4d %-10s %11s %11s %11s %9s %9s\n", r["np"].get<int>(),
                    r["test"].get<std::string>().c_str(), fmt_us(r["offloaded"]).c_str(),
                    fmt_us(r["host_driven"]).c_str(), fmt_us(r["openmpi"]).c_str(),
                    fmt_ratio(r["ratio_offloaded_openmpi"]).c_str(),
                    fmt_ratio(r["ratio_host_driven_openmpi"]).c_str());
      if (cell.contains("errors"))
        for (const auto& [k, v] : cell["errors"].items())
          std::printf("       %s: ERROR %s\n", k.c_str(), v.get<std::string>().c_str());
    }
    std::printf(
        "  CPU per barrier, us: a member process's (CLOCK_PROCESS_CPUTIME_ID over the loop, max "
        "over members; post: glex_ibarrier's own, beyond: the rest; sleeps: waits that slept) "
        "and the daemons', which run the NICs (the spin-0 run, start-up included)\n"
        "  %4s | %-42s | %-15s | %-15s | %-15s | %s\n"
        "  %4s | %7s %7s %7s %7s %10s | %7s %7s | %7s %7s | %7s %7s | %s\n",
        "np", "offloaded, GLEX_SPIN_US=0", "offloaded", "host-driven", "openmpi", "daemons", "",
        "wall", "cpu", "post", "beyond", "sleeps", "wall", "cpu", "wall", "cpu", "wall", "cpu",
        "cpu");
    for (const auto& cell : pl["cells"]) {
      const auto& c = cell["cpu"];
      const auto& z = c["spin0"];
      auto pair = [](const nlohmann::json& x) {
        return fmt::format("{:>7} {:>7}", fmt_us(x["wall_us"]), fmt_us(x["cpu_us"]));
      };
      std::printf("  %4d | %7s %7s %7s %7s %10s | %s | %s | %s | %s\n", cell["np"].get<int>(),
                  fmt_us(z["wall_us"]).c_str(), fmt_us(z["cpu_us"]).c_str(),
                  fmt_us(z["post_cpu_us"]).c_str(), fmt_us(z["cpu_beyond_post_us"]).c_str(),
                  fmt_us(z["sleeps"]).c_str(), pair(c["offloaded"]).c_str(),
                  pair(c["host_driven"]).c_str(), pair(c["openmpi"]).c_str(),
                  fmt_us(z["daemon_cpu_us"]).c_str());
    }
  }
}

void run_coll_live(const CollLiveOptions& given) {
  CollLiveOptions o = given;
  if (o.quick) {
    o.repetitions = 1;
    o.target_ms = std::min(o.target_ms, 20);
    o.warmup = std::min(o.warmup, 10);
    o.cpu_iterations = std::min(o.cpu_iterations, 100);
  }
  auto peers = parse_peer_list(o.peers);
  if (!peers.ok()) return report_error(peers.error(), o.json);
  if (peers->ucx || peers->libfabric)
    return report_error(make_error(Code::kInvalidArgument, 9658,
                                   fmt::format("--peers = '{}': coll-live compares with openmpi "
                                               "(or none) only",
                                               o.peers)),
                        o.json);
  Paths paths;
  const std::string dir = bin_dir();
  paths.glex_coll = dir + "glex_coll";
  if (::access(paths.glex_coll.c_str(), X_OK) != 0)
    return report_error(
        make_error(
            Code::kNotFound, 9659,
            fmt::format("{} not built (cmake --build ... --target glex_coll)", paths.glex_coll)),
        o.json);
  paths.mpi_coll = dir + "mpi_coll";
  paths.mpirun = find_in_path("mpirun");
  if (!peers->openmpi)
    paths.mpi_missing = "not asked for (--peers none)";
  else if (paths.mpirun.empty())
    paths.mpi_missing =
        make_error(Code::kNotFound, 9660, "mpirun not installed (apt openmpi-bin)").to_string();
  else if (::access(paths.mpi_coll.c_str(), X_OK) != 0)
    paths.mpi_missing =
        make_error(
            Code::kNotFound, 9661,
            fmt::format("{} not built (bench/peers needs MPI at configure time)", paths.mpi_coll))
            .to_string();
  if (!paths.mpi_missing.empty())
    std::fprintf(stderr, "galaxy bench coll-live: Open MPI will not run: %s\n",
                 paths.mpi_missing.c_str());

  const unsigned cores = online_cores();
  const int most = *std::max_element(o.np.begin(), o.np.end());
  nlohmann::json notes = nlohmann::json::array();
  notes.push_back(fmt::format(
      "{} cores here: {}", cores,
      static_cast<unsigned>(most) > cores
          ? fmt::format("runs of more than {} processes are oversubscribed (processes share "
                        "cores), and so are the hosts' daemons",
                        cores)
          : std::string("no run is oversubscribed")));
  notes.push_back(
      "latency the OSU way: barriers as one timed loop, each broadcast and allreduce timed on "
      "its own with an untimed barrier after it; mean per operation, max over ranks");
  notes.push_back(
      "ours: one process per NIC of its host while the host has NICs enough; the NICs are the "
      "hosts' daemons (galaxy fabricd), which share the cores with the processes");
  notes.push_back(
      "Open MPI: the same number of processes on this machine with mpirun's default binding (to "
      "cores up to 2 processes, none when oversubscribed; ours are never bound, but unbound, "
      "Open MPI's polling processes may share a core and wait out whole time slices); 'two hosts' "
      "cannot be two mpirun "
      "hosts on one machine, so it runs with --mca btl self,tcp (every message through TCP, none "
      "through shared memory)");
  nlohmann::json placements = nlohmann::json::array();
  bool failed = false;
  // Ctrl-C, SIGTERM or SIGHUP: the runs stop, and the private fabrics still go down (their daemons
  // run in sessions of their own, which the terminal's signals do not reach).
  stop_on_signals(true);
  for (int hosts : o.hosts) {
    if (stop_requested()) break;
    nlohmann::json pj{
        {"placement", hosts == 1 ? "one-host" : "two-hosts"},
        {"hosts", hosts},
        {"openmpi_transport", !paths.mpi_missing.empty() ? "not run: " + paths.mpi_missing
                              : hosts == 1 ? "one host, pml ob1, btl self,vader (shared memory)"
                                           : "one machine, pml ob1, btl self,tcp (TCP between all "
                                             "ranks, standing in for two hosts)"}};
    std::fprintf(stderr, "galaxy bench coll-live: bringing up a private live fabric of %d host%s\n",
                 hosts, hosts == 1 ? "" : "s");
    auto p = bring_up(hosts, o);
    if (!p.ok()) {
      pj["fabric"] = "";
      pj["error"] = p.error().to_string();
      failed = true;
      placements.push_back(pj);
      continue;
    }
    pj["fabric"] = p->spec;
    nlohmann::json cells = nlohmann::json::array();
    for (int n : o.np) {
      if (stop_requested()) break;
      Cell c;
      c.np = n;
      if (n % hosts != 0)
        std::fprintf(stderr,
                     "galaxy bench coll-live: %d processes do not split evenly over %d "
                     "hosts: the first takes one more\n",
                     n, hosts);
      measure(*p, paths, o, c);
      for (Run run : {kOffloaded, kHostDriven, kCpuRun})
        if (!c.error[run].empty()) failed = true;
      nlohmann::json cj = cell_json(c);
      for (int r = 0; r < n; ++r) {
        const auto [h, nic] = place(*p, r, n);
        cj["ranks"].push_back(
            {{"rank", r}, {"host", p->host_names[static_cast<size_t>(h)]}, {"nic", nic}});
      }
      cells.push_back(cj);
    }
    pj["cells"] = cells;
    if (auto down = live_fabric_down(p->spec); !down.ok())
      std::fprintf(stderr, "galaxy bench coll-live: %s\n", down.error().to_string().c_str());
    placements.push_back(pj);
  }
  if (stop_requested()) {
    std::fprintf(stderr, "galaxy bench coll-live: interrupted; the private fabrics are down\n");
    set_exit_code(130);
    return;
  }
  if (failed) set_exit_code(1);
  nlohmann::json j{
      {"benchmark", "coll-live"},
      {"machine", fmt::format("{} cores; live fabrics of {} on 127.0.0.1", cores, o.topology)},
      {"cores", cores},
      {"repetitions", o.repetitions},
      {"notes", notes},
      {"placements", placements}};
  if (o.json) {
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  print_text(j);
}

}  // namespace

void add_bench_coll_live_subcommand(CLI::App* bench) {
  auto o = std::make_shared<CollLiveOptions>();
  auto* c = bench->add_subcommand(
      "coll-live",
      "Barrier, 8-byte broadcast and allreduce between processes on a live fabric (one host, two "
      "hosts), offloaded and host-driven, beside Open MPI; host CPU of an offloaded barrier");
  c->add_option("--np", o->np, "process counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(integer_in(2, 64));
  c->add_option("--hosts", o->hosts, "placements: 1 (one host), 2 (two hosts), comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(integer_in(1, 2));
  c->add_option("--topology", o->topology, "the private live fabric's topology")
      ->capture_default_str();
  c->add_option("--peers", o->peers, "openmpi or none")->capture_default_str();
  c->add_option("--reps", o->repetitions, "interleaved repetitions (medians are reported)")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  c->add_option("--iters", o->iterations, "iterations per test (0: calibrated to --target-ms)")
      ->capture_default_str()
      ->check(integer_in(0, 100000000));
  c->add_option("--target-ms", o->target_ms, "time per test when --iters is 0")
      ->capture_default_str()
      ->check(integer_in(1, 600000));
  c->add_option("--warmup", o->warmup, "warm-up iterations per test")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  c->add_option("--cpu-iters", o->cpu_iterations, "barriers of the CPU-time run")
      ->capture_default_str()
      ->check(integer_in(1, 100000000));
  c->add_option("--timeout-s", o->timeout_s, "bound of one run of the processes")
      ->capture_default_str()
      ->check(integer_in(1, 86400));
  c->add_flag("--quick", o->quick, "one short repetition (a smoke test, not a measurement)");
  c->add_flag("--json", o->json, "machine-readable output");
  c->callback([o]() { run_coll_live(*o); });
}

}  // namespace galaxy::cli
