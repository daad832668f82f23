// IPv4 endpoints of the live engine's sockets. What a socket handed to a daemon is bound to
// (DaemonOptions::socket_fd, board_fd): the daemon checks it is of the kind it needs and bound to
// the host's own address and port before using it, since a socket bound elsewhere would leave its
// peers talking to nobody without a word.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <optional>
#include <string>

namespace galaxy::live {

// The IPv4 address and port `fd` is bound to, when it is a socket of `type` (SOCK_DGRAM,
// SOCK_STREAM) of the IPv4 family; nothing otherwise.
inline std::optional<sockaddr_in> bound_ipv4(int fd, int type) {
  int got_type = 0;
  socklen_t tl = sizeof got_type;
  sockaddr_in got{};
  socklen_t al = sizeof got;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &got_type, &tl) != 0 || got_type != type ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&got), &al) != 0 || got.sin_family != AF_INET)
    return std::nullopt;
  return got;
}

// Whether two IPv4 endpoints are the same address and port.
inline bool same_endpoint(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

// "127.0.0.1:17471", for messages and log lines.
inline std::string endpoint_text(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace galaxy::live
