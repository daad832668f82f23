#include "engine/live/board_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "engine/live/bound_socket.h"

namespace galaxy::live {

Result<std::unique_ptr<BoardServer>> BoardServer::open(const std::string& ip, uint16_t port,
                                                       int epfd) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1)
    return make_error(Code::kInvalidArgument, 4863,
                      fmt::format("monitor board: ip = '{}' is not an IPv4 address", ip));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return make_error(Code::kIoError, 4860,
                      fmt::format("monitor board: TCP {}:{}: {}", ip, port, why));
  }
  return serve(fd, epfd);
}

Result<std::unique_ptr<BoardServer>> BoardServer::adopt(int fd, const std::string& ip,
                                                        uint16_t port, int epfd) {
  // Only the host's own TCP port will do: the peers' requests go there.
  const std::optional<sockaddr_in> bound = bound_ipv4(fd, SOCK_STREAM);
  if (!bound) {
    ::close(fd);
    return make_error(Code::kInvalidArgument, 4747,
                      fmt::format("monitor board: board_fd = {} is not a TCP/IPv4 socket", fd));
  }
  sockaddr_in want{};
  want.sin_family = AF_INET;
  want.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &want.sin_addr) != 1 || !same_endpoint(*bound, want)) {
    ::close(fd);
    return make_error(Code::kInvalidArgument, 4749,
                      fmt::format("monitor board: board_fd = {} is bound to {}, not {}:{}", fd,
                                  endpoint_text(*bound), ip, port));
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return make_error(
        Code::kIoError, 4746,
        fmt::format("monitor board: the TCP socket handed over for {}:{}: {}", ip, port, why));
  }
  return serve(fd, epfd);
}

std::unique_ptr<BoardServer> BoardServer::serve(int fd, int epfd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
  return std::unique_ptr<BoardServer>(new BoardServer(fd, epfd));
}

BoardServer::~BoardServer() {
  for (size_t i = conns_.size(); i-- > 0;) close_conn(i);
  ::close(listen_fd_);
}

void BoardServer::close_conn(size_t i) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, conns_[i].fd, nullptr);
  ::close(conns_[i].fd);
  conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
}

uint16_t BoardServer::port() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

uint64_t BoardServer::next_deadline_ns() const {
  uint64_t next = UINT64_MAX;
  for (const Conn& c : conns_)
    if (!c.out.empty()) next = std::min(next, c.out.front().due_ns);
  return next;
}

bool BoardServer::poll(uint64_t now_ns, const Execute& execute) {
  bool busy = false;
  // One look at every socket first: an accept or a read that finds nothing still costs (an
  // accept allocates a socket before it learns the queue is empty), and the daemon polls often.
  std::vector<pollfd>& fds = poll_fds_;
  fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
  for (const Conn& c : conns_) fds.push_back(pollfd{c.fd, POLLIN, 0});
  bool answers_due = false;
  for (const Conn& c : conns_) answers_due |= !c.out.empty() && c.out.front().due_ns <= now_ns;
  if (::poll(fds.data(), fds.size(), 0) <= 0 && !answers_due) return false;
  for (;;) {
    if (!(fds[0].revents & POLLIN)) break;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    busy = true;
    if (conns_.size() >= kMaxConnections) {
      log::warn(4862, "monitor board: connection refused: {} are open already", kMaxConnections);
      ::close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
    conns_.push_back(Conn{fd, {}, {}, 0});
  }
  for (size_t i = conns_.size(); i-- > 0;) {
    Conn& c = conns_[i];
    bool closed = false;
    // Read while there is room for the answers (a client that does not read waits).
    while (c.out.size() < kMaxPendingPerConnection) {
      uint8_t buf[wire::kOobRequestBytes * 8];
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        closed = true;
        break;
      }
      if (n < 0) break;
      busy = true;
      c.in.insert(c.in.end(), buf, buf + n);
      size_t at = 0;
      for (; c.in.size() - at >= wire::kOobRequestBytes; at += wire::kOobRequestBytes) {
        auto req = wire::decode_oob_request(
            std::span<const uint8_t>(c.in).subspan(at, wire::kOobRequestBytes));
        if (!req.ok()) {
          log::warn(4861, "monitor board: connection closed: {}", req.error().message);
          closed = true;
          break;
        }
        const wire::OobResponse r = execute(*req);
        ++served_;
        // The bus serves one request at a time: this one starts when the one before is done.
        const uint64_t start = std::max(now_ns, bus_free_ns_);
        bus_free_ns_ = start + r.bus_ns;
        c.out.push_back({bus_free_ns_, wire::encode_oob_response(r)});
      }
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(at));
      if (closed) break;
    }
    while (!closed && !c.out.empty() && c.out.front().due_ns <= now_ns) {
      const auto& b = c.out.front().bytes;
      const ssize_t n = send(c.fd, b.data() + c.out_offset, b.size() - c.out_offset, MSG_NOSIGNAL);
      if (n < 0) {
        closed = errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
        break;
      }
      busy = true;
      c.out_offset += static_cast<size_t>(n);
      if (c.out_offset < b.size()) break;
      c.out_offset = 0;
      c.out.pop_front();
    }
    if (closed) close_conn(i);
  }
  return busy;
}

}  // namespace galaxy::live
