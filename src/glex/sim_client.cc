// libglex on a `sim:` fabric served by `galaxy simd` (sim_server.h): every call is one request
// to the server, which runs it on the simulated NIC at this process's point of simulated time.
#include "glex/sim_client.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "glex/provider.h"
#include "glex/sim_protocol.h"

namespace galaxy::glex {

namespace {

using simwire::Op;

class SimClientDevice final : public glex_device {
 public:
  SimClientDevice(int fd, wire::ChipId chip_id) : fd_(fd), chip_id_(chip_id) {
    add_event_waiter(this);
  }
  ~SimClientDevice() override {
    remove_event_waiter(this);
    ::close(fd_);
  }

  Result<uint8_t> open_vp(int32_t wanted) override {
    simwire::Request q = request(Op::kOpenVp);
    q.a[0] = static_cast<uint64_t>(static_cast<int64_t>(wanted));
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret != GLEX_SUCCESS)
      return make_error(ret == GLEX_INVALID_PARAM ? Code::kOutOfRange : Code::kResourceExhausted,
                        6180, r.error);
    return static_cast<uint8_t>(r.a[0]);
  }
  void close_vp(uint8_t vp) override {
    simwire::Request q = request(Op::kCloseVp, vp);
    simwire::Response r;
    (void)call(q, &r);
  }
  Status post_mgmt(uint8_t vp, const wire::MgmtDescriptor& d) override {
    auto bytes = wire::encode_mgmt_descriptor(d);
    if (!bytes.ok()) return bytes.error();
    simwire::Request q = request(Op::kPostMgmt, vp);
    q.len = static_cast<uint32_t>(bytes->size());
    std::memcpy(q.data, bytes->data(), bytes->size());
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret != GLEX_SUCCESS)
      return make_error(ret == GLEX_NO_RESOURCE ? Code::kResourceExhausted : Code::kMalformed, 6181,
                        r.error);
    return {};
  }
  Result<wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) override {
    simwire::Request q = request(Op::kWaitMgmt, vp);
    q.a[0] = timeout_ps;
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret != GLEX_SUCCESS)
      return make_error(ret == GLEX_TIMEOUT ? Code::kTimeout : Code::kIoError, 6182, r.error);
    return wire::decode_mgmt_packet(std::span<const uint8_t>(r.data, r.len));
  }
  uint64_t now_ps() const override {
    simwire::Request q = request(Op::kNow);
    simwire::Response r;
    return call(q, &r) == GLEX_SUCCESS ? r.a[0] : 0;
  }
  Result<uint64_t> read_local_register(uint16_t addr) override {
    simwire::Request q = request(Op::kReadRegister);
    q.a[0] = addr;
    simwire::Response r;
    if (call(q, &r) != GLEX_SUCCESS) return make_error(Code::kOutOfRange, 6183, r.error);
    return r.a[0];
  }
  wire::ChipId chip_id() const override { return chip_id_; }

  glex_ret_t register_mem(void* addr, uint64_t len, uint32_t access,
                          glex_mem_handle_t* mh) override {
    simwire::Request q = request(Op::kRegister);
    q.a[0] = reinterpret_cast<uint64_t>(addr);
    q.a[1] = len;
    q.a[2] = access;
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS) {
      *mh = r.a[0];
      registered_[reinterpret_cast<uint64_t>(addr)] = len;
    }
    return ret;
  }
  glex_ret_t deregister_mem(glex_mem_handle_t mh) override {
    simwire::Request q = request(Op::kDeregister);
    q.a[0] = mh;
    simwire::Response r;
    return call(q, &r);
  }
  glex_ret_t send_mp(uint8_t vp, glex_ep_addr_t dest, const void* data, uint32_t len,
                     uint32_t flags) override {
    simwire::Request q = request(Op::kSendMp, vp);
    q.a[0] = dest;
    q.flags = flags;
    q.len = len;
    if (len) std::memcpy(q.data, data, len);
    simwire::Response r;
    return call(q, &r);
  }
  glex_ret_t recv_mp(uint8_t vp, int32_t timeout_ms, glex_mp* mp) override {
    simwire::Request q = request(Op::kRecvMp, vp);
    q.timeout_ms = timeout_ms;
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS) {
      mp->src = r.a[0];
      mp->len = std::min<uint32_t>(r.len, GLEX_MP_PAYLOAD);
      std::memcpy(mp->data, r.data, mp->len);
    }
    return ret;
  }
  glex_ret_t rdma(uint8_t vp, const glex_rdma_req& x) override {
    return rdma_request(Op::kRdma, vp, x, 0);
  }
  glex_ret_t rdma_triggered(uint8_t vp, const glex_rdma_req& x, uint16_t cp_count) override {
    return rdma_request(Op::kRdmaTriggered, vp, x, cp_count);
  }
  glex_ret_t post_coll(uint8_t vp, const chip::CollDescriptor& d, uint64_t cookie) override {
    simwire::Request q = request(Op::kPostColl, vp);
    static_assert(sizeof d <= sizeof q.data);
    q.a[0] = cookie;
    q.len = sizeof d;
    std::memcpy(q.data, &d, sizeof d);
    simwire::Response r;
    return call(q, &r);
  }
  void reset_coll(uint8_t vp) override {
    simwire::Request q = request(Op::kResetColl, vp);
    simwire::Response r;
    (void)call(q, &r);
  }
  glex_ret_t resolve_nic(const char* name, uint32_t* chip) override {
    simwire::Request q = request(Op::kResolveNic);
    q.len = static_cast<uint32_t>(strnlen(name, sizeof q.data));  // glex_resolve_nic bounds it
    std::memcpy(q.data, name, q.len);
    simwire::Response r;
    const glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS) *chip = static_cast<uint32_t>(r.a[0]);
    return ret;
  }
  glex_ret_t node_name(uint32_t chip, std::string* name) override {
    simwire::Request q = request(Op::kNodeName);
    q.a[0] = chip;
    simwire::Response r;
    const glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS)
      name->assign(reinterpret_cast<const char*>(r.data), std::min<size_t>(r.len, sizeof r.data));
    return ret;
  }
  CollTiming coll_timing() const override {
    simwire::Request q = request(Op::kCollTiming);
    simwire::Response r;
    if (call(q, &r) != GLEX_SUCCESS) return glex_device::coll_timing();
    return {r.a[0], r.a[1], r.a[2], r.a[3]};
  }

 private:
  glex_ret_t rdma_request(Op op, uint8_t vp, const glex_rdma_req& x, uint16_t cp_count) {
    simwire::Request q = request(op, vp);
    q.timeout_ms = cp_count;
    q.flags = x.flags;
    q.a[0] = x.target;
    q.a[1] = x.op;
    q.a[2] = reinterpret_cast<uint64_t>(x.local_addr);
    q.a[3] = x.local_mh;
    q.a[4] = x.len;
    q.a[5] = x.remote_addr;
    q.a[6] = x.remote_mh;
    q.a[7] = x.event_addr;
    q.a[8] = x.event_mh;
    q.a[9] = x.event.data[0];
    q.a[10] = x.event.data[1];
    q.a[11] = x.cookie;
    if (x.op == GLEX_OP_IMM) {  // the descriptor carries the bytes
      q.len = static_cast<uint32_t>(std::min<uint64_t>(x.len, GLEX_IMM_MAX));
      std::memcpy(q.data, x.local_addr, q.len);
    }
    simwire::Response r;
    return call(q, &r);
  }

 public:
  glex_ret_t poll_cq(uint8_t vp, int32_t timeout_ms, glex_cq_entry* e) override {
    simwire::Request q = request(Op::kPollCq, vp);
    q.timeout_ms = timeout_ms;
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS) {
      *e = {};
      e->op = static_cast<uint32_t>(r.a[0]);
      e->status = static_cast<glex_ret_t>(r.a[1]);
      e->cookie = r.a[2];
      e->bytes = r.a[3];
      e->error_id = static_cast<uint16_t>(r.a[4]);
      std::memcpy(e->reason, r.error, sizeof e->reason - 1);  // the server sent at most 39
      e->reason[sizeof e->reason - 1] = 0;
    }
    return ret;
  }
  glex_ret_t fence(uint8_t vp, int32_t timeout_ms) override {
    simwire::Request q = request(Op::kFence, vp);
    q.timeout_ms = timeout_ms;
    simwire::Response r;
    return call(q, &r);
  }
  glex_ret_t wait_event(uint64_t addr, int32_t timeout_ms, glex_event* out) override {
    simwire::Request q = request(Op::kWaitEvent);
    q.a[0] = addr;
    q.timeout_ms = timeout_ms;
    simwire::Response r;
    glex_ret_t ret = call(q, &r);
    if (ret == GLEX_SUCCESS) {
      out->data[0] = r.a[0];
      out->data[1] = r.a[1];
    }
    return ret;
  }

 private:
  static simwire::Request request(Op op, uint8_t vp = 0) {
    simwire::Request q;
    q.op = static_cast<uint32_t>(op);
    q.vp = vp;
    return q;
  }

  // One request, one response; a server that went away is GLEX_UNREACHABLE.
  glex_ret_t call(const simwire::Request& q, simwire::Response* r) const {
    if (::send(fd_, &q, sizeof q, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof q))
      return set_error(GLEX_UNREACHABLE, fmt::format("E6184 the simulation server is gone: {}",
                                                     std::strerror(errno)));
    ssize_t n;
    do n = ::recv(fd_, r, sizeof *r, 0);
    while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof *r))
      return set_error(GLEX_UNREACHABLE, "E6184 the simulation server is gone");
    r->error[sizeof r->error - 1] = 0;
    const auto ret = static_cast<glex_ret_t>(r->ret);
    if (ret != GLEX_SUCCESS && ret != GLEX_NO_ENTRY) return set_error(ret, r->error);
    return ret;
  }

  int fd_;
  wire::ChipId chip_id_;
};

}  // namespace

Result<std::unique_ptr<glex_device>> open_sim_client(const std::string& fabric, int32_t nic) {
  const std::string path = simwire::socket_path(fabric);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    return make_error(Code::kInvalidArgument, 6186,
                      fmt::format("socket path '{}' is too long", path));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    return make_error(Code::kNotFound, 6187,
                      fmt::format("no simulation server for fabric '{}' at {} ({}): start one "
                                  "with `galaxy simd --fabric {}`",
                                  fabric, path, std::strerror(e), fabric));
  }
  // The server's NIC models read and write this process's registered memory.
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  simwire::Request q;
  q.op = static_cast<uint32_t>(Op::kHello);
  q.a[1] = UINT64_MAX;
  if (nic >= 0) {
    q.a[1] = static_cast<uint64_t>(nic);
  } else {
    auto nic_env = env_nic();
    if (!nic_env.ok()) {
      ::close(fd);
      return nic_env.error();
    }
    if (*nic_env) q.a[1] = static_cast<uint64_t>(**nic_env);
    auto rank = env_rank();
    if (!rank.ok()) {
      ::close(fd);
      return rank.error();
    }
    q.a[2] = static_cast<uint64_t>(*rank);
  }
  simwire::Response r;
  if (::send(fd, &q, sizeof q, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof q) ||
      ::recv(fd, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    ::close(fd);
    return make_error(Code::kNotFound, 6188,
                      fmt::format("the simulation server at {} did not answer", path));
  }
  if (r.ret != GLEX_SUCCESS) {
    ::close(fd);
    r.error[sizeof r.error - 1] = 0;
    return make_error(r.ret == GLEX_NO_RESOURCE ? Code::kResourceExhausted : Code::kInvalidArgument,
                      6189, r.error);
  }
  return std::unique_ptr<glex_device>(new SimClientDevice(fd, static_cast<wire::ChipId>(r.a[0])));
}

}  // namespace galaxy::glex
