// The device behind a glex handle: one NIC, on the simulated engine (SimDevice) or the live one
// (LiveDevice). The C API in include/glex.h and nm's GlexMgmtPort both use it. Data operations
// return glex_ret_t with glex_last_error() set; an engine without them says GLEX_UNSUPPORTED.
#pragma once

#include <cstdint>
#include <map>

#include "base/status.h"
#include "chip/att.h"
#include "chip/coll.h"
#include "glex.h"
#include "wire/mgmt.h"

namespace galaxy::fabric {
class Topology;
}

namespace galaxy::glex {
// The simulated NIC's memory handles: index << 32 | key, the index being the ATT key's low bits.
constexpr glex_mem_handle_t sim_handle(uint32_t key) {
  return (static_cast<uint64_t>(key & chip::Att::kIndexMask) << 32) | key;
}
}  // namespace galaxy::glex

struct glex_device {
  virtual ~glex_device() = default;
  virtual galaxy::Result<uint8_t> open_vp(int32_t wanted) = 0;
  virtual void close_vp(uint8_t vp) = 0;
  virtual galaxy::Status post_mgmt(uint8_t vp, const galaxy::wire::MgmtDescriptor& d) = 0;
  // The next management packet in `vp`'s MPQ, waiting at most `timeout_ps`.
  virtual galaxy::Result<galaxy::wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) = 0;
  virtual uint64_t now_ps() const = 0;
  virtual galaxy::Result<uint64_t> read_local_register(uint16_t addr) = 0;
  virtual galaxy::wire::ChipId chip_id() const = 0;

  virtual glex_ret_t register_mem(void* addr, uint64_t len, uint32_t access, glex_mem_handle_t* mh);
  virtual glex_ret_t deregister_mem(glex_mem_handle_t mh);
  virtual glex_ret_t alloc_mem(uint64_t len, void** addr);
  virtual glex_ret_t free_mem(void* addr);
  virtual glex_ret_t send_mp(uint8_t vp, glex_ep_addr_t dest, const void* data, uint32_t len,
                             uint32_t flags);
  virtual glex_ret_t recv_mp(uint8_t vp, int32_t timeout_ms, glex_mp* mp);
  virtual glex_ret_t rdma(uint8_t vp, const glex_rdma_req& req);
  virtual glex_ret_t poll_cq(uint8_t vp, int32_t timeout_ms, glex_cq_entry* e);
  virtual glex_ret_t fence(uint8_t vp, int32_t timeout_ms);
  // A device whose NIC moves only while its host waits (the simulated ones) waits for the event
  // word at `addr` itself; glex_wait_event asks such a device (see add_event_waiter).
  virtual glex_ret_t wait_event(uint64_t addr, int32_t timeout_ms, glex_event* out);

  // The NIC's collective engine (chip/coll.h; glex/coll.cc): a descriptor, whose completion
  // (when it notifies, or fails) is a CQ entry of op GLEX_OP_COLL with `cookie`; a put that
  // waits for `cp_count` CPs; and dropping what a VP's collectives left in the NIC.
  virtual glex_ret_t post_coll(uint8_t vp, const galaxy::chip::CollDescriptor& d, uint64_t cookie);
  virtual glex_ret_t rdma_triggered(uint8_t vp, const glex_rdma_req& req, uint16_t cp_count);
  virtual void reset_coll(uint8_t /*vp*/) {}
  // The key a descriptor carries for memory handle `mh` (a local descriptor's destination).
  virtual uint32_t descriptor_key(glex_mem_handle_t mh) const { return static_cast<uint32_t>(mh); }
  // The memory handle whose descriptor key is `key` (the inverse of descriptor_key).
  virtual glex_mem_handle_t handle_of_key(uint32_t key) const {
    return galaxy::glex::sim_handle(key);
  }
  // What a collective tree's degree is chosen from (coll::choose_degree): the time of one level
  // of the tree and what each further child adds, offloaded and host-driven, in picoseconds.
  struct CollTiming {
    uint64_t offload_level_ps = 0, offload_child_ps = 0;
    uint64_t p2p_level_ps = 0, p2p_child_ps = 0;
  };
  virtual CollTiming coll_timing() const;
  // The chip id of the NIC a user names `name` in this device's fabric (glex_resolve_nic).
  virtual glex_ret_t resolve_nic(const char* name, uint32_t* chip);
  // The name of chip `chip` of this device's fabric (glex_node_name).
  virtual glex_ret_t node_name(uint32_t chip, std::string* name);
  // Whether [addr, addr + 16) lies in memory registered through this device (its NIC writes
  // the events there): glex_wait_event asks that device.
  bool holds(uint64_t addr) const {
    for (const auto& [base, len] : registered_)
      if (addr >= base && addr - base + 16 <= len) return true;
    return false;
  }

 protected:
  std::map<uint64_t, uint64_t> registered_;  // base -> length, kept by devices that wait
};

struct glex_ep {
  glex_device* device = nullptr;
  uint8_t vp = 0;
  uint16_t next_tid = 0;
};

namespace galaxy::glex {
// Sets glex_last_error() and returns ret (for the back ends).
glex_ret_t set_error(glex_ret_t ret, std::string message);
// Devices that wait for event words themselves (the simulated ones) register while open;
// glex_wait_event uses the one through which the event word was registered (else the first),
// or polls the memory when there is none.
void add_event_waiter(glex_device* d);
// resolve_nic over a fabric's chips: fabric::Topology::resolve, and the chip must be a NIC.
glex_ret_t resolve_nic_in(const fabric::Topology& t, const char* name, uint32_t* chip);
glex_ret_t node_name_in(const fabric::Topology& t, uint32_t chip, std::string* name);
void remove_event_waiter(glex_device* d);
}  // namespace galaxy::glex
