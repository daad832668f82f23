// Galaxy's libfabric provider (libgalaxy-fi.so) as applications meet it, each a separate
// process that loads it through FI_PROVIDER_PATH: the provider's own checks (tests/fi/fi_check.c)
// on a simulated fabric, on one live host and across two; libfabric's fi_pingpong with data
// verification; Open MPI's programs under mpirun (pml cm, mtl ofi) on one host and across two,
// with the same output as over Open MPI's own transports; and the errors a user meets (a wrong
// FI_PROVIDER_PATH, an invalid GLEX_* variable, a rank that dies).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../glex/served_fabric.h"
#include "../integration/live_fixture.h"

namespace galaxy::fi::testing {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GALAXY_TEST_SANITIZED 1
#endif
#endif
#if defined(GALAXY_TEST_SANITIZED) || defined(__SANITIZE_ADDRESS__)
// The instrumented provider loads only into programs that carry the sanitizer runtime, such as
// fi_check built here; libfabric's own tools and mpirun's programs do not (the release build
// runs them).
#define SKIP_UNINSTRUMENTED() GTEST_SKIP() << "the release build runs it"
#else
#define SKIP_UNINSTRUMENTED()
#endif

using live::testing::LiveFabricUnderTest;
using live::testing::wait_exit;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string bin_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}
// Where libgalaxy-fi.so is: <build>/lib/libfabric (the binaries are in <build>/bin).
std::string provider_dir() {
  return (std::filesystem::path(bin_dir()).parent_path() / "lib" / "libfabric").string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv with env (on top of ours) in a new process group, output into `out`.
pid_t spawn(const std::vector<std::string>& argv, const Env& env, const std::string& out) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed mid-way leaves nothing spinning
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  return pid;
}

// Waits; a process still running at the deadline is killed with its group (-1 returned).
int finish(pid_t pid, int seconds) {
  const int rc = wait_exit(pid, seconds);
  if (rc < 0) {
    kill(-pid, SIGKILL);
    wait_exit(pid, 5);
  }
  return rc;
}

std::string fresh_dir(const char* what) {
  std::string t = fmt::format("/tmp/galaxy-fi-{}-XXXXXX", what);
  return mkdtemp(t.data());
}

Env provider_env(const std::string& fabric, const std::string& host) {
  Env e{{"FI_PROVIDER_PATH", provider_dir()}, {"FI_PROVIDER", "galaxy"}, {"GLEX_FABRIC", fabric}};
  if (!host.empty()) e.push_back({"GLEX_HOST", host});
  return e;
}

// Both ranks of fi_check, each with its own environment.
void fi_check(const Env& a, const Env& b, bool small = false) {
  const std::string dir = fresh_dir("check");
  const std::string exe = bin_dir() + "/fi_check";
  std::vector<std::string> args{exe, "0", dir};
  if (small) args.push_back("small");
  pid_t p0 = spawn(args, a, dir + "/out0");
  args[1] = "1";
  pid_t p1 = spawn(args, b, dir + "/out1");
  EXPECT_EQ(finish(p0, 300), 0) << slurp(dir + "/out0");
  EXPECT_EQ(finish(p1, 300), 0) << slurp(dir + "/out1");
  for (const char* out : {"/out0", "/out1"}) {
    const std::string text = slurp(dir + out);
    for (const char* check :
         {"ok sizes", "ok order", "ok window", "ok tags truncate cancel peek claim", "ok msg",
          "ok rma write read inject writedata wrong-key", "ok bad-input counters",
          "passed: 0 failures"})
      EXPECT_NE(text.find(check), std::string::npos) << check << " in\n" << text;
  }
  std::filesystem::remove_all(dir);
}

TEST(FiProvider, ChecksPassOnASimulatedFabric) {
  glex::testing::Served served;
  const std::string f = "sim:fattree:k=4,levels=2";
  Env a = provider_env(f, ""), b = provider_env(f, "");
  a.push_back({"GLEX_NIC", std::to_string(served.nic(0))});
  b.push_back({"GLEX_NIC", std::to_string(served.nic(7))});
#if defined(GALAXY_TEST_SANITIZED) || defined(__SANITIZE_ADDRESS__)
  fi_check(a, b, true);  // every call an instrumented round trip to the simulation server
#else
  fi_check(a, b);
#endif
}

TEST(FiProvider, ChecksPassOnOneLiveHostAndAcrossTwo) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  fi_check(provider_env(f.name(), f.host_name(0)), provider_env(f.name(), f.host_name(0)));
  fi_check(provider_env(f.name(), f.host_name(0)), provider_env(f.name(), f.host_name(1)));
}

// A TCP port no one holds now (fi_pingpong's control connection).
int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &l);
  close(s);
  return ntohs(a.sin_port);
}

TEST(FiProvider, LibfabricsPingpongRunsAndVerifiesItsData) {
  SKIP_UNINSTRUMENTED();
  LiveFabricUnderTest f(1);
  ASSERT_TRUE(f.bring_up().ok());
  const std::string dir = fresh_dir("pingpong");
  const std::string port = std::to_string(free_port());
  const Env env = provider_env(f.name(), f.host_name(0));
  for (const char* kind : {"msg", "tagged"}) {
    // -c checks every byte; 64 B .. 1 MiB covers one MP, MP trains and the rendezvous.
    std::vector<std::string> args{"fi_pingpong", "-p", "galaxy", "-e", "rdm",
                                  "-m",          kind, "-c",     "-I", "20"};
    auto server = args, client = args;
    server.insert(server.end(), {"-B", port});
    client.insert(client.end(), {"-P", port, "127.0.0.1"});
    pid_t s = spawn(server, env, dir + "/server");
    usleep(300000);
    pid_t c = spawn(client, env, dir + "/client");
    EXPECT_EQ(finish(c, 60), 0) << slurp(dir + "/client");
    EXPECT_EQ(finish(s, 60), 0) << slurp(dir + "/server");
    const std::string out = slurp(dir + "/client");
    for (const char* size : {"64 ", "4k ", "64k ", "1m "})
      EXPECT_TRUE(std::regex_search(out, std::regex(std::string("\\n") + size + " +20 +=20 ")))
          << kind << " " << size << " in\n"
          << out;
  }
  std::filesystem::remove_all(dir);
}

TEST(FiProvider, AWrongProviderPathOrVariableIsNamed) {
  SKIP_UNINSTRUMENTED();
  const std::string dir = fresh_dir("badenv");
  // No provider where FI_PROVIDER_PATH points: fi_info says libfabric found no such provider.
  pid_t p = spawn({"fi_info", "-p", "galaxy"}, {{"FI_PROVIDER_PATH", "/nonexistent/galaxy"}},
                  dir + "/out");
  EXPECT_NE(finish(p, 30), 0);
  EXPECT_NE(slurp(dir + "/out").find("fi_getinfo: -61"), std::string::npos) << slurp(dir + "/out");
  // The provider is there but GLEX_NIC is not a number: the provider declines and says why on
  // stderr, naming the variable and the value.
  LiveFabricUnderTest f(1);
  ASSERT_TRUE(f.bring_up().ok());
  p = spawn(
      {"fi_info", "-p", "galaxy"},
      {{"FI_PROVIDER_PATH", provider_dir()}, {"GLEX_FABRIC", f.name()}, {"GLEX_NIC", "seven"}},
      dir + "/out");
  EXPECT_NE(finish(p, 30), 0);
  const std::string out = slurp(dir + "/out");
  EXPECT_NE(out.find("GLEX_NIC"), std::string::npos) << out;
  EXPECT_NE(out.find("seven"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// ---- Open MPI -----------------------------------------------------------------------------------
std::vector<std::string> mpirun_galaxy(const std::string& fabric, const std::string& host0,
                                       const std::string& host1, const std::string& prog,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> common{"--mca",  "pml",
                                  "cm",     "--mca",
                                  "mtl",    "ofi",
                                  "--mca",  "mtl_ofi_provider_include",
                                  "galaxy", "--mca",
                                  "btl",    "self,vader",
                                  "-x",     "FI_PROVIDER_PATH=" + provider_dir(),
                                  "-x",     "FI_PROVIDER=galaxy",
                                  "-x",     "GLEX_FABRIC=" + fabric};
  std::vector<std::string> v{"mpirun", "--allow-run-as-root", "--oversubscribe"};
  const std::string hosts[2] = {host0, host1};
  for (const std::string& host : hosts) {
    if (&host != &hosts[0]) v.push_back(":");
    v.insert(v.end(), common.begin(), common.end());
    v.insert(v.end(), {"-x", "GLEX_HOST=" + host, "-n", "1", prog});
    v.insert(v.end(), args.begin(), args.end());
  }
  return v;
}

std::string run_mpi(const std::vector<std::string>& argv, int* rc) {
  const std::string dir = fresh_dir("mpi");
  pid_t p = spawn(argv, {}, dir + "/out");
  *rc = finish(p, 120);
  std::string out = slurp(dir + "/out");
  std::filesystem::remove_all(dir);
  return out;
}

// The lines the program prints for its results (timings aside), sorted: the ranks print some
// of them and their order in mpirun's output is the order they arrived there.
std::string results(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("result ", 0) == 0) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  std::string r;
  for (const auto& l : lines) r += l + "\n";
  return r;
}

TEST(FiProviderMpi, ProgramsGiveOpenMpisOwnResultsOnOneHostAndAcrossTwo) {
  SKIP_UNINSTRUMENTED();
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  const std::string prog = bin_dir() + "/mpi_check";
  int rc = 0;
  const std::string own = run_mpi({"mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                                   "pml", "ob1", "--mca", "btl", "self,vader", "-n", "2", prog},
                                  &rc);
  ASSERT_EQ(rc, 0) << own;
  ASSERT_FALSE(results(own).empty()) << own;
  for (int hosts : {1, 2}) {
    const std::string out =
        run_mpi(mpirun_galaxy(f.name(), f.host_name(0), f.host_name(hosts - 1), prog, {}), &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(results(out), results(own)) << hosts << " host(s):\n" << out;
  }
}

TEST(FiProviderMpi, ARankThatDiesFailsItsPeerInsteadOfHangingIt) {
  SKIP_UNINSTRUMENTED();
  LiveFabricUnderTest f(1);
  ASSERT_TRUE(f.bring_up().ok());
  int rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = run_mpi(
      mpirun_galaxy(f.name(), f.host_name(0), f.host_name(0), bin_dir() + "/mpi_check", {"die"}),
      &rc);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(rc, 0) << out;
  EXPECT_LT(s, 60) << out;
}

}  // namespace
}  // namespace galaxy::fi::testing
