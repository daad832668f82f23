// libFuzzer target: a link item arriving on a process's direct path (engine/live/direct.h), as
// a peer process on another host (or anyone who can reach the socket) sends it. Whatever the
// bytes, arrive_direct neither crashes nor writes anywhere but an open VP's MPQ, and names a
// malformed item by its error id.
// Input: byte 0 says whether the target VPs are open (bit 0), whether to drain their MPQs
// (bit 1) and whether the process takes transfers' packets (bit 2, as one with a direct path's
// RDMA does); the rest is the item. The first inputs also seed items that decode (corpus),
// runs of a transfer's packets (ItemType::kDataRun) among them.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/live/direct.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"
#include "wire/mgmt.h"

namespace {

galaxy::live::Segment* segment_for_fuzzing() {
  static std::unique_ptr<galaxy::live::Segment> s = [] {
    auto f = galaxy::live::parse_live_fabric("live:fattree:k=4,levels=2,name=fzd" +
                                             std::to_string(getpid()) +
                                             ",hosts=h1:127.0.0.1:1,h2:127.0.0.1:2");
    if (!f.ok()) std::abort();
    auto seg = galaxy::live::Segment::create(*f, 1);  // removed when the process exits
    if (!seg.ok()) std::abort();
    // Links up, and routes in the host's NRCs: to a NIC beside it straight, to any other NIC up
    // or down any port towards an NRC (some items arrive, some go on or stop on the way).
    galaxy::live::Segment& g = **seg;
    for (uint32_t n = 0; n < g.num_chips(); ++n)
      for (uint32_t p = 0; p < g.chip(n).num_ports; ++p) g.peer(n, p).up.store(1);
    for (uint32_t n = 0; n < g.num_chips(); ++n) {
      const galaxy::live::ChipInfo& c = g.chip(n);
      if (c.local == galaxy::live::kNoLocal || g.nic_of(n)) continue;
      for (uint32_t d = 0; d < g.num_chips(); ++d) {
        galaxy::chip::PortSet direct, onwards;
        for (uint32_t p = 0; p < c.num_ports; ++p) {
          const uint32_t peer = g.peer(n, p).chip;
          if (peer == d) direct.set(p);
          if (peer != galaxy::live::kNoChip && !g.nic_of(peer) &&
              g.chip(peer).type == static_cast<uint8_t>(galaxy::wire::ChipType::kNrc))
            onwards.set(p);
        }
        for (uint32_t in = 0; in < c.num_ports; ++in)
          g.route_row(c.local, in)[d].store(direct.any() ? direct : onwards);
      }
    }
    return std::move(*seg);
  }();
  return s.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  galaxy::live::Segment& seg = *segment_for_fuzzing();
  const bool open = data[0] & 1, drain = data[0] & 2, transfers = data[0] & 4;
  for (uint32_t n = 0; n < seg.num_chips(); ++n) {
    galaxy::live::NicSlot* nic = seg.nic_of(n);
    if (!nic) continue;
    for (galaxy::live::VpSlot& vp : nic->vps) {
      if (vp.owner_pid.load() == 0) {
        vp.mpq.init();
        vp.owner_pid.store(getpid());
      }
      vp.open.store(open ? 1 : 0);
      while (drain && vp.mpq.peek()) vp.mpq.pop();
    }
  }
  static galaxy::live::ArrivalPaths paths;
  galaxy::Error why;
  galaxy::live::TransferArrival t;
  const std::span<const uint8_t> item(data + 1, size - 1);
  const auto a = galaxy::live::arrive_direct(seg, item, &paths, &why, transfers ? &t : nullptr);
  // Dropped only with the ids arrive_direct names (direct.h).
  if (a == galaxy::live::Arrival::kDropped && why.id != 4891 && why.id != 4892 && why.id != 2082 &&
      why.id != 2083 && why.id != 2084)
    std::abort();
  // A transfer's packet is one the NIC's checks passed, its run within the item.
  if (a == galaxy::live::Arrival::kTransfer &&
      (!transfers || t.packet.head.bytes > t.packet.payload.size() ||
       (!t.run.empty() &&
        (t.run.data() < item.data() || t.run.data() + t.run.size() > item.data() + item.size()))))
    std::abort();
  return 0;
}
