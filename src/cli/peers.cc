// Peers of the communication benchmarks (spec/ANCHORS.md, "Communication on one host").
//
// What each peer's figure means (checked against the tools' sources):
// - ucx_perftest divides ping-pong tests (tag_lat, ucp_put_lat) by 2 (libperf.c,
//   ucx_perf_calc_result: factor 2 for UCX_PERF_TEST_TYPE_PINGPONG): its latency is one-way. The
//   stream tests (ucp_get, *_bw) use factor 1: a ucp_get latency is the completion time of one
//   get. Its "MB/s" is MiB/s (bandwidth / (1024 * 1024)); we convert to 10^6 bytes/s.
// - fi_pingpong (libfabric util/pingpong.c, show_perf with xfers_per_iter = 2) prints one-way
//   usec/xfer and MB/sec = 2 * iterations * size / elapsed us (10^6 bytes/s, one message in
//   flight).
// - bench/peers/mpi_pingpong.c prints one-way latency for its ping-pong and the completion time
//   for MPI_Put/MPI_Get + MPI_Win_flush.
#include "cli/peers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <sstream>
#include <thread>

#include "base/env.h"

extern char** environ;

namespace galaxy::cli {

namespace {

using Clock = std::chrono::steady_clock;

const char* const kKinds[] = {"mp_lat", "put_lat",  "get_lat",  "put_bw",
                              "get_bw", "msg_rate", "tag_rate", "msg_bw"};

bool is_latency(const std::string& kind) {
  return kind.ends_with("_lat");
}
bool is_bandwidth(const std::string& kind) {
  return kind.ends_with("_bw");
}

std::string unit_of(const std::string& kind) {
  return is_latency(kind) ? "us" : is_bandwidth(kind) ? "MB/s" : "Mmsg/s";
}

// About a second per run on this host (ANCHORS: ~0.1-0.7 us one-way, 10-40 GB/s); over TCP on
// loopback, where a message costs tens of times more, a fiftieth of that.
long default_iterations(const std::string& kind, size_t bytes, const PeerOptions& opt) {
  if (opt.iterations > 0) return opt.iterations;
  double b = static_cast<double>(std::max<size_t>(bytes, 1));
  long n = opt.quick ? 20000 : 2000000;
  if (is_latency(kind)) n = opt.quick ? 2000 : 200000;
  if (is_bandwidth(kind))
    n = opt.quick ? std::clamp(static_cast<long>(2e8 / b), 20L, 5000L)
                  : std::clamp(static_cast<long>(2e10 / b), 200L, 1000000L);
  return opt.tcp && !opt.quick ? std::max(100L, n / 50) : n;
}

// Last characters of a tool's output on one line, for a why_unavailable.
std::string tail(const std::string& out, size_t n = 240) {
  std::string t = out.size() > n ? out.substr(out.size() - n) : out;
  std::replace(t.begin(), t.end(), '\n', ' ');
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

// --- processes -----------------------------------------------------------------------------

}  // namespace

// A program a command started (outside the file's private names: BackgroundCommand::Impl holds
// one).
struct Child {
  pid_t pid = -1;
  std::string out_path;  // stdout and stderr
  bool done = false;
  bool timed_out = false;
  int status = -1;  // exit status, or 128 + signal
  std::string output;
  Clock::time_point started = Clock::now();
  double seconds = 0;    // from spawn to exit
  long max_rss_kib = 0;  // the child's peak resident set (its own, not its children's)
};

namespace {

// fork/exec into its own process group (so a timeout kills everything it started), dying with
// us (PR_SET_PDEATHSIG), output to a temp file so no pipe can fill up and block it.
Result<Child> spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Child c;
  char tmpl[] = "/tmp/galaxy-peer-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) {
    return make_error(Code::kIoError, 9600,
                      fmt::format("mkstemp {}: {}", tmpl, std::strerror(errno)));
  }
  c.out_path = tmpl;
  // Everything the child touches is built before fork: only async-signal-safe calls after it.
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool overridden = std::any_of(env.begin(), env.end(), [&](const std::string& o) {
      return kv.substr(0, kv.find('=') + 1) == std::string_view(o).substr(0, o.find('=') + 1);
    });
    if (!overridden) envs.emplace_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> argp, envp;
  for (const auto& a : argv) argp.push_back(const_cast<char*>(a.c_str()));
  argp.push_back(nullptr);
  for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    ::unlink(tmpl);
    return make_error(Code::kIoError, 9601,
                      fmt::format("fork for {}: {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(argp[0], argp.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from here: no race with the kill below
  ::close(fd);
  c.pid = pid;
  return c;
}

void collect_output(Child& c) {
  std::ifstream in(c.out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  c.output = ss.str();
  ::unlink(c.out_path.c_str());
}

// Every process below `root` (ppid links in /proc/<pid>/stat), listed before any is killed:
// mpirun's ranks leave its process group and would outlive it.
std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> links;  // (pid, ppid)
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    size_t rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(stat.substr(rp + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid) links.emplace_back(std::stoi(name), static_cast<pid_t>(ppid));
  }
  std::vector<pid_t> out{root};
  for (size_t i = 0; i < out.size(); ++i) {
    for (const auto& [pid, ppid] : links) {
      if (ppid == out[i]) out.push_back(pid);
    }
  }
  out.erase(out.begin());
  return out;
}

// Waits until the child exits or `deadline`; then kills its process group and descendants.
void wait_child(Child& c, Clock::time_point deadline) {
  if (c.done || c.pid < 0) return;
  int st = 0;
  struct rusage ru {};
  for (;;) {
    pid_t r = ::wait4(c.pid, &st, WNOHANG, &ru);
    if (r == c.pid) break;
    if (r < 0 && errno != EINTR) {
      st = -1;
      break;
    }
    if (Clock::now() >= deadline) {
      auto below = descendants(c.pid);
      ::kill(-c.pid, SIGKILL);
      for (pid_t p : below) ::kill(p, SIGKILL);
      ::wait4(c.pid, &st, 0, &ru);
      c.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  c.seconds = std::chrono::duration<double>(Clock::now() - c.started).count();
  c.max_rss_kib = ru.ru_maxrss;
  ::kill(-c.pid, SIGKILL);  // helpers left in its group
  c.done = true;
  c.status = st < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  collect_output(c);
}

bool child_running(const Child& c) {
  int st = 0;
  return ::waitpid(c.pid, &st, WNOHANG) == 0;
}

// A TCP port nobody listens on now (the kernel's choice for an ephemeral bind).
Result<uint16_t> free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) {
    return make_error(Code::kIoError, 9602, fmt::format("socket: {}", std::strerror(errno)));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int rc = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc == 0) rc = ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  int err = errno;
  ::close(s);
  if (rc != 0) {
    return make_error(Code::kIoError, 9603,
                      fmt::format("bind 127.0.0.1:0: {}", std::strerror(err)));
  }
  return static_cast<uint16_t>(ntohs(a.sin_port));
}

// Reads /proc/net/tcp{,6} rather than connecting: the servers accept exactly one connection,
// so a probe would be taken for the client.
bool port_listening(uint16_t port) {
  std::string want = fmt::format(":{:04X}", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, state;
      if (!(ls >> sl >> local >> remote >> state)) continue;
      if (state == "0A" && local.ends_with(want)) return true;
    }
  }
  return false;
}

struct PairOutput {
  std::string server, client;
  std::string command;
};

std::string env_prefix(const std::vector<std::string>& env) {
  std::string s;
  for (const auto& e : env) s += e + " ";
  return s;
}

// Server on a free port, client once the server listens; up to 3 attempts when the client
// cannot connect (the port may have been taken in between).
Result<PairOutput> run_pair(const std::vector<std::string>& env,
                            const std::function<std::vector<std::string>(uint16_t, bool)>& argv,
                            int timeout_s) {
  Error last;  // set by every attempt
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto port = free_port();
    if (!port) return port.error();
    auto sargv = argv(*port, true);
    auto cargv = argv(*port, false);
    PairOutput out;
    out.command = env_prefix(env) + join(sargv) + " &  " + env_prefix(env) + join(cargv);
    auto start = Clock::now();
    auto deadline = start + std::chrono::seconds(timeout_s);
    auto server = spawn(sargv, env);
    if (!server) return server.error();
    while (!port_listening(*port) && child_running(*server) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!port_listening(*port)) {
      wait_child(*server, Clock::now());
      last = make_error(Code::kIoError, 9605,
                        fmt::format("server not listening on port {} (status {}): {}; command: {}",
                                    *port, server->status, tail(server->output), out.command));
      continue;
    }
    auto client = spawn(cargv, env);
    if (!client) {
      wait_child(*server, Clock::now());
      return client.error();
    }
    wait_child(*client, deadline);
    // After a good client the server finishes on its own; after a failed one it would wait.
    bool client_ok = !client->timed_out && client->status == 0;
    wait_child(*server, Clock::now() + std::chrono::seconds(client_ok ? 10 : 0));
    out.server = server->output;
    out.client = client->output;
    if (client->timed_out) {
      return make_error(Code::kTimeout, 9606,
                        fmt::format("timed out after {} s; command: {}", timeout_s, out.command));
    }
    if (client->status != 0) {
      last = make_error(Code::kIoError, 9607,
                        fmt::format("client exit status {}: {}; command: {}", client->status,
                                    tail(client->output), out.command));
      bool connect_failure = client->output.find("onnect") != std::string::npos ||
                             client->output.find("refused") != std::string::npos;
      if (connect_failure) continue;
      return last;
    }
    return out;
  }
  return last;
}

Result<CommandOutput> run_to_end(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, int timeout_s) {
  auto c = spawn(argv, env);
  if (!c) return c.error();
  wait_child(*c, Clock::now() + std::chrono::seconds(timeout_s));
  if (c->timed_out)
    return make_error(
        Code::kTimeout, 9608,
        fmt::format("timed out after {} s; command: {}", timeout_s, env_prefix(env) + join(argv)));
  return CommandOutput{c->status, std::move(c->output), c->seconds, c->max_rss_kib};
}

Result<std::string> run_single(const std::vector<std::string>& argv,
                               const std::vector<std::string>& env, int timeout_s) {
  auto r = run_to_end(argv, env, timeout_s);
  if (!r) return r.error();
  if (r->status != 0) {
    return make_error(Code::kIoError, 9609,
                      fmt::format("exit status {}: {}; command: {}", r->status, tail(r->output),
                                  env_prefix(env) + join(argv)));
  }
  return std::move(r->output);
}

// --- repetitions ---------------------------------------------------------------------------

PeerSample start_sample(const std::string& peer, const PeerTest& t) {
  PeerSample s;
  s.peer = peer;
  s.test = t.name();
  s.unit = unit_of(t.kind);
  return s;
}

PeerSample unavailable(PeerSample s, std::string why) {
  s.available = false;
  s.why_unavailable = std::move(why);
  return s;
}

PeerSample bad_test(const std::string& peer, const std::string& test, const Error& e) {
  PeerSample s;
  s.peer = peer;
  s.test = test;
  return unavailable(std::move(s), e.to_string());
}

// Runs `once` opt.repetitions times (1 when quick); the sample is available if any run gave a
// figure, with the failures named in its note.
PeerSample repeat(PeerSample s, const PeerOptions& opt,
                  const std::function<Result<double>(std::string& command)>& once) {
  int reps = opt.quick ? 1 : std::max(1, opt.repetitions);
  std::string failures;
  int failed = 0;
  for (int r = 0; r < reps; ++r) {
    auto v = once(s.command);
    if (v) {
      s.runs.push_back(*v);
    } else {
      ++failed;
      failures = v.error().to_string();
      if (v.error().code == Code::kTimeout) break;  // the next would time out too
    }
  }
  if (s.runs.empty()) return unavailable(std::move(s), failures);
  s.available = true;
  s.median = median_of(s.runs);
  if (failed) {
    if (!s.note.empty()) s.note += "; ";
    s.note += fmt::format("{} of {} repetitions failed: {}", failed, reps, failures);
  }
  return s;
}

double to_double(std::string_view s) {
  std::string str(s);
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  return end == str.c_str() ? -1 : v;
}

std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream ss{std::string(line)};
  std::string w;
  while (ss >> w) out.push_back(w);
  return out;
}

std::string mpi_pingpong_path(const PeerOptions& opt) {
  if (!opt.mpi_pingpong.empty()) return opt.mpi_pingpong;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "mpi_pingpong";
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "mpi_pingpong";
}

}  // namespace

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string find_in_path(const std::string& name) {
  std::stringstream ss(env_string_or_default("PATH"));
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env, int timeout_s) {
  return run_to_end(argv, env, timeout_s);
}

struct BackgroundCommand::Impl {
  Child child;
};

BackgroundCommand::BackgroundCommand(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<BackgroundCommand>> BackgroundCommand::start(
    const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  auto c = spawn(argv, env);
  if (!c) return c.error();
  auto impl = std::make_unique<Impl>();
  impl->child = std::move(*c);
  return std::make_unique<BackgroundCommand>(std::move(impl));
}

BackgroundCommand::~BackgroundCommand() {
  stop();
}

bool BackgroundCommand::running() const {
  return !impl_->child.done && child_running(impl_->child);
}

std::string BackgroundCommand::stop() {
  if (impl_->child.done) return "";
  wait_child(impl_->child, Clock::now());  // past its deadline: killed with its group
  return impl_->child.output;
}

// --- names and parsers ---------------------------------------------------------------------

std::string PeerTest::name() const {
  return fmt::format("{}_{}", kind, bytes);
}

Result<PeerTest> parse_peer_test(const std::string& test, size_t bytes) {
  PeerTest t;
  t.kind = test;
  size_t us = test.rfind('_');
  if (us != std::string::npos && us + 1 < test.size() &&
      std::all_of(test.begin() + static_cast<long>(us) + 1, test.end(),
                  [](char ch) { return ch >= '0' && ch <= '9'; })) {
    size_t named = std::strtoull(test.c_str() + us + 1, nullptr, 10);
    t.kind = test.substr(0, us);
    if (bytes != 0 && bytes != named) {
      return make_error(Code::kInvalidArgument, 9610,
                        fmt::format("test {} names {} bytes but bytes = {}", test, named, bytes));
    }
    bytes = named;
  }
  if (std::find(std::begin(kKinds), std::end(kKinds), t.kind) == std::end(kKinds)) {
    return make_error(Code::kInvalidArgument, 9611,
                      fmt::format("test = {}: unknown kind {} (mp_lat, put_lat, get_lat, put_bw, "
                                  "get_bw, msg_rate, tag_rate, msg_bw)",
                                  test, t.kind));
  }
  if (bytes == 0 || bytes > (size_t{1} << 30)) {
    return make_error(Code::kOutOfRange, 9612,
                      fmt::format("test {}: bytes = {} outside 1..2^30", test, bytes));
  }
  t.bytes = bytes;
  return t;
}

Result<UcxFinal> parse_ucx_final(std::string_view output) {
  std::istringstream in{std::string(output)};
  std::string line;
  while (std::getline(in, line)) {
    auto w = split_ws(line);
    if (w.size() < 9 || w[0] != "Final:") continue;
    double v[8];
    for (int i = 0; i < 8; ++i) v[i] = to_double(w[static_cast<size_t>(i) + 1]);
    if (std::any_of(v, v + 8, [](double x) { return x < 0; })) continue;
    return UcxFinal{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  }
  return make_error(
      Code::kMalformed, 9613,
      fmt::format("ucx_perftest output has no Final: row: {}", tail(std::string(output))));
}

Result<FiPingpongRow> parse_fi_pingpong(std::string_view output) {
  // bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
  std::istringstream in{std::string(output)};
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    auto w = split_ws(line);
    if (!w.empty() && w[0] == "bytes") {
      header = true;
      continue;
    }
    if (!header || w.size() != 8) continue;
    FiPingpongRow r;
    r.mb_per_s = to_double(w[5]);
    r.usec_per_xfer = to_double(w[6]);
    r.mxfers_per_s = to_double(w[7]);
    // The size column is abbreviated ("1m", "64k"); the caller knows the exact one.
    r.bytes = to_double(w[0]);
    if (r.mb_per_s < 0 || r.usec_per_xfer < 0) continue;
    return r;
  }
  return make_error(
      Code::kMalformed, 9614,
      fmt::format("fi_pingpong output has no result row: {}", tail(std::string(output))));
}

Result<MpiPingpongLine> parse_mpi_pingpong(std::string_view output) {
  std::istringstream in{std::string(output)};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("mpi_pingpong ")) continue;
    MpiPingpongLine m;
    int found = 0;
    for (const auto& kv : split_ws(line)) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      std::string k = kv.substr(0, eq);
      double v = to_double(std::string_view(kv).substr(eq + 1));
      double* field = k == "lat_us"      ? &m.lat_us
                      : k == "bw_mbps"   ? &m.bw_mbps
                      : k == "rate_mmps" ? &m.rate_mmps
                                         : nullptr;
      if (field && v >= 0) {
        *field = v;
        ++found;
      }
    }
    if (found == 3) return m;
  }
  return make_error(
      Code::kMalformed, 9615,
      fmt::format("mpi_pingpong output has no result line: {}", tail(std::string(output))));
}

// --- peers ---------------------------------------------------------------------------------

PeerSample run_ucx(const std::string& test, size_t bytes, const PeerOptions& opt) {
  auto t = parse_peer_test(test, bytes);
  if (!t) return bad_test("ucx", test, t.error());
  PeerSample s = start_sample(opt.tcp ? "ucx-tcp" : "ucx", *t);
  std::string exe = find_in_path("ucx_perftest");
  if (exe.empty()) {
    return unavailable(std::move(s), make_error(Code::kNotFound, 9616,
                                                "ucx_perftest not installed (apt ucx-utils)")
                                         .to_string());
  }
  // The best shared-memory UCP variant of each test (ucx_perftest -h).
  std::string ucx_test;
  std::vector<std::string> extra;
  const std::string& k = t->kind;
  if (k == "mp_lat") {
    ucx_test = "tag_lat";
    s.note = "UCP tag-matched ping-pong; ucx_perftest halves the round trip; 50th percentile";
  } else if (k == "put_lat") {
    ucx_test = "ucp_put_lat";
    s.note = "UCP put ping-pong (each side puts, the other polls); one-way; 50th percentile";
  } else if (k == "get_lat") {
    ucx_test = "ucp_get";
    s.note = "completion time of one UCP get (not halved); 50th percentile";
  } else if (k == "put_bw") {
    ucx_test = "ucp_put_bw";  // 32 puts outstanding by default
  } else if (k == "get_bw") {
    ucx_test = "ucp_get";
    extra = {"-O", "32"};  // ucp_get defaults to 1 outstanding: a latency test
  } else if (k == "msg_rate") {
    ucx_test = "ucp_am_bw";
    s.note = "UCP active messages, streamed";
  } else {
    ucx_test = "tag_bw";
    s.note = "UCP tag-matched sends, streamed";
  }
  long iters = default_iterations(k, t->bytes, opt);
  long warmup = std::clamp(iters / 10, 10L, 10000L);
  std::vector<std::string> env = {opt.tcp ? "UCX_TLS=tcp" : "UCX_TLS=sm,self"};
  auto argv = [&](uint16_t port, bool server) {
    std::vector<std::string> a = {exe,
                                  "-t",
                                  ucx_test,
                                  "-s",
                                  std::to_string(t->bytes),
                                  "-n",
                                  std::to_string(iters),
                                  "-w",
                                  std::to_string(warmup),
                                  "-p",
                                  std::to_string(port)};
    a.insert(a.end(), extra.begin(), extra.end());
    if (!server) a.push_back("127.0.0.1");
    return a;
  };
  return repeat(std::move(s), opt, [&](std::string& command) -> Result<double> {
    auto pair = run_pair(env, argv, opt.timeout_s);
    if (!pair) return pair.error();
    command = pair->command;
    auto f = parse_ucx_final(pair->client);
    if (!f) f = parse_ucx_final(pair->server);
    if (!f) return f.error();
    if (is_latency(k)) return f->lat_p50_us;
    if (is_bandwidth(k)) return f->bw_overall_mibps * 1.048576;
    return f->rate_overall / 1e6;
  });
}

PeerSample run_libfabric(const std::string& test, size_t bytes, const PeerOptions& opt) {
  auto t = parse_peer_test(test, bytes);
  if (!t) return bad_test("libfabric-shm", test, t.error());
  PeerSample s = start_sample(opt.tcp ? "libfabric-tcp" : "libfabric-shm", *t);
  std::string exe = find_in_path("fi_pingpong");
  if (exe.empty()) {
    return unavailable(std::move(s), make_error(Code::kNotFound, 9617,
                                                "fi_pingpong not installed (apt libfabric-bin)")
                                         .to_string());
  }
  const std::string& k = t->kind;
  if (k != "mp_lat" && k != "put_bw" && k != "msg_bw") {
    std::string rma = find_in_path("fi_rma_bw").empty() ? "fabtests (fi_rma_bw) not installed"
                                                        : "fi_rma_bw is not wired in";
    Error e = make_error(Code::kUnsupported, 9618,
                         fmt::format("{}: fi_pingpong measures send/recv with one message in "
                                     "flight (no RMA, no streaming rate); {}",
                                     s.test, rma));
    return unavailable(std::move(s), e.to_string());
  }
  if (k == "put_bw" || k == "msg_bw") {
    s.note =
        "fi_pingpong send/recv ping-pong bandwidth (size / one-way time, one message in "
        "flight), not an RMA put stream";
  } else {
    s.note = "fi_pingpong rdm endpoint; one-way (half round trip)";
  }
  long iters = std::min(default_iterations(k, t->bytes, opt), 1000000L);
  // shm supports only the reliable datagram endpoint (fi_info -p shm: FI_EP_RDM).
  auto argv = [&](uint16_t port, bool server) {
    std::vector<std::string> a = {exe,
                                  "-p",
                                  opt.tcp ? "tcp" : "shm",
                                  "-e",
                                  opt.tcp ? "msg" : "rdm",
                                  "-S",
                                  std::to_string(t->bytes),
                                  "-I",
                                  std::to_string(iters)};
    if (server) {
      a.insert(a.end(), {"-B", std::to_string(port)});
    } else {
      a.insert(a.end(), {"-P", std::to_string(port), "127.0.0.1"});
    }
    return a;
  };
  double size = static_cast<double>(t->bytes);
  return repeat(std::move(s), opt, [&](std::string& command) -> Result<double> {
    auto pair = run_pair({}, argv, opt.timeout_s);
    if (!pair) return pair.error();
    command = pair->command;
    auto r = parse_fi_pingpong(pair->client);
    if (!r) return r.error();
    if (k == "put_bw" || k == "msg_bw") return r->mb_per_s;
    // usec/xfer has 2 decimals; MB/sec = size / one-way us carries more digits.
    return r->mb_per_s > 0 ? size / r->mb_per_s : r->usec_per_xfer;
  });
}

PeerSample run_openmpi(const std::string& test, size_t bytes, const PeerOptions& opt) {
  auto t = parse_peer_test(test, bytes);
  if (!t) return bad_test("openmpi", test, t.error());
  PeerSample s = start_sample("openmpi", *t);
  std::string mpirun = find_in_path("mpirun");
  if (mpirun.empty()) {
    return unavailable(
        std::move(s),
        make_error(Code::kNotFound, 9619, "mpirun not installed (apt openmpi-bin)").to_string());
  }
  std::string bin = mpi_pingpong_path(opt);
  if (::access(bin.c_str(), X_OK) != 0) {
    return unavailable(
        std::move(s),
        make_error(Code::kNotFound, 9620,
                   fmt::format("{} not built (bench/peers needs MPI at configure time)", bin))
            .to_string());
  }
  const std::string& k = t->kind;
  if (k == "msg_bw" || opt.tcp)
    return unavailable(std::move(s), make_error(Code::kUnsupported, 9626,
                                                fmt::format("{}: bench/peers/mpi_pingpong.c has no "
                                                            "streamed-send mode or TCP run",
                                                            s.test))
                                         .to_string());
  std::string mode = k == "mp_lat" ? "lat" : k == "msg_rate" || k == "tag_rate" ? "rate" : k;
  if (k == "mp_lat") {
    s.note = "MPI_Send/MPI_Recv ping-pong, half round trip";
  } else if (k == "put_lat" || k == "get_lat") {
    s.note = "MPI_Put/MPI_Get + MPI_Win_flush completion time (osc sm), not halved";
  } else if (is_bandwidth(k)) {
    s.note = "64 operations, then MPI_Win_flush (osc sm)";
  } else {
    s.note = "64 MPI_Isend, then a 1-byte ack";
  }
  s.note += "; pml ob1, btl self,vader (Open MPI's own shared memory)";
  long iters = default_iterations(k, t->bytes, opt);
  // ob1 + vader: Open MPI's own shared-memory path; its default pml (ucx) would re-measure UCX.
  std::vector<std::string> argv = {mpirun,
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   "2",
                                   "--mca",
                                   "pml",
                                   "ob1",
                                   "--mca",
                                   "btl",
                                   "self,vader",
                                   bin,
                                   mode,
                                   std::to_string(t->bytes),
                                   std::to_string(iters)};
  return repeat(std::move(s), opt, [&](std::string& command) -> Result<double> {
    command = join(argv);
    auto out = run_single(argv, {}, opt.timeout_s);
    if (!out) return out.error();
    auto m = parse_mpi_pingpong(*out);
    if (!m) return m.error();
    return is_latency(k) ? m->lat_us : is_bandwidth(k) ? m->bw_mbps : m->rate_mmps;
  });
}

void add_repetition(std::vector<PeerSample>& all, const std::vector<PeerSample>& now) {
  if (all.empty()) {
    all = now;
    return;
  }
  for (size_t i = 0; i < now.size() && i < all.size(); ++i)
    if (now[i].available && all[i].available)
      all[i].runs.insert(all[i].runs.end(), now[i].runs.begin(), now[i].runs.end());
}

nlohmann::json peer_json(const PeerSample& s) {
  nlohmann::json j{{"peer", s.peer}, {"available", s.available}};
  if (!s.available) {
    j["why_unavailable"] = s.why_unavailable;
    return j;
  }
  j["median"] = s.median;
  j["runs"] = s.runs;
  j["command"] = s.command;
  if (!s.note.empty()) j["note"] = s.note;
  return j;
}

std::vector<PeerSample> run_peers(const std::string& test, size_t bytes, const PeerOptions& opt) {
  return {run_ucx(test, bytes, opt), run_libfabric(test, bytes, opt),
          run_openmpi(test, bytes, opt)};
}

Result<PeerChoice> parse_peer_list(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(Code::kInvalidArgument, 9621,
                      fmt::format("--peers = '{}': {} (a comma-separated list of ucx, libfabric, "
                                  "openmpi, or none)",
                                  text, why));
  };
  PeerChoice c;
  bool none = false;
  size_t names = 0;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    ++names;
    bool* pick = name == "ucx"         ? &c.ucx
                 : name == "libfabric" ? &c.libfabric
                 : name == "openmpi"   ? &c.openmpi
                 : name == "none"      ? &none
                                       : nullptr;
    if (!pick) return bad(fmt::format("'{}' is not a peer", name));
    if (*pick) return bad(fmt::format("'{}' is given twice", name));
    *pick = true;
  }
  if (names == 0 || text.back() == ',') return bad("a peer name is missing");
  if (none && names > 1) return bad("none goes alone");
  return c;
}

// --- physical limits -----------------------------------------------------------------------

double memcpy_mbps(size_t bytes) {
  if (bytes == 0) return 0;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  size_t reps = std::max<size_t>(3, (size_t{1} << 30) / bytes);  // ~1 GiB copied per pass
  std::vector<double> passes;
  for (int pass = 0; pass < 3; ++pass) {
    auto t0 = Clock::now();
    for (size_t r = 0; r < reps; ++r) {
      std::memcpy(dst.data(), src.data(), bytes);
      __asm__ __volatile__("" : : "r"(dst.data()) : "memory");  // keep every copy
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    passes.push_back(static_cast<double>(bytes) * static_cast<double>(reps) / s / 1e6);
  }
  return median_of(passes);
}

double cacheline_pingpong_ns(int iterations) {
  if (iterations <= 0) return 0;
  void* mem = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 0;
  auto* flag = new (mem) std::atomic<uint64_t>(0);
  const uint64_t warmup = 1000;
  const uint64_t rounds = warmup + static_cast<uint64_t>(iterations);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::munmap(mem, 4096);
    return 0;
  }
  // Spin without pause (it adds ~40 ns); yield now and then in case both share one core.
  auto await = [&](uint64_t want) {
    for (uint32_t k = 1; flag->load(std::memory_order_acquire) != want; ++k) {
      if ((k & 0xfffff) == 0) {
        ::sched_yield();
        if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) != 0) return false;
      }
    }
    return true;
  };
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    for (uint64_t i = 0; i < rounds; ++i) {
      await(2 * i + 1);
      flag->store(2 * i + 2, std::memory_order_release);
    }
    ::_exit(0);
  }
  bool ok = true;
  Clock::time_point t0;
  for (uint64_t i = 0; i < rounds && ok; ++i) {
    if (i == warmup) t0 = Clock::now();
    flag->store(2 * i + 1, std::memory_order_release);
    ok = await(2 * i + 2);
  }
  double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  if (!ok) ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::munmap(mem, 4096);
  return ok ? ns / (2.0 * iterations) : 0;
}

}  // namespace galaxy::cli
