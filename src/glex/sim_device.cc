#include "glex/sim_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace galaxy::glex {

namespace {

class SimDevice final : public glex_device {
 public:
  SimDevice(sim::SimFabric& f, uint32_t node) : f_(f), node_(node), host_now_(f.sim().now()) {}

  Result<uint8_t> open_vp(int32_t wanted) override {
    if (wanted >= 0) {
      if (wanted < chip::kPioVps || wanted >= chip::kNumVps)
        return make_error(Code::kOutOfRange, 6000,
                          fmt::format("vp = {}: management endpoints use DMA VPs {}-{}", wanted,
                                      chip::kPioVps, chip::kNumVps - 1));
      if (used_[wanted])
        return make_error(Code::kResourceExhausted, 6001, fmt::format("vp {} is in use", wanted));
      used_[wanted] = true;
      return static_cast<uint8_t>(wanted);
    }
    for (uint8_t v = chip::kPioVps; v < chip::kNumVps; ++v)
      if (!used_[v]) {
        used_[v] = true;
        return v;
      }
    return make_error(Code::kResourceExhausted, 6002, "no free DMA VP");
  }
  void close_vp(uint8_t vp) override { used_[vp] = false; }

  Status post_mgmt(uint8_t vp, const wire::MgmtDescriptor& d) override {
    catch_up();
    advance_host(host_now_ + f_.timing().host_send);
    return f_.post_mgmt(node_, vp, d);
  }

  Result<wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) override {
    catch_up();
    sim::Time deadline = host_now_ + timeout_ps;
    chip::Nic& nic = f_.nic(node_);
    bool waited = false;
    while (nic.mpq_count(vp) == 0) {
      // Idle: the simulated fabric runs until something lands for us or time is up.
      sim::Time next = f_.sim().next_event_time();
      if (next == sim::kNever || next > deadline) {
        advance_host(deadline);
        return make_error(
            Code::kTimeout, 6003,
            fmt::format("no management packet on vp {} within {} us", vp, timeout_ps / 1000000));
      }
      f_.sim().step();
      waited = true;
    }
    auto mp = nic.poll_mpq(vp);
    sim::Time t = std::max(host_now_, f_.sim().now());
    if (waited) t += f_.timing().host_wakeup;
    advance_host(t + f_.timing().host_receive);
    return wire::decode_mgmt_packet(std::span(mp->data).first(mp->length));
  }

  uint64_t now_ps() const override { return std::max(host_now_, f_.sim().now()); }

  Result<uint64_t> read_local_register(uint16_t addr) override {
    chip::RegAccess a = f_.chip(node_).read_register(addr);
    if (a.error != wire::NmpError::kNone)
      return make_error(
          Code::kOutOfRange, 6004,
          fmt::format("local register 0x{:03x}: {}", addr, wire::nmp_error_name(a.error)));
    return a.value;
  }

  uint16_t chip_id() const override { return f_.chip(node_).chip_id(); }

 private:
  // Someone else may have run the simulation (another endpoint, a traffic generator): the
  // host's time has passed as well.
  void catch_up() { host_now_ = std::max(host_now_, f_.sim().now()); }

  // The host is sequential: its clock only moves forward, and the fabric runs up to it.
  void advance_host(sim::Time t) {
    host_now_ = std::max(host_now_, t);
    if (f_.sim().now() < host_now_) f_.sim().run(host_now_);
  }

  sim::SimFabric& f_;
  uint32_t node_;
  sim::Time host_now_ = 0;
  std::array<bool, chip::kNumVps> used_{};
};

}  // namespace

std::unique_ptr<glex_device> open_sim_device(sim::SimFabric& fabric, uint32_t nic_node) {
  return std::make_unique<SimDevice>(fabric, nic_node);
}

}  // namespace galaxy::glex
