// The host side of one simulated NIC: what libglex's data calls do to the chip model, written
// once for the in-process simulated device (sim_device.cc) and for the simulation server that
// serves processes over a socket (sim_server.cc). Nothing here passes time: the caller runs the
// simulator to the host's clock first and charges the host's cost (cost()) after.
//
// The NIC reaches the process's own memory: a registration enters the pages' virtual addresses
// in the ATT as its frames, and the NIC's DMA reads and writes them with cross-memory attach,
// so an unmapped page is an error, never a crash.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>

#include "engine/sim/sim_fabric.h"
#include "glex.h"
#include "glex/device.h"

namespace galaxy::glex {

// A process's memory as the NIC sees it (chip/host_memory.h): physical = virtual address.
class ProcessMemory final : public chip::HostMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  Status read(uint64_t phys, std::span<uint8_t> out) override;
  Status write(uint64_t phys, std::span<const uint8_t> in) override;
  pid_t pid() const { return pid_; }
  // Bumped by every NIC write into any process (several simulated NICs may write into one
  // process): waiters on a memory word look again only when it moved.
  static uint64_t writes() { return writes_; }

 private:
  pid_t pid_;
  static inline uint64_t writes_ = 0;
};

// The host's time for posting a descriptor of `bytes` on `vp` (calibration): a PIO VP's
// descriptor is written into the NIC's HDQ by PIO (pio_submit); a DMA VP's goes into host memory
// with a doorbell (host_send), and the NIC fetches it (the engine's nic_sdq_fetch).
inline sim::Time post_cost(const sim::Timing& t, uint8_t vp, uint64_t bytes) {
  return chip::is_pio_vp(vp) ? t.pio_submit(bytes) : t.host_send;
}
// The host's time for taking an entry (an MP, a completion), and the extra when it had to wait
// for it (host_receive, host_wakeup).
inline sim::Time take_cost(const sim::Timing& t, bool waited) {
  return t.host_receive + (waited ? t.host_wakeup : 0);
}

// The timing model's collective figures (glex_device::CollTiming) when a tree's neighbours are
// `links` links apart on average: a level is a CP's build, its hops and (host-driven) the
// receiving host's MP write, poll, wake-up and the next post; a child adds a descriptor at the
// NIC, or a post and a take at the host.
glex_device::CollTiming coll_timing(const sim::Timing& t, double links);
// The mean distance in links from NIC `node` to the NICs of `members` (all NICs when empty).
double mean_links(const fabric::Topology& topo, uint32_t node, std::span<const uint32_t> members);

// What a blocked host call waits for.
enum class SimWait : uint8_t { kMp, kCq, kFence, kEvent, kMgmt };

class SimHost {
 public:
  SimHost(sim::SimFabric& fabric, uint32_t nic_node, pid_t pid);
  ~SimHost();
  SimHost(const SimHost&) = delete;
  SimHost& operator=(const SimHost&) = delete;

  uint32_t node() const { return node_; }
  wire::ChipId chip_id() const;
  chip::Nic& nic() const { return fabric_.nic(node_); }
  sim::SimFabric& fabric() const { return fabric_; }
  const ProcessMemory& memory() const { return memory_; }

  Result<uint8_t> open_vp(int32_t wanted);
  void close_vp(uint8_t vp);

  glex_ret_t register_mem(uint64_t addr, uint64_t len, uint32_t access, glex_mem_handle_t* mh);
  glex_ret_t deregister_mem(glex_mem_handle_t mh);
  glex_ret_t send_mp(uint8_t vp, glex_ep_addr_t dest, std::span<const uint8_t> data,
                     uint32_t flags);
  // req.local_addr is an address of the process; `immediate` holds an immediate RDMA's bytes
  // (the caller read them from local_addr).
  // cp_count: a CP-triggered put (chip/coll.h).
  glex_ret_t rdma(uint8_t vp, const glex_rdma_req& req, std::span<const uint8_t> immediate,
                  uint16_t cp_count = 0);
  // A descriptor of the NIC's collective engine; its completion is a CQ entry of op
  // GLEX_OP_COLL with `cookie`.
  glex_ret_t post_coll(uint8_t vp, const chip::CollDescriptor& d, uint64_t cookie);
  // Drops what the VP's collectives left in the NIC (chip::Nic::reset_coll).
  void reset_coll(uint8_t vp);

  // Non-blocking halves of the waiting calls: GLEX_NO_ENTRY when there is nothing yet.
  glex_ret_t try_recv_mp(uint8_t vp, glex_mp* mp);
  glex_ret_t try_poll_cq(uint8_t vp, glex_cq_entry* e);
  glex_ret_t try_event(uint64_t addr, glex_event* out);
  // Whether a wait of this kind would return now (the event word is read only after a write).
  bool ready(SimWait w, uint8_t vp, uint64_t addr);

  // The host's time for a call that did something (posted, or took an entry), and the extra
  // when it had to wait first (calibration: host_send, host_receive, host_wakeup). A PIO VP's
  // descriptor is written into the NIC's HDQ by PIO (pio_submit); a DMA VP's goes into host
  // memory with a doorbell (host_send), and the NIC fetches it (the engine's nic_sdq_fetch).
  sim::Time post_cost(uint8_t vp, uint64_t descriptor_bytes) const {
    return glex::post_cost(fabric_.timing(), vp, descriptor_bytes);
  }
  // The descriptor each posting call writes (wire/rdma_descriptor.h, wire/mp.h, wire/mgmt.h).
  static uint64_t rdma_descriptor_bytes(uint32_t op, uint64_t len);
  static uint64_t mp_descriptor_bytes(uint32_t len);
  static uint64_t mgmt_descriptor_bytes(const wire::MgmtDescriptor& d);
  // A collective descriptor: an MP descriptor and one word (a local one: two).
  static uint64_t coll_descriptor_bytes(const chip::CollDescriptor& d);
  sim::Time take_cost(bool waited) const { return glex::take_cost(fabric_.timing(), waited); }

 private:
  struct Posted {
    uint32_t op = 0;
    uint64_t cookie = 0;
    uint64_t bytes = 0;
    bool local_cq = false;
  };
  glex_ret_t check_dest(glex_ep_addr_t dest) const;
  glex_ret_t check_vp_open(uint8_t vp, const char* fn) const;
  void remember(uint8_t vp, uint64_t sequence, Posted p);

  sim::SimFabric& fabric_;
  uint32_t node_;
  ProcessMemory memory_;
  std::array<bool, chip::kNumVps> used_{};
  // Per VP: what each posted descriptor was, by its submission number, for its CQ entry.
  std::array<std::unordered_map<uint64_t, Posted>, chip::kNumVps> posted_{};
  std::unordered_map<uint32_t, bool> regions_;  // keys registered by this host
  uint64_t event_writes_seen_ = UINT64_MAX;
};

}  // namespace galaxy::glex
