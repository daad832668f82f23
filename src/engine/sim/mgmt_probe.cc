#include "engine/sim/mgmt_probe.h"

#include <fmt/format.h>

#include <algorithm>

namespace galaxy::sim {

Result<ProbeResult> run_probe(SimFabric& fabric, const ProbeSpec& spec) {
  auto routes = fabric.shortest_routes(spec.server_nic, spec.target);
  if (!routes.ok()) return routes.error();
  bool eeprom = wire::is_eeprom(spec.type);
  size_t max_items = eeprom ? wire::kMaxEepromBytesPerPacket : wire::kMaxRegistersPerPacket;
  if (spec.addresses.empty() || spec.addresses.size() > max_items)
    return make_error(Code::kInvalidArgument, 4210,
                      fmt::format("probe: {} addresses; a packet carries 1 to {}",
                                  spec.addresses.size(), max_items));
  const auto& topo = fabric.topology();
  wire::MgmtDescriptor d;
  d.dest_id = static_cast<wire::ChipId>(spec.target);
  d.dest_type = topo.is_nic(spec.target) ? wire::ChipType::kNic : wire::ChipType::kNrc;
  d.dest_vp = spec.vp;
  d.src_vp = spec.vp;
  d.forward_route = routes->first;
  d.backward_route = routes->second;
  d.nmp_type = spec.type;
  d.m_key = spec.m_key;
  d.data.count = static_cast<uint8_t>(spec.addresses.size());
  for (size_t i = 0; i < spec.addresses.size(); ++i) {
    d.data.address[i] = spec.addresses[i];
    uint64_t v = i < spec.values.size() ? spec.values[i] : 0;
    if (eeprom)
      d.data.bytes[i] = static_cast<uint8_t>(v);
    else
      d.data.value[i] = v;
  }

  ProbeResult r;
  r.hops = d.dest_type == wire::ChipType::kNrc ? routes->first.hop_num : routes->first.hop_num - 1u;
  double sum = 0;
  Time sent_at = 0;
  Status failure;
  auto send = [&]() {
    d.transaction_id = static_cast<uint16_t>(r.completed);
    sent_at = fabric.sim().now();
    failure = fabric.post_mgmt(spec.server_nic, spec.vp, d);
  };
  fabric.set_mpq_listener([&](uint32_t nic, uint8_t vp) {
    if (nic != spec.server_nic || vp != spec.vp) return;
    auto mp = fabric.nic(nic).poll_mpq(vp);
    if (!mp || !mp->management) return;
    auto resp = wire::decode_mgmt_packet(std::span(mp->data).first(mp->length));
    if (!resp.ok() || resp->transaction_id != d.transaction_id) return;
    double us = to_us(fabric.sim().now() - sent_at);
    sum += us;
    r.min_us = r.completed == 0 ? us : std::min(r.min_us, us);
    r.max_us = std::max(r.max_us, us);
    r.last_response = *resp;
    ++r.completed;
    if (r.completed < spec.count && failure.ok()) send();
  });
  send();
  fabric.sim().run();
  fabric.set_mpq_listener(nullptr);
  if (!failure.ok()) return failure.error();
  if (r.completed < spec.count)
    return make_error(Code::kTimeout, 4211,
                      fmt::format("probe: {} of {} requests to node {} were answered", r.completed,
                                  spec.count, spec.target));
  r.mean_us = sum / r.completed;
  return r;
}

}  // namespace galaxy::sim
