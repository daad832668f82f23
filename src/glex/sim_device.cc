#include "glex/sim_device.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "glex/sim_host.h"

namespace galaxy::glex {

namespace {

constexpr sim::Time kPsPerMs = 1000000000ull;

class SimDevice final : public glex_device {
 public:
  SimDevice(sim::SimFabric& f, uint32_t node)
      : f_(f), host_(f, node, getpid()), host_now_(f.sim().now()) {
    add_event_waiter(this);
  }
  ~SimDevice() override { remove_event_waiter(this); }

  Result<uint8_t> open_vp(int32_t wanted) override { return host_.open_vp(wanted); }
  void close_vp(uint8_t vp) override { host_.close_vp(vp); }

  Status post_mgmt(uint8_t vp, const wire::MgmtDescriptor& d) override {
    catch_up();
    advance_host(host_now_ + host_.post_cost(vp, SimHost::mgmt_descriptor_bytes(d)));
    return f_.post_mgmt(host_.node(), vp, d);
  }

  Result<wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) override {
    catch_up();
    bool waited = false;
    if (!wait_for(SimWait::kMgmt, vp, 0, host_now_ + timeout_ps, &waited))
      return make_error(
          Code::kTimeout, 6003,
          fmt::format("no management packet on vp {} within {} us", vp, timeout_ps / 1000000));
    auto mp = host_.nic().poll_mpq(vp);
    advance_host(host_now_ + host_.take_cost(waited));
    return wire::decode_mgmt_packet(std::span(mp->data).first(mp->length));
  }

  uint64_t now_ps() const override { return std::max(host_now_, f_.sim().now()); }

  Result<uint64_t> read_local_register(uint16_t addr) override {
    chip::RegAccess a = f_.chip(host_.node()).read_register(addr);
    if (a.error != wire::NmpError::kNone)
      return make_error(
          Code::kOutOfRange, 6004,
          fmt::format("local register 0x{:03x}: {}", addr, wire::nmp_error_name(a.error)));
    return a.value;
  }

  wire::ChipId chip_id() const override { return host_.chip_id(); }

  glex_ret_t register_mem(void* addr, uint64_t len, uint32_t access,
                          glex_mem_handle_t* mh) override {
    glex_ret_t r = host_.register_mem(reinterpret_cast<uint64_t>(addr), len, access, mh);
    if (r == GLEX_SUCCESS) registered_[reinterpret_cast<uint64_t>(addr)] = len;
    return r;
  }
  glex_ret_t deregister_mem(glex_mem_handle_t mh) override { return host_.deregister_mem(mh); }

  glex_ret_t send_mp(uint8_t vp, glex_ep_addr_t dest, const void* data, uint32_t len,
                     uint32_t flags) override {
    catch_up();
    advance_host(host_now_ + host_.post_cost(vp, SimHost::mp_descriptor_bytes(len)));
    return host_.send_mp(vp, dest, {static_cast<const uint8_t*>(data), len}, flags);
  }

  glex_ret_t rdma(uint8_t vp, const glex_rdma_req& req) override {
    catch_up();
    advance_host(host_now_ + host_.post_cost(vp, SimHost::rdma_descriptor_bytes(req.op, req.len)));
    std::span<const uint8_t> imm;
    if (req.op == GLEX_OP_IMM) imm = {static_cast<const uint8_t*>(req.local_addr), req.len};
    return host_.rdma(vp, req, imm);
  }

  glex_ret_t post_coll(uint8_t vp, const chip::CollDescriptor& d, uint64_t cookie) override {
    catch_up();
    advance_host(host_now_ + host_.post_cost(vp, SimHost::coll_descriptor_bytes(d)));
    return host_.post_coll(vp, d, cookie);
  }
  glex_ret_t rdma_triggered(uint8_t vp, const glex_rdma_req& req, uint16_t cp_count) override {
    catch_up();
    advance_host(host_now_ + host_.post_cost(vp, SimHost::rdma_descriptor_bytes(req.op, req.len)));
    return host_.rdma(vp, req, {}, cp_count);
  }
  void reset_coll(uint8_t vp) override { host_.reset_coll(vp); }
  glex_ret_t resolve_nic(const char* name, uint32_t* chip) override {
    return resolve_nic_in(f_.topology(), name, chip);
  }
  glex_ret_t node_name(uint32_t chip, std::string* name) override {
    return node_name_in(f_.topology(), chip, name);
  }
  CollTiming coll_timing() const override {
    if (links_ < 0) links_ = mean_links(f_.topology(), host_.node(), {});
    return glex::coll_timing(f_.timing(), links_);
  }

  glex_ret_t recv_mp(uint8_t vp, int32_t timeout_ms, glex_mp* mp) override {
    return take(SimWait::kMp, vp, 0, timeout_ms, [&] { return host_.try_recv_mp(vp, mp); });
  }
  glex_ret_t poll_cq(uint8_t vp, int32_t timeout_ms, glex_cq_entry* e) override {
    return take(SimWait::kCq, vp, 0, timeout_ms, [&] { return host_.try_poll_cq(vp, e); });
  }
  glex_ret_t fence(uint8_t vp, int32_t timeout_ms) override {
    return take(SimWait::kFence, vp, 0, timeout_ms,
                [&] { return host_.ready(SimWait::kFence, vp, 0) ? GLEX_SUCCESS : GLEX_NO_ENTRY; });
  }
  glex_ret_t wait_event(uint64_t addr, int32_t timeout_ms, glex_event* out) override {
    return take(SimWait::kEvent, 0, addr, timeout_ms, [&] { return host_.try_event(addr, out); });
  }

 private:
  // Someone else may have run the simulation (another endpoint, a traffic generator): the
  // host's time has passed as well.
  void catch_up() { host_now_ = std::max(host_now_, f_.sim().now()); }

  // The host is sequential: its clock only moves forward, and the fabric runs up to it.
  void advance_host(sim::Time t) {
    host_now_ = std::max(host_now_, t);
    if (f_.sim().now() < host_now_) f_.sim().run(host_now_);
  }

  // Runs the fabric until a wait of kind `w` would return or `deadline` passes. Idle with
  // nothing left to simulate, nothing can change: the wait ends at its deadline at once.
  bool wait_for(SimWait w, uint8_t vp, uint64_t addr, sim::Time deadline, bool* waited) {
    catch_up();
    while (!host_.ready(w, vp, addr)) {
      sim::Time next = f_.sim().next_event_time();
      if (next == sim::kNever || next > deadline) {
        if (deadline != sim::kNever) advance_host(deadline);
        return false;
      }
      f_.sim().step();
      *waited = true;
    }
    host_now_ = std::max(host_now_, f_.sim().now());
    return true;
  }

  // A taking call: try, and while there is nothing, wait (0 polls, < 0 waits forever).
  template <class Try>
  glex_ret_t take(SimWait w, uint8_t vp, uint64_t addr, int32_t timeout_ms, Try&& attempt) {
    catch_up();
    const sim::Time deadline =
        timeout_ms < 0 ? sim::kNever : host_now_ + static_cast<sim::Time>(timeout_ms) * kPsPerMs;
    bool waited = false;
    for (;;) {
      glex_ret_t r = attempt();
      if (r != GLEX_NO_ENTRY) {
        if (r == GLEX_SUCCESS) advance_host(host_now_ + host_.take_cost(waited));
        return r;
      }
      if (timeout_ms == 0) return GLEX_NO_ENTRY;
      if (!wait_for(w, vp, addr, deadline, &waited))
        return set_error(GLEX_TIMEOUT,
                         fmt::format("E6179 nothing arrived (vp {}) within {} ms of simulated "
                                     "time{}",
                                     vp, timeout_ms,
                                     f_.sim().next_event_time() == sim::kNever
                                         ? ": the fabric has nothing left to do"
                                         : ""));
    }
  }

  sim::SimFabric& f_;
  SimHost host_;
  sim::Time host_now_ = 0;
  mutable double links_ = -1;
};

}  // namespace

std::unique_ptr<glex_device> open_sim_device(sim::SimFabric& fabric, uint32_t nic_node) {
  return std::make_unique<SimDevice>(fabric, nic_node);
}

}  // namespace galaxy::glex
