// The simulation server: one simulated fabric that several processes use at once through libglex
// (GLEX_FABRIC=sim:...), each on a NIC of its own. Every process is a sequential host with its
// own clock, as in the in-process device; the server runs the fabric conservatively: an event is
// handled only when no host could still act before it. A host that is computing between calls
// holds simulated time at its clock until its next call; a host that waits lets time run until
// what it waits for happens or its timeout (simulated) passes. The NICs reach each process's
// registered memory by cross-memory attach (sim_host.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sim/sim_fabric.h"

namespace galaxy::glex {

struct SimServerStats {
  uint64_t clients = 0;   // processes served so far
  uint64_t requests = 0;  // calls handled
  uint64_t events = 0;    // simulator events run by the server
};

class SimServer {
 public:
  // Listens on `path` (an existing socket of a dead server is replaced; a live one is an error).
  static Result<std::unique_ptr<SimServer>> listen(sim::SimFabric& fabric, std::string path);
  ~SimServer();
  // Serves until `stop` becomes true (checked at least every 200 ms).
  void run(const std::atomic<bool>& stop);
  // One round: runs what can run, then waits at most `wait_ms` for a process to speak.
  void serve_once(int wait_ms);
  // How long an idle fabric waits for other processes before a waiting call times out.
  void set_grace_ms(int ms) { grace_ms_ = ms; }
  const std::string& path() const { return path_; }
  const SimServerStats& stats() const { return stats_; }
  size_t connected() const { return clients_.size(); }

  struct Client;

 private:
  SimServer(sim::SimFabric& fabric, std::string path, int fd);
  enum class Next : uint8_t { kInput, kGrace, kMore };
  Next progress();
  void accept_client();
  void read_client(size_t i);
  void drop_client(size_t i);
  void start(Client& c);
  void finish_wait(Client& c, bool waited);
  void check_waiters();

  sim::SimFabric& fabric_;
  std::string path_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Client>> clients_;
  bool grace_done_ = false;
  int grace_ms_ = 200;
  SimServerStats stats_;
};

}  // namespace galaxy::glex
