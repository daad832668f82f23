// libFuzzer target: the VIA provider's untrusted input, the MPs a peer VI sends (src/via,
// docs/via.md): eager sends, MP trains, bounce-slot notices, read requests (kRts) and their
// further segments, completions, credits, acknowledgements, errors; and the requests a NIC's
// connection manager holds (client-server and peer to peer). Whatever the bytes, a
// connected VI takes them, completes its receives with a status or drops the MP, and never
// crashes or writes outside its receives. The NIC is a simulated one in this process.
// Input: a sequence of MPs, each a length byte (mod 121) followed by its bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine/sim/calibration.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "glex/device.h"
#include "glex/sim_device.h"
#include "via/via_internal.h"

namespace {

using namespace galaxy;

struct World {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> device;
  VIP_NIC_HANDLE nic = nullptr;
  VIP_PROTECTION_HANDLE tag = nullptr;
  uint8_t* mem = nullptr;  // descriptors, then receive buffers
  VIP_MEM_HANDLE mh = 0;
  static constexpr size_t kBytes = 1 << 16;
};

World* world() {
  static World* w = [] {
    auto* w = new World;
    auto topo = fabric::build_topology("fattree:k=4,levels=2");
    auto timing = sim::default_timing();
    if (!topo.ok() || !timing.ok()) std::abort();
    auto f = sim::SimFabric::create(*topo, *timing, sim::SimOptions{});
    if (!f.ok()) std::abort();
    w->fabric = std::move(*f);
    w->device = glex::open_sim_device(*w->fabric, w->fabric->topology().nic_node(0));
    if (via::open_nic_on(w->device.get(), &w->nic) != VIP_SUCCESS) std::abort();
    VipErrorCallback(w->nic, nullptr, [](VIP_PVOID, VIP_ERROR_DESCRIPTOR*) {});
    VipCreatePtag(w->nic, &w->tag);
    w->mem = static_cast<uint8_t*>(std::aligned_alloc(4096, World::kBytes));
    std::memset(w->mem, 0, World::kBytes);
    VIP_MEM_ATTRIBUTES ma{w->tag, VIP_TRUE, VIP_TRUE};
    if (VipRegisterMem(w->nic, w->mem, World::kBytes, &ma, &w->mh) != VIP_SUCCESS) std::abort();
    return w;
  }();
  return w;
}

VIP_DESCRIPTOR* receive(World* w, int slot,
                        std::initializer_list<std::pair<size_t, uint32_t>> segs) {
  auto* d = reinterpret_cast<VIP_DESCRIPTOR*>(w->mem + slot * 256);
  std::memset(d, 0, 256);
  d->CS.SegCount = static_cast<VIP_UINT16>(segs.size());
  int i = 0;
  for (auto [off, len] : segs) {
    d->DS[i].Local.Data.Address = w->mem + 4096 + off;
    d->DS[i].Local.Handle = w->mh;
    d->DS[i].Local.Length = len;
    ++i;
  }
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World* w = world();
  VIP_VI_ATTRIBUTES a{};
  a.ReliabilityLevel =
      size && (data[0] & 1) ? VIP_SERVICE_UNRELIABLE : VIP_SERVICE_RELIABLE_RECEPTION;
  a.MaxTransferSize = 1 << 20;
  a.Ptag = w->tag;
  a.EnableRdmaWrite = a.EnableRdmaRead = VIP_TRUE;
  VIP_VI_HANDLE vi = nullptr;
  if (VipCreateVi(w->nic, &a, nullptr, nullptr, &vi) != VIP_SUCCESS) return 0;
  // Receives of several shapes, then a connection to a peer: this NIC's own manager.
  VipPostRecv(vi, receive(w, 0, {{0, 64}}), w->mh);
  VipPostRecv(vi, receive(w, 1, {{100, 7}, {200, 5000}}), w->mh);
  VipPostRecv(vi, receive(w, 2, {{8000, 20000}}), w->mh);
  VipPostRecv(vi, receive(w, 3, {{30000, 1}}), w->mh);
  const glex_ep_addr_t peer = GLEX_EP_ADDR(glex_device_node(w->device.get()), via::kCmVp);
  {
    std::lock_guard lock(w->nic->mu);
    via::connect_to(vi, peer, a, 0x12345678, 42, 0, 0);
    for (size_t at = 1; at < size;) {
      glex_mp mp{};
      mp.src = peer;
      const uint32_t want = data[at++] % (GLEX_MP_PAYLOAD + 1);
      mp.len = std::min<uint32_t>(want, static_cast<uint32_t>(size - at));
      std::memcpy(mp.data, data + at, mp.len);
      at += mp.len;
      via::deliver(vi, mp);
      via::deliver_to_manager(w->nic, mp);  // the connection manager reads requests too
    }
    via::progress(vi);
    w->nic->pending.clear();
    w->nic->peer_pending.clear();
    w->nic->peer_taken.clear();
  }
  VipDisconnect(vi);
  VIP_DESCRIPTOR* d = nullptr;
  for (int i = 0; i < 8; ++i) VipRecvDone(vi, &d);
  VipDestroyVi(vi);
  return 0;
}
