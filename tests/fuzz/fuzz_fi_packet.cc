// libFuzzer target: the libfabric provider's untrusted input, the MPs a peer endpoint sends
// (src/fi, docs/libfabric.md "Packets"): message heads and their continuations, long-message
// announcements, answers to them, remote CQ data. Whatever the bytes, an endpoint with receives
// posted takes them, completes receives with a status or drops the MP (E6603), and never crashes
// or writes outside its receives. The NIC is a simulated one in this process.
// Input: a sequence of MPs, each a source byte (which of three peers), a length byte (mod 121),
// then its bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine/sim/calibration.h"
#include "engine/sim/sim_fabric.h"
#include "fabric/builders.h"
#include "fi/fi_internal.h"
#include "glex/device.h"
#include "glex/sim_device.h"

extern "C" fi_provider* fi_prov_ini(void);

namespace {

using namespace galaxy;

struct World {
  std::unique_ptr<sim::SimFabric> fabric;
  std::unique_ptr<glex_device> device;
  fi::Fabric fab;
  fi::Domain domain;
  fid_ep* ep = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  glex_ep_addr_t peers[3];
  char* bufs = nullptr;  // receive buffers, with guard bytes around each
  static constexpr size_t kSlot = 8192, kGuard = 64, kSlots = 8;
};

World* world() {
  static World* w = [] {
    auto* w = new World;
    fi_prov_ini();  // the provider's name in its log lines
    auto topo = fabric::build_topology("fattree:k=4,levels=2");
    auto timing = sim::default_timing();
    if (!topo.ok() || !timing.ok()) std::abort();
    auto f = sim::SimFabric::create(*topo, *timing, sim::SimOptions{});
    if (!f.ok()) std::abort();
    w->fabric = std::move(*f);
    w->device = glex::open_sim_device(*w->fabric, w->fabric->topology().nic_node(0));
    w->fab.name = "galaxy";
    w->domain.fabric = &w->fab;
    w->domain.dev = w->device.get();
    w->domain.fid.self = &w->domain;
    fid_domain* d = &w->domain.fid.domain;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    if (fi::open_cq(d, &ca, &w->cq, nullptr) || fi::open_av(d, &aa, &w->av, nullptr) ||
        fi::open_endpoint(d, nullptr, &w->ep, nullptr))
      std::abort();
    for (int i = 0; i < 3; ++i)
      w->peers[i] = GLEX_EP_ADDR(w->fabric->topology().nic_node(1 + i), 8 + i);
    fi::Endpoint* ep = reinterpret_cast<fi::EpFid*>(w->ep)->self;
    fi_addr_t out[3];
    glex_ep_addr_t addrs[3] = {w->peers[0], w->peers[1], w->peers[2]};
    if (w->av->ops->insert(w->av, addrs, 3, out, 0, nullptr) != 3) std::abort();
    if (ep->fid.ep.fid.ops->bind(&ep->fid.ep.fid, &w->av->fid, 0) ||
        ep->fid.ep.fid.ops->bind(&ep->fid.ep.fid, &w->cq->fid, FI_TRANSMIT | FI_RECV) ||
        ep->fid.ep.fid.ops->control(&ep->fid.ep.fid, FI_ENABLE, nullptr))
      std::abort();
    w->bufs = static_cast<char*>(std::malloc(World::kSlots * (World::kSlot + 2 * World::kGuard)));
    return w;
  }();
  return w;
}

char* slot(World* w, size_t i) {
  return w->bufs + i * (World::kSlot + 2 * World::kGuard) + World::kGuard;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World* w = world();
  fi::Endpoint* ep = reinterpret_cast<fi::EpFid*>(w->ep)->self;
  std::memset(w->bufs, 0x5A, World::kSlots * (World::kSlot + 2 * World::kGuard));
  // Receives of several kinds and sizes: tagged with masks, untagged, from any source or one.
  const size_t lens[World::kSlots] = {0, 1, 88, 100, 300, 4096, 8192, 50};
  for (size_t i = 0; i < World::kSlots; ++i) {
    const bool tagged = i % 2;
    const fi_addr_t from = i % 3 == 0 ? FI_ADDR_UNSPEC : static_cast<fi_addr_t>(i % 3);
    fi::post_recv(ep, slot(w, i), lens[i], from, i * 3, i == 5 ? ~uint64_t{0} : 0xF, tagged,
                  reinterpret_cast<void*>(i + 1), 0);
  }
  size_t at = 0;
  while (at + 2 <= size) {
    glex_mp mp{};
    mp.src = w->peers[data[at] % 3];
    const uint32_t len = data[at + 1] % (GLEX_MP_PAYLOAD + 1);
    at += 2;
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(len, size - at));
    std::memcpy(mp.data, data + at, n);
    mp.len = n;
    at += n;
    fi::take_packet(ep, mp);
  }
  // Whatever happened, nothing outside the receives changed.
  for (size_t i = 0; i < World::kSlots; ++i) {
    const char* s = slot(w, i);
    for (size_t g = 0; g < World::kGuard; ++g)
      if (s[-1 - static_cast<long>(g)] != 0x5A || s[World::kSlot + g] != 0x5A) std::abort();
    for (size_t b = lens[i]; b < World::kSlot; ++b)
      if (s[b] != 0x5A) std::abort();
  }
  // Reset: every receive cancelled, every completion read, everything kept dropped.
  for (size_t i = 0; i < World::kSlots; ++i) fi::cancel_recv(ep, reinterpret_cast<void*>(i + 1));
  fi::Cq* cq = reinterpret_cast<fi::CqFid*>(w->cq)->self;
  cq->done.clear();
  cq->errors.clear();
  for (auto& q : ep->unexpected) q.clear();
  ep->peers.clear();
  ep->claimed.clear();
  ep->out.clear();
  return 0;
}
