// The complete example of docs/glex.md (examples/glex_example.c), unchanged, on the simulated
// TH-2 fabric between two NICs 9 hops apart (links on the shortest path, TH-2's diameter) (a
// simulation server, as `galaxy simd` runs it) and on a live fabric: the two runs print the same,
// chip ids aside. Under the sanitizers the simulated side is a 3-level fat tree's farthest pair:
// the same code paths, without a minute of instrumented TH-2 bring-up.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fabric/builders.h"
#include "glex/sim_server.h"
#include "live_fixture.h"
#include "nm/route_load.h"
#include "nm/routing.h"
#include "nmd/session.h"

namespace galaxy::live::testing {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GALAXY_TEST_SANITIZED 1
#endif
#endif
#if defined(GALAXY_TEST_SANITIZED) || defined(__SANITIZE_ADDRESS__)
constexpr const char* kFabric = "fattree:k=4,levels=3";
constexpr uint32_t kFarthest = 5;
#else
constexpr const char* kFabric = "th2";
constexpr uint32_t kFarthest = 9;
#endif

std::atomic<bool> g_server_stop{false};

// The server process: bring-up as the management server does it, then serve.
bool serve(const std::string& fabric, const std::string& socket) {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_server_stop.store(true); };
  sigaction(SIGTERM, &sa, nullptr);
  nmd::SessionOptions so;
  so.fabric = fabric;
  auto s = nmd::open_session(so);
  if (!s.ok() || !nmd::discover(*s, so).ok()) return false;
  auto routes = nm::compute_routes(s->discovery.map, "fattree");
  if (!routes.ok()) return false;
  auto load = nm::load_routes(*s->requester, s->discovery.map, *routes);
  if (!load.ok() || load->failed != 0) return false;
  s->requester.reset();
  s->port.reset();
  s->device.reset();
  auto server = glex::SimServer::listen(*s->fabric, socket);
  if (!server.ok()) return false;
  (*server)->run(g_server_stop);
  return true;
}

pid_t run_example(const std::vector<std::pair<std::string, std::string>>& env, int rank,
                  const std::string& dir, const std::string& out) {
  const std::string exe =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "glex_example").string();
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    setenv("GLEX_RANK", std::to_string(rank).c_str(), 1);
    setenv("GLEX_SIZE", "2", 1);
    setenv("GLEX_RENDEZVOUS", dir.c_str(), 1);
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    execl(exe.c_str(), exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// "node 123" -> "node N": the fabrics number their NICs differently.
std::string without_node_ids(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size();) {
    if (in.compare(i, 5, "node ") == 0 && i + 5 < in.size() && std::isdigit(in[i + 5])) {
      out += "node N";
      i += 5;
      while (i < in.size() && std::isdigit(in[i])) ++i;
    } else {
      out += in[i++];
    }
  }
  return out;
}

// Both ranks' output, each with chip ids replaced.
std::string run_pair(const std::vector<std::pair<std::string, std::string>>& env0,
                     const std::vector<std::pair<std::string, std::string>>& env1) {
  char tmpl[] = "/tmp/galaxy-example-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  pid_t a = run_example(env0, 0, dir, dir + "/out0");
  pid_t b = run_example(env1, 1, dir, dir + "/out1");
  EXPECT_EQ(wait_exit(a, 60), 0) << "rank 0";
  EXPECT_EQ(wait_exit(b, 60), 0) << "rank 1";
  std::string all;
  for (const char* f : {"/out0", "/out1"}) {
    std::ifstream in(dir + f);
    std::stringstream ss;
    ss << in.rdbuf();
    all += without_node_ids(ss.str());
  }
  std::filesystem::remove_all(dir);
  return all;
}

TEST(SimExample, SameOutputOnSimTh2NineHopsApartAsOnALiveFabric) {
  // Two NICs as far apart as TH-2 has them: 9 hops (8 NRCs) on the shortest path.
  auto topo = fabric::build_topology(kFabric);
  ASSERT_TRUE(topo.ok());
  const uint32_t a = topo->nic_node(0);
  const auto dist = topo->bfs_distances(a);
  uint32_t b = a;
  for (uint32_t i = 0; i < topo->num_nics(); ++i)
    if (dist[topo->nic_node(i)] > dist[b]) b = topo->nic_node(i);
  ASSERT_EQ(dist[b], kFarthest) << "hops between NIC " << a << " and NIC " << b;

  char stmpl[] = "/tmp/galaxy-simd-XXXXXX";
  const std::string sdir = mkdtemp(stmpl);
  const std::string socket = sdir + "/sock";
  const std::string sim_fabric = std::string("sim:") + kFabric;
  pid_t server = spawn([&] { return serve(sim_fabric, socket); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(socket) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(socket)) << "the simulation server did not come up";
  const std::string sim = run_pair(
      {{"GLEX_FABRIC", sim_fabric}, {"GLEX_SIM_SOCKET", socket}, {"GLEX_NIC", std::to_string(a)}},
      {{"GLEX_FABRIC", sim_fabric}, {"GLEX_SIM_SOCKET", socket}, {"GLEX_NIC", std::to_string(b)}});
  kill(server, SIGTERM);
  EXPECT_EQ(wait_exit(server, 30), 0);
  std::filesystem::remove_all(sdir);

  LiveFabricUnderTest f(1);
  ASSERT_TRUE(f.bring_up().ok());
  const std::vector<std::pair<std::string, std::string>> live{{"GLEX_FABRIC", f.name()},
                                                              {"GLEX_HOST", f.host_name(0)}};
  const std::string on_live = run_pair(live, live);

  EXPECT_NE(sim.find("rank 1: event 42, buf[3..] = 'hello, galaxy'"), std::string::npos) << sim;
  EXPECT_NE(sim.find("put of 13 bytes, cookie 7: success"), std::string::npos) << sim;
  EXPECT_EQ(sim, on_live);
}

}  // namespace
}  // namespace galaxy::live::testing
