#include "glex/sim_server.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "glex/device.h"
#include "glex/sim_host.h"
#include "glex/sim_protocol.h"

namespace galaxy::glex {

using simwire::Op;

struct SimServer::Client {
  enum class State : uint8_t { kHello, kRunning, kRequest, kWaiting };
  int fd = -1;
  State state = State::kHello;
  std::unique_ptr<SimHost> host;
  pid_t pid = 0;      // the connected process (SO_PEERCRED)
  sim::Time now = 0;  // the host's clock
  simwire::Request req;
  SimWait wait = SimWait::kMp;
  sim::Time deadline = sim::kNever;
  // The time this client next acts, or when its wait ends at the latest.
  sim::Time next() const { return state == State::kWaiting ? deadline : now; }
};

namespace {

constexpr sim::Time kPsPerMs = 1000000000ull;

void send_response(int fd, const simwire::Response& r) {
  // A client that has gone is noticed by its socket closing; nothing to do here.
  (void)::send(fd, &r, sizeof r, MSG_NOSIGNAL);
}

simwire::Response failure(glex_ret_t ret, const std::string& why) {
  simwire::Response r;
  r.ret = ret;
  std::snprintf(r.error, sizeof r.error, "%s", why.c_str());
  return r;
}

// The descriptor a posting request writes, or 0 for a request that posts nothing.
uint64_t posted_bytes(const simwire::Request& q) {
  switch (static_cast<Op>(q.op)) {
    case Op::kPostMgmt:
      return q.len;  // the descriptor as the client encoded it
    case Op::kSendMp:
      return SimHost::mp_descriptor_bytes(q.len);
    case Op::kRdma:
    case Op::kRdmaTriggered:
      return SimHost::rdma_descriptor_bytes(static_cast<uint32_t>(q.a[1]), q.a[4]);
    case Op::kPostColl: {
      chip::CollDescriptor d;
      if (q.len != sizeof d) return 0;
      std::memcpy(&d, q.data, sizeof d);
      return SimHost::coll_descriptor_bytes(d);
    }
    default:
      return 0;
  }
}

}  // namespace

Result<std::unique_ptr<SimServer>> SimServer::listen(sim::SimFabric& fabric, std::string path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    return make_error(
        Code::kInvalidArgument, 6190,
        fmt::format("socket path '{}' is longer than {} bytes", path, sizeof a.sun_path - 1));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_error(Code::kIoError, 6191, fmt::format("socket: {}", std::strerror(errno)));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EADDRINUSE) {
    // A socket file left by a server that died: replace it; one that answers: refuse.
    int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const bool alive = ::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(probe);
    if (alive) {
      ::close(fd);
      return make_error(Code::kResourceExhausted, 6192,
                        fmt::format("a simulation server already listens on {}", path));
    }
    ::unlink(path.c_str());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return make_error(Code::kIoError, 6193,
                        fmt::format("bind {}: {}", path, std::strerror(errno)));
    }
  }
  if (::listen(fd, 64) != 0) {
    ::close(fd);
    return make_error(Code::kIoError, 6202,
                      fmt::format("listen {}: {}", path, std::strerror(errno)));
  }
  return std::unique_ptr<SimServer>(new SimServer(fabric, std::move(path), fd));
}

SimServer::SimServer(sim::SimFabric& fabric, std::string path, int fd)
    : fabric_(fabric), path_(std::move(path)), listen_fd_(fd) {}

SimServer::~SimServer() {
  while (!clients_.empty()) drop_client(clients_.size() - 1);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

void SimServer::run(const std::atomic<bool>& stop) {
  while (!stop.load()) serve_once(200);
}

void SimServer::serve_once(int wait_ms) {
  const Next next = progress();
  std::vector<pollfd> fds;
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : clients_) fds.push_back({c->fd, POLLIN, 0});
  const int timeout = next == Next::kMore    ? 0
                      : next == Next::kGrace ? std::min(grace_ms_, wait_ms)
                                             : wait_ms;
  const int n = ::poll(fds.data(), fds.size(), timeout);
  if (n <= 0) {
    if (n == 0 && next == Next::kGrace) grace_done_ = true;
    return;
  }
  grace_done_ = false;
  // Clients first, from the back, so that dropping one leaves the others' indices valid.
  for (size_t i = fds.size() - 1; i >= 1; --i)
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_client(i - 1);
  if (fds[0].revents & POLLIN) accept_client();
}

void SimServer::accept_client() {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  // The process whose memory the NIC will reach is the one at the other end of the socket, as
  // the kernel says; never a pid a client names.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
    ::close(fd);
    return;
  }
  auto c = std::make_unique<Client>();
  c->fd = fd;
  c->pid = cred.pid;
  c->now = fabric_.sim().now();
  clients_.push_back(std::move(c));
}

void SimServer::drop_client(size_t i) {
  ::close(clients_[i]->fd);
  clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i));
}

void SimServer::read_client(size_t i) {
  Client& c = *clients_[i];
  simwire::Request req;
  const ssize_t n = ::recv(c.fd, &req, sizeof req, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return drop_client(i);
  if (n < 0) return;
  // A client speaks only when it is not waiting for an answer: anything else is a broken one.
  if (c.state == Client::State::kRequest || c.state == Client::State::kWaiting)
    return drop_client(i);
  if (n != static_cast<ssize_t>(sizeof req) || req.version != simwire::kVersion || req.op == 0 ||
      req.op > simwire::kMaxOp || req.len > simwire::kDataBytes) {
    send_response(c.fd, failure(GLEX_INVALID_PARAM,
                                fmt::format("E6194 simulation server: malformed request ({} "
                                            "bytes, version {}, op {}); this server speaks "
                                            "version {}",
                                            n, req.version, req.op, simwire::kVersion)));
    return;
  }
  ++stats_.requests;
  if (c.state == Client::State::kHello) {
    if (static_cast<Op>(req.op) != Op::kHello) {
      send_response(c.fd, failure(GLEX_INVALID_PARAM, "E6195 the first request must be hello"));
      return;
    }
    const fabric::Topology& t = fabric_.topology();
    uint64_t node = req.a[1];
    if (node == UINT64_MAX) node = t.nic_node(static_cast<uint32_t>(req.a[2] % t.num_nics()));
    if (node >= t.num_nodes() || !t.is_nic(static_cast<uint32_t>(node))) {
      send_response(c.fd, failure(GLEX_INVALID_PARAM,
                                  fmt::format("E6196 nic = {} is not a NIC of this fabric "
                                              "({} NICs)",
                                              req.a[1], t.num_nics())));
      return;
    }
    for (const auto& o : clients_)
      if (o->host && o->host->node() == node) {
        send_response(c.fd,
                      failure(GLEX_NO_RESOURCE, fmt::format("E6197 NIC {} is in use by process {}",
                                                            node, o->host->memory().pid())));
        return;
      }
    c.host = std::make_unique<SimHost>(fabric_, static_cast<uint32_t>(node), c.pid);
    c.now = fabric_.sim().now();
    c.state = Client::State::kRunning;
    ++stats_.clients;
    simwire::Response r;
    r.a[0] = c.host->chip_id();
    r.a[1] = node;
    r.a[2] = t.num_nics();
    send_response(c.fd, r);
    return;
  }
  // Every VP a request names is one of the NIC's (ops without one send 0): checked once here,
  // so that no call reaches a VP's queues with a number beyond them.
  if (req.vp >= chip::kNumVps) {
    send_response(c.fd, failure(GLEX_INVALID_PARAM,
                                fmt::format("E6204 vp = {} exceeds the NIC's {} virtual ports",
                                            req.vp, chip::kNumVps)));
    return;
  }
  c.req = req;
  c.state = Client::State::kRequest;
  // A posting call costs the host its time before the NIC sees the descriptor.
  if (const uint64_t bytes = posted_bytes(req); bytes > 0)
    c.now += c.host->post_cost(static_cast<uint8_t>(req.vp), bytes);
}

SimServer::Next SimServer::progress() {
  sim::Simulator& sim = fabric_.sim();
  for (int budget = 4096; budget > 0; --budget) {
    if (clients_.empty()) return Next::kInput;
    Client* first = nullptr;
    for (const auto& c : clients_) {
      if (c->state == Client::State::kHello) continue;
      // At equal times a call is served before a host that may still act: serving it takes
      // the fabric no further than that time.
      if (!first || c->next() < first->next() ||
          (c->next() == first->next() && first->state == Client::State::kRunning))
        first = c.get();
    }
    if (!first) return Next::kInput;
    const sim::Time ev = sim.next_event_time();
    if (ev != sim::kNever && ev <= first->next()) {
      sim.step();
      ++stats_.events;
      check_waiters();
      continue;
    }
    switch (first->state) {
      case Client::State::kHello:
      case Client::State::kRunning:
        return Next::kInput;  // it may still act at its clock: wait for it
      case Client::State::kRequest:
        if (sim.now() < first->now) sim.run(first->now);
        start(*first);
        continue;
      case Client::State::kWaiting:
        if (first->deadline == sim::kNever) return Next::kInput;
        // Nothing left to simulate: give other processes a moment to act before time jumps.
        if (ev == sim::kNever && !grace_done_) return Next::kGrace;
        if (sim.now() < first->deadline) sim.run(first->deadline);
        first->now = first->deadline;
        first->state = Client::State::kRunning;
        send_response(
            first->fd,
            failure(GLEX_TIMEOUT, fmt::format("E6198 nothing arrived (vp {}) within {} ms of "
                                              "simulated time",
                                              first->req.vp, first->req.timeout_ms)));
        continue;
    }
  }
  return Next::kMore;
}

void SimServer::check_waiters() {
  for (const auto& c : clients_)
    if (c->state == Client::State::kWaiting &&
        c->host->ready(c->wait, static_cast<uint8_t>(c->req.vp), c->req.a[0]))
      finish_wait(*c, true);
}

// Retries a waiting call; answers it if it can now return.
void SimServer::finish_wait(Client& c, bool waited) {
  SimHost& h = *c.host;
  const uint8_t vp = static_cast<uint8_t>(c.req.vp);
  simwire::Response r;
  glex_ret_t ret = GLEX_NO_ENTRY;
  switch (c.wait) {
    case SimWait::kMp: {
      glex_mp mp{};
      ret = h.try_recv_mp(vp, &mp);
      r.a[0] = mp.src;
      r.len = mp.len;
      std::memcpy(r.data, mp.data, mp.len);
      break;
    }
    case SimWait::kCq: {
      glex_cq_entry e{};
      ret = h.try_poll_cq(vp, &e);
      r.a[0] = e.op;
      r.a[1] = static_cast<uint64_t>(e.status);
      r.a[2] = e.cookie;
      r.a[3] = e.bytes;
      r.a[4] = e.error_id;
      std::snprintf(r.error, sizeof r.error, "%s", e.reason);
      break;
    }
    case SimWait::kFence:
      ret = h.ready(SimWait::kFence, vp, 0) ? GLEX_SUCCESS : GLEX_NO_ENTRY;
      break;
    case SimWait::kEvent: {
      glex_event e{};
      ret = h.try_event(c.req.a[0], &e);
      r.a[0] = e.data[0];
      r.a[1] = e.data[1];
      break;
    }
    case SimWait::kMgmt:
      if (h.ready(SimWait::kMgmt, vp, 0)) {
        auto mp = h.nic().poll_mpq(vp);
        r.len = mp->length;
        std::memcpy(r.data, mp->data.data(), mp->length);
        ret = GLEX_SUCCESS;
      }
      break;
  }
  if (ret == GLEX_NO_ENTRY) {
    if (c.req.timeout_ms == 0 && c.wait != SimWait::kMgmt) {
      c.state = Client::State::kRunning;
      send_response(c.fd, failure(GLEX_NO_ENTRY, ""));
    }
    return;  // still waiting
  }
  if (ret != GLEX_SUCCESS) {
    std::snprintf(r.error, sizeof r.error, "%s", glex_last_error());
  } else {
    c.now = std::max(c.now, fabric_.sim().now()) + h.take_cost(waited);
  }
  r.ret = ret;
  c.state = Client::State::kRunning;
  send_response(c.fd, r);
}

void SimServer::start(Client& c) {
  SimHost& h = *c.host;
  const simwire::Request& q = c.req;
  const uint8_t vp = static_cast<uint8_t>(q.vp);
  simwire::Response r;
  glex_ret_t ret = GLEX_SUCCESS;
  auto take = [&](SimWait w, sim::Time timeout) {
    c.wait = w;
    // A wait longer than the clock can count is a wait without end (never a wrapped deadline).
    c.deadline = timeout >= sim::kNever - c.now ? sim::kNever : c.now + timeout;
    c.state = Client::State::kWaiting;
    finish_wait(c, false);
  };
  const sim::Time timeout =
      q.timeout_ms < 0 ? sim::kNever : static_cast<sim::Time>(q.timeout_ms) * kPsPerMs;
  switch (static_cast<Op>(q.op)) {
    case Op::kHello:
      ret = set_error(GLEX_INVALID_PARAM, "E6199 hello was already said");
      break;
    case Op::kOpenVp: {
      auto v = h.open_vp(static_cast<int32_t>(q.a[0]));
      if (v.ok())
        r.a[0] = *v;
      else
        ret = set_error(v.error().code == Code::kOutOfRange ? GLEX_INVALID_PARAM : GLEX_NO_RESOURCE,
                        v.error().to_string());
      break;
    }
    case Op::kCloseVp:
      h.close_vp(vp);
      break;
    case Op::kPostMgmt: {
      auto d = wire::decode_mgmt_descriptor(std::span<const uint8_t>(q.data, q.len));
      Status s = d.ok() ? fabric_.post_mgmt(h.node(), vp, *d) : Status(d.error());
      if (!s.ok())
        ret = set_error(
            s.error().code == Code::kResourceExhausted ? GLEX_NO_RESOURCE : GLEX_DESCRIPTOR_ERROR,
            s.error().to_string());
      break;
    }
    case Op::kWaitMgmt:
      return take(SimWait::kMgmt, q.a[0]);
    case Op::kNow:
      r.a[0] = c.now;
      break;
    case Op::kReadRegister: {
      chip::RegAccess a = fabric_.chip(h.node()).read_register(static_cast<uint16_t>(q.a[0]));
      if (a.error != wire::NmpError::kNone)
        ret = set_error(GLEX_INVALID_PARAM, fmt::format("E6203 local register {:#05x}: {}", q.a[0],
                                                        wire::nmp_error_name(a.error)));
      r.a[0] = a.value;
      break;
    }
    case Op::kRegister:
      ret = h.register_mem(q.a[0], q.a[1], static_cast<uint32_t>(q.a[2]), &r.a[0]);
      break;
    case Op::kDeregister:
      ret = h.deregister_mem(q.a[0]);
      break;
    case Op::kSendMp:
      ret = h.send_mp(vp, q.a[0], std::span<const uint8_t>(q.data, std::min<uint32_t>(q.len, 120)),
                      q.flags);
      break;
    case Op::kPostColl: {
      chip::CollDescriptor d;
      if (q.len != sizeof d) {
        ret = set_error(
            GLEX_INVALID_PARAM,
            fmt::format("E6205 collective descriptor of {} bytes, expected {}", q.len, sizeof d));
        break;
      }
      std::memcpy(&d, q.data, sizeof d);  // every field is checked by the NIC (chip/coll.cc)
      ret = h.post_coll(vp, d, q.a[0]);
      break;
    }
    case Op::kResetColl:
      h.reset_coll(vp);
      break;
    case Op::kResolveNic: {
      const std::string name(reinterpret_cast<const char*>(q.data),
                             std::min<size_t>(q.len, simwire::kDataBytes));
      if (name.empty() || name.find('\0') != std::string::npos) {
        ret = set_error(GLEX_INVALID_PARAM,
                        fmt::format("E6211 a NIC's name of {} bytes, or with a NUL", name.size()));
        break;
      }
      uint32_t chip = 0;
      ret = resolve_nic_in(fabric_.topology(), name.c_str(), &chip);
      r.a[0] = chip;
      break;
    }
    case Op::kNodeName: {
      std::string name;
      ret = node_name_in(fabric_.topology(),
                         static_cast<uint32_t>(std::min<uint64_t>(q.a[0], UINT32_MAX)), &name);
      if (ret == GLEX_SUCCESS && name.size() > simwire::kDataBytes)
        ret = set_error(GLEX_INVALID_PARAM,
                        fmt::format("E6212 the name of chip {} is {} bytes, over {}", q.a[0],
                                    name.size(), simwire::kDataBytes));
      if (ret == GLEX_SUCCESS) {
        r.len = static_cast<uint32_t>(name.size());
        std::memcpy(r.data, name.data(), name.size());
      }
      break;
    }
    case Op::kCollTiming: {
      const glex_device::CollTiming t =
          coll_timing(fabric_.timing(), mean_links(fabric_.topology(), h.node(), {}));
      r.a[0] = t.offload_level_ps;
      r.a[1] = t.offload_child_ps;
      r.a[2] = t.p2p_level_ps;
      r.a[3] = t.p2p_child_ps;
      break;
    }
    case Op::kRdma:
    case Op::kRdmaTriggered: {
      glex_rdma_req x{};
      x.target = q.a[0];
      x.op = static_cast<uint32_t>(q.a[1]);
      x.flags = q.flags;
      x.local_addr = reinterpret_cast<void*>(q.a[2]);
      x.local_mh = q.a[3];
      x.len = q.a[4];
      x.remote_addr = q.a[5];
      x.remote_mh = q.a[6];
      x.event_addr = q.a[7];
      x.event_mh = q.a[8];
      x.event.data[0] = q.a[9];
      x.event.data[1] = q.a[10];
      x.cookie = q.a[11];
      const uint16_t cp_count = static_cast<Op>(q.op) == Op::kRdmaTriggered
                                    ? static_cast<uint16_t>(std::clamp(q.timeout_ms, 0, 65535))
                                    : 0;
      ret = h.rdma(vp, x, std::span<const uint8_t>(q.data, std::min<uint64_t>(q.len, x.len)),
                   cp_count);
      break;
    }
    case Op::kRecvMp:
      return take(SimWait::kMp, timeout);
    case Op::kPollCq:
      return take(SimWait::kCq, timeout);
    case Op::kFence:
      return take(SimWait::kFence, timeout);
    case Op::kWaitEvent:
      return take(SimWait::kEvent, timeout);
  }
  if (ret != GLEX_SUCCESS) std::snprintf(r.error, sizeof r.error, "%s", glex_last_error());
  r.ret = ret;
  c.state = Client::State::kRunning;
  send_response(c.fd, r);
}

}  // namespace galaxy::glex
