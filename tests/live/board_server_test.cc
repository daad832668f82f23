// BoardServer::adopt: a socket handed over for the monitor board is served only when it is a
// TCP/IPv4 socket bound to the host's own address and port; any other is refused and closed.
#include "engine/live/board_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace galaxy::live {
namespace {

// A socket of `type` bound to a loopback port the kernel chose; its port in `port`.
int bound_loopback(int type, uint16_t* port) {
  const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

bool is_open(int fd) {
  return fcntl(fd, F_GETFD) != -1;
}

TEST(BoardServerAdopt, OnlyTheHostsOwnTcpPortIsServed) {
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(epfd, 0);
  uint16_t udp_port = 0, tcp_port = 0;

  const int udp = bound_loopback(SOCK_DGRAM, &udp_port);
  ASSERT_GE(udp, 0);
  auto refused = BoardServer::adopt(udp, "127.0.0.1", udp_port, epfd);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 4747) << refused.error().to_string();
  EXPECT_FALSE(is_open(udp));

  const int elsewhere = bound_loopback(SOCK_STREAM, &tcp_port);
  ASSERT_GE(elsewhere, 0);
  const uint16_t other = static_cast<uint16_t>(tcp_port == 65535 ? 1024 : tcp_port + 1);
  refused = BoardServer::adopt(elsewhere, "127.0.0.1", other, epfd);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 4749) << refused.error().to_string();
  EXPECT_NE(refused.error().message.find(
                fmt::format("bound to 127.0.0.1:{}, not 127.0.0.1:{}", tcp_port, other)),
            std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(is_open(elsewhere));

  const int own = bound_loopback(SOCK_STREAM, &tcp_port);
  ASSERT_GE(own, 0);
  auto served = BoardServer::adopt(own, "127.0.0.1", tcp_port, epfd);
  ASSERT_TRUE(served.ok()) << served.error().to_string();
  EXPECT_EQ((*served)->port(), tcp_port);
  // It listens: a client connects.
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(tcp_port);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  close(client);
  served->reset();
  close(epfd);
}

}  // namespace
}  // namespace galaxy::live
