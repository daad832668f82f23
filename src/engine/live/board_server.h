// The monitor board of a live host (docs/live.md "Out-of-band path"): the host's fabric daemon
// listens on TCP at the host's address and port (the UDP port of its links, on TCP) and serves
// the monitor board protocol (wire/oob.h) for the host's chips, as the board of a chassis
// would. One request at a time per board, as its one I2C bus allows: a request waits for the
// bus, and its answer leaves when the bus time the board reported has passed.
#pragma once

#include <poll.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "wire/oob.h"

namespace galaxy::live {

class BoardServer {
 public:
  static constexpr size_t kMaxConnections = 16;
  static constexpr size_t kMaxPendingPerConnection = 64;

  // Listens on TCP ip:port and adds its sockets to `epfd` (the daemon's sleep): E4860.
  static Result<std::unique_ptr<BoardServer>> open(const std::string& ip, uint16_t port, int epfd);
  // The same on a TCP socket already bound to ip:port (DaemonOptions::board_fd), which it owns
  // (closed on refusal too): E4747 not a TCP/IPv4 socket, E4749 bound elsewhere, E4746 cannot
  // listen.
  static Result<std::unique_ptr<BoardServer>> adopt(int fd, const std::string& ip, uint16_t port,
                                                    int epfd);
  ~BoardServer();
  BoardServer(const BoardServer&) = delete;
  BoardServer& operator=(const BoardServer&) = delete;

  using Execute = std::function<wire::OobResponse(const wire::OobRequest&)>;
  // Accepts connections, executes the whole requests that came, sends the answers that are
  // due. A malformed frame closes its connection (E4861, logged). Returns whether anything
  // happened.
  bool poll(uint64_t now_ns, const Execute& execute);
  // When the next answer is due (UINT64_MAX: none).
  uint64_t next_deadline_ns() const;
  uint64_t served() const { return served_; }
  uint16_t port() const;  // the TCP port it listens on (the one asked for, or the kernel's)

 private:
  // A listening socket's server, its socket added to `epfd`.
  static std::unique_ptr<BoardServer> serve(int fd, int epfd);
  struct Pending {
    uint64_t due_ns;
    std::array<uint8_t, wire::kOobResponseBytes> bytes;
  };
  struct Conn {
    int fd = -1;
    std::vector<uint8_t> in;
    std::deque<Pending> out;
    size_t out_offset = 0;  // bytes of out.front() already sent
  };
  BoardServer(int listen_fd, int epfd) : listen_fd_(listen_fd), epfd_(epfd) {}
  void close_conn(size_t i);
  int listen_fd_;
  int epfd_;
  std::vector<Conn> conns_;
  std::vector<pollfd> poll_fds_;
  uint64_t bus_free_ns_ = 0;
  uint64_t served_ = 0;
};

}  // namespace galaxy::live
