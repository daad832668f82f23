// A simulated fabric served by a simulation server (glex/sim_server.h) on a thread of this
// process: its clients (glex/sim_client.h) are hosts in other threads, each waiting on the others
// as separate programs would.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "../engine/sim_test_util.h"
#include "glex/sim_server.h"

namespace galaxy::glex::testing {

struct Served {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex::SimServer> server;
  std::atomic<bool> stop{false};
  std::thread thread;
  std::string path;
  explicit Served(const std::string& spec = "fattree:k=4,levels=2") {
    fabric = sim::testing::make(spec);
    sim::testing::program_minimal_routes(*fabric);
    char tmpl[] = "/tmp/galaxy-simsrv-XXXXXX";
    path = std::string(mkdtemp(tmpl)) + "/sock";
    server = std::move(glex::SimServer::listen(*fabric, path).value());
    setenv("GLEX_SIM_SOCKET", path.c_str(), 1);
    thread = std::thread([this] { server->run(stop); });
  }
  ~Served() {
    stop = true;
    thread.join();
    server.reset();
    unsetenv("GLEX_SIM_SOCKET");
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  }
  uint32_t nic(uint32_t i) const { return fabric->topology().nic_node(i); }
  int raw() const {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  }
};

}  // namespace galaxy::glex::testing
