// libFuzzer target: the simulation server's untrusted input — requests from a process on its
// socket (glex/sim_protocol.h). Whatever the bytes, the server answers or drops that client and
// goes on; it never crashes. The host is a child process that only sleeps, so the memory the
// fuzzed requests register and write is the child's, never this process's.
// Input: a sequence of messages, each a length byte (0: a whole request, else that many bytes)
// followed by its bytes.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "engine/sim/calibration.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "glex/sim_protocol.h"
#include "glex/sim_server.h"

namespace {

using galaxy::glex::SimServer;
namespace simwire = galaxy::glex::simwire;

struct World {
  std::unique_ptr<galaxy::sim::SimFabric> fabric;
  std::unique_ptr<SimServer> server;
  std::string path;
  int factory = -1;  // asks the child for a new connection, receives its descriptor
};

// The child: connects to the server whenever asked and hands the socket over, then sleeps.
[[noreturn]] void host_child(const std::string& path, int ctl) {
  char c;
  while (::read(ctl, &c, 1) == 1) {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(1);
    char buf[CMSG_SPACE(sizeof(int))] = {};
    iovec io{&c, 1};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = buf;
    m.msg_controllen = sizeof buf;
    cmsghdr* h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(h), &fd, sizeof fd);
    if (::sendmsg(ctl, &m, 0) != 1) _exit(1);
    ::close(fd);
  }
  _exit(0);
}

World& world() {
  static World w = [] {
    World x;
    auto topo = galaxy::fabric::build_topology("fattree:k=4,levels=2");
    auto timing = galaxy::sim::default_timing();
    if (!topo.ok() || !timing.ok()) std::abort();
    auto f = galaxy::sim::SimFabric::create(*topo, *timing);
    if (!f.ok()) std::abort();
    x.fabric = std::move(*f);
    x.path = "/tmp/galaxy-fuzz-simd-" + std::to_string(getpid()) + ".sock";
    auto s = SimServer::listen(*x.fabric, x.path);
    if (!s.ok()) std::abort();
    x.server = std::move(*s);
    x.server->set_grace_ms(0);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) std::abort();
    if (::fork() == 0) {
      ::close(sv[0]);
      host_child(x.path, sv[1]);
    }
    ::close(sv[1]);
    x.factory = sv[0];
    return x;
  }();
  return w;
}

int connect_as_child(World& w) {
  char c = 1;
  if (::write(w.factory, &c, 1) != 1) std::abort();
  // The child's connect() is pending in the server's backlog until the server accepts it.
  char buf[CMSG_SPACE(sizeof(int))] = {};
  iovec io{&c, 1};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = buf;
  m.msg_controllen = sizeof buf;
  if (::recvmsg(w.factory, &m, 0) != 1) std::abort();
  int fd;
  std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}

void drain(int fd) {
  simwire::Response r;
  while (::recv(fd, &r, sizeof r, MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = world();
  const int fd = connect_as_child(w);
  w.server->serve_once(0);  // accepts it
  size_t at = 0;
  while (at < size) {
    const size_t want = data[at++] == 0 ? sizeof(simwire::Request) : data[at - 1];
    const size_t n = std::min(want, size - at);
    simwire::Request q;
    std::memcpy(&q, data + at, std::min(n, sizeof q));
    (void)::send(fd, n == sizeof q ? static_cast<const void*>(&q) : data + at, n,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
    at += n;
    for (int i = 0; i < 4; ++i) w.server->serve_once(0);
    drain(fd);
  }
  ::close(fd);
  for (int i = 0; i < 4; ++i) w.server->serve_once(0);
  return 0;
}
