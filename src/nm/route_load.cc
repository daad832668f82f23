#include "nm/route_load.h"

#include <fmt/format.h>

#include <memory>

#include "base/bits.h"
#include "chip/data_vc.h"
#include "chip/eeprom.h"
#include "chip/registers.h"
#include "chip/rt_select.h"

namespace galaxy::nm {

namespace {

// Counts a reply: failed after retries or refused by the NMA.
void tally(const MgmtReply& r, uint64_t& failed) {
  if (!r.status.ok()) ++failed;
}

}  // namespace

Result<LoadResult> load_routes(Requester& req, const FabricMap& map, const RouteSet& routes,
                               const LoadOptions& options) {
  if (routes.writes.size() != map.num_nodes())
    return make_error(Code::kInvalidArgument, 5200,
                      fmt::format("route set has tables for {} nodes but the map has {}",
                                  routes.writes.size(), map.num_nodes()));
  LoadResult out;
  const Picoseconds start = req.port().now();
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (map.topology.is_nic(v) || routes.writes[v].empty()) continue;
    if (v == map.server_node || map.target[v].chip_id == wire::kUnconfiguredId)
      return make_error(Code::kNotFound, 5201,
                        fmt::format("NRC node {} has no management route in the map", v));
    ++out.nrcs;
    const unsigned ports = map.topology.num_ports(v);
    for (const RangeWrite& w : routes.writes[v])
      for (const chip::RtWrite& rw :
           chip::rt_writes(w.inputs, w.first_dest, w.count, w.ports, ports)) {
        req.submit(MgmtRequest::write2(map.target[v], chip::reg::kRtSelect, rw.select,
                                       chip::reg::kRtData, rw.data),
                   [&out](const MgmtReply& r) { tally(r, out.failed); });
        ++out.packets;
      }
  }
  // The ports' VC rules, 16 ports per VC_RULES register, two registers per packet.
  for (uint32_t v = 0; v < map.num_nodes() && v < routes.vc_rules.size(); ++v) {
    if (map.topology.is_nic(v) || routes.vc_rules[v].empty()) continue;
    const unsigned ports = map.topology.num_ports(v);
    std::vector<uint64_t> words(ports == 0 ? 0 : chip::vc_rules_word(ports - 1) + 1);
    for (unsigned p = 0; p < ports; ++p)
      words[chip::vc_rules_word(p)] |= uint64_t{routes.vc_rule(v, p)} << chip::vc_rule_shift(p);
    for (size_t i = 0; i < words.size(); i += 2) {
      const auto a = static_cast<uint16_t>(chip::reg::kVcRules + i);
      req.submit(i + 1 < words.size()
                     ? MgmtRequest::write2(map.target[v], a, words[i], static_cast<uint16_t>(a + 1),
                                           words[i + 1])
                     : MgmtRequest::write(map.target[v], a, words[i]),
                 [&out](const MgmtReply& r) { tally(r, out.failed); });
      ++out.vc_rule_packets;
    }
  }
  req.run();

  if (options.verify_per_nrc > 0) {
    // Per NRC one chain select -> read -> select -> read, so no other write moves RT_SELECT in
    // between; the NRCs run in parallel.
    // Each read: the first entry of a write on its lowest input port, one output half at a
    // time (RT_SELECT count 1, then RT_DATA).
    struct Read {
      uint64_t select;
      uint64_t expect;
    };
    struct Chain {
      uint32_t node;
      std::vector<Read> reads;
      size_t next = 0;
    };
    std::vector<std::unique_ptr<Chain>> chains;
    std::function<void(Chain*)> step = [&](Chain* c) {
      if (c->next >= c->reads.size()) return;
      const Read& rd = c->reads[c->next];
      out.verify_packets += 2;
      req.submit(MgmtRequest::write(map.target[c->node], chip::reg::kRtSelect, rd.select),
                 [&, c](const MgmtReply& r) {
                   tally(r, out.failed);
                   req.submit(MgmtRequest::read(map.target[c->node], chip::reg::kRtData),
                              [&, c, expect = rd.expect](const MgmtReply& rr) {
                                tally(rr, out.failed);
                                if (rr.status.ok() && rr.response.data.value[0] != expect)
                                  ++out.verify_mismatches;
                                ++c->next;
                                step(c);
                              });
                 });
    };
    for (uint32_t v = 0; v < map.num_nodes(); ++v) {
      if (map.topology.is_nic(v) || routes.writes[v].empty()) continue;
      auto c = std::make_unique<Chain>();
      c->node = v;
      const unsigned halves = chip::rt_halves(map.topology.num_ports(v));
      const size_t n = std::min<size_t>(routes.writes[v].size(), options.verify_per_nrc);
      for (size_t i = 0; i < n; ++i) {
        const RangeWrite& w = routes.writes[v][i];
        if (w.inputs.none()) continue;
        for (unsigned h = 0; h < halves; ++h)
          c->reads.push_back(
              {chip::rt_select_entry(static_cast<unsigned>(w.inputs.lowest()), w.first_dest, h),
               w.ports.word(h)});
      }
      chains.push_back(std::move(c));
    }
    for (auto& c : chains) step(c.get());
    req.run();
  }

  if (options.also_eeprom) {
    const Picoseconds e0 = req.port().now();
    for (uint32_t v = 0; v < map.num_nodes(); ++v) {
      if (map.topology.is_nic(v) || routes.writes[v].empty()) continue;
      chip::BootImage image;
      for (const RangeWrite& w : routes.writes[v])
        image.routes.push_back({w.inputs, w.first_dest, w.count, w.ports});
      std::vector<uint8_t> bytes = chip::encode_boot_image(image);
      if (bytes.size() > chip::kEepromBytes)
        return make_error(Code::kResourceExhausted, 5202,
                          fmt::format("boot image of NRC chip {} is {} bytes, the EEPROM {}",
                                      map.chip_id[v], bytes.size(), chip::kEepromBytes));
      for (size_t off = 0; off < bytes.size(); off += wire::kMaxEepromBytesPerPacket) {
        MgmtRequest r;
        r.target = map.target[v];
        r.type = wire::NmpType::kEepromWriteRequest;
        r.data.count = static_cast<uint8_t>(
            std::min<size_t>(wire::kMaxEepromBytesPerPacket, bytes.size() - off));
        for (uint8_t i = 0; i < r.data.count; ++i) {
          r.data.address[i] = static_cast<uint16_t>(off + i);
          r.data.bytes[i] = bytes[off + i];
        }
        req.submit(r, [&out](const MgmtReply& rr) { tally(rr, out.failed); });
        ++out.eeprom_packets;
      }
    }
    req.run();
    out.eeprom_elapsed = req.port().now() - e0;
  }
  out.elapsed = req.port().now() - start;
  return out;
}

}  // namespace galaxy::nm
