#include "nm/mkey.h"

#include <fmt/format.h>

#include <memory>

#include "chip/registers.h"
#include "nm/fabric_map.h"
#include "nm/requester.h"

namespace galaxy::nm {

uint64_t mkey_of(const MKeyPolicy& p, wire::ChipId chip_id) {
  if (!p.enabled() || !p.per_chip) return p.key;
  // SplitMix64's finaliser over the key and the chip id: every chip a different, well-mixed key.
  uint64_t z = p.key ^ (uint64_t{chip_id} * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z != 0 ? z : 1;  // 0 would read as "no key"
}

Result<MKeyPlacement> place_mkeys(Requester& req, const FabricMap& map, const MKeyPolicy& p,
                                  const std::function<bool(uint32_t node)>& include) {
  if (p.level < 1 || p.level > 2)
    return make_error(
        Code::kInvalidArgument, 5460,
        fmt::format("M_Key level {} is not 1 (writes) or 2 (reads and writes)", p.level));
  if (!p.enabled())
    return make_error(Code::kInvalidArgument, 5461, "M_Key placement without a key (0)");
  auto out = std::make_shared<MKeyPlacement>();
  const Picoseconds start = req.port().now();
  const uint64_t sent0 = req.stats().sent;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node || (include && !include(v))) continue;
    const MgmtTarget& t = map.target[v];
    if (t.chip_id == wire::kUnconfiguredId) continue;
    auto fail = [out, v, &map](const MgmtReply& r) {
      ++out->failed;
      if (out->first.ok())
        out->first = make_error(r.status.error().code, 5462,
                                fmt::format("M_Key placement at {}: {}", map.topology.name(v),
                                            r.status.error().message));
    };
    const unsigned level = p.level;
    req.submit(MgmtRequest::write2(t, chip::reg::kMKey, mkey_of(p, t.chip_id),
                                   chip::reg::kMKeyLease, p.lease_s),
               [&req, t, level, out, fail](const MgmtReply& r) {
                 if (!r.status.ok()) return fail(r);
                 req.submit(MgmtRequest::read(t, chip::reg::kChipCtrl),
                            [&req, t, level, out, fail](const MgmtReply& rd) {
                              if (!rd.status.ok()) return fail(rd);
                              const uint64_t ctrl =
                                  (rd.response.data.value[0] & ~uint64_t{3}) | level;
                              req.submit(MgmtRequest::write(t, chip::reg::kChipCtrl, ctrl),
                                         [out, fail](const MgmtReply& w) {
                                           if (!w.status.ok()) return fail(w);
                                           ++out->chips;
                                         });
                            });
               });
  }
  req.run();
  out->requests = req.stats().sent - sent0;
  out->elapsed = req.port().now() - start;
  return *out;
}

}  // namespace galaxy::nm
