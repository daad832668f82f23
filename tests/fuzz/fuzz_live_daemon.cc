// libFuzzer target: the fabric daemon's untrusted inputs — link items arriving from another
// host (inside link-layer frames) and egress cells written by local processes. Whatever the
// bytes, the daemon neither crashes nor touches memory it was not given a registration for.
// Input: byte 0 even -> a frame payload for link (byte 1 mod links); odd -> an egress cell of
// kind byte 1 with the rest as its body.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "engine/live/daemon.h"
#include "engine/live/live_spec.h"

namespace {

galaxy::live::FabricDaemon* daemon_for_fuzzing() {
  static std::unique_ptr<galaxy::live::FabricDaemon> d = [] {
    const int port = 40000 + getpid() % 20000;
    auto f = galaxy::live::parse_live_fabric("live:fattree:k=4,levels=2,name=fuzz" +
                                             std::to_string(getpid()) +
                                             ",hosts=h1:127.0.0.1:" + std::to_string(port) +
                                             ",h2:127.0.0.1:" + std::to_string(port + 1));
    if (!f.ok()) std::abort();
    galaxy::live::DaemonOptions o;
    o.liveness_interval_ns = UINT64_MAX / 2;
    auto r = galaxy::live::FabricDaemon::start(*f, 0, o);
    if (!r.ok()) std::abort();
    return std::move(*r);
  }();
  return d.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  galaxy::live::FabricDaemon* d = daemon_for_fuzzing();
  if (data[0] % 2 == 0) {
    if (d->num_links() == 0) return 0;
    d->feed_frame(data[1] % d->num_links(), std::span<const uint8_t>(data + 2, size - 2));
  } else {
    galaxy::live::EgressCell cell{};
    cell.kind = data[1];
    const size_t n = std::min<size_t>(size - 2, galaxy::live::kEgressBody);
    std::memcpy(cell.body, data + 2, n);
    cell.length = static_cast<uint32_t>(n);
    d->feed_egress(cell);
  }
  return 0;
}
