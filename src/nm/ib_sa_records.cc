// The SA's records, one query per attribute (IBA 15.2.5): NodeRecord, PortInfoRecord,
// PathRecord, LinkRecord, ServiceRecord, InformInfoRecord. Each matches the request's template
// in the components its mask names.
#include <algorithm>

#include "nm/ib_sa.h"
#include "nm/ib_trace.h"
#include "wire/big_endian.h"

namespace galaxy::nm {
namespace {

using wire::SaStatus;

// Room for one record of `bytes` at the end of `out`, zeroed, padded to 8 bytes (the
// AttributeOffset's unit).
std::span<uint8_t> append_record(std::vector<uint8_t>& out, unsigned bytes) {
  const size_t at = out.size();
  out.resize(at + (bytes + 7) / 8 * 8, 0);
  return std::span<uint8_t>(out).subspan(at, bytes);
}

// The LID a port answers to: a switch's port 0's for all of its ports.
uint16_t port_lid(const IbSubnet& net, uint32_t n, uint32_t p) {
  const IbNode& node = net.nodes[n];
  return node.is_switch() ? node.lid() : node.ports[p].lid;
}

// The ports with a LID the components name (`lid_bit` then `gid_bit`), or all of them.
SaStatus endpoints(const IbSaView& v, uint64_t mask, uint64_t lid_bit, uint16_t lid,
                   uint64_t gid_bit, const wire::Gid& gid, std::vector<IbEndpoint>& out) {
  if (mask & lid_bit) {
    if (IbEndpoint e = v.at_lid(lid); e.node != kNoIbNode) out.push_back(e);
    return SaStatus::kOk;
  }
  if (mask & gid_bit) {
    auto it = v.by_port_guid.find(gid.guid);
    // A GID that names no port of this subnet is an invalid GID, not an empty answer.
    if (gid.prefix != v.gid_prefix || it == v.by_port_guid.end()) return SaStatus::kInvalidGid;
    out.push_back(it->second);
    return SaStatus::kOk;
  }
  for (uint16_t l = 1; l < v.by_lid.size(); ++l)
    if (v.by_lid[l].node != kNoIbNode) out.push_back(v.by_lid[l]);
  return SaStatus::kOk;
}

struct Walk {
  bool arrived = false;
  uint8_t mtu = 0;   // the smallest MTUCap on the way (IBA MTU code)
  uint8_t rate = 0;  // the slowest port's rate code
};

// A packet from port `s` to the LID of port `d`, as the switches' tables forward it. Every port
// it leaves or enters counts towards the path's MTU and rate, a switch at either end by its
// port 0 (as OpenSM's SA counts them).
Walk walk(const IbSaView& v, IbEndpoint s, IbEndpoint d, uint16_t dlid) {
  const IbSubnet& net = v.subnet;
  Walk w;
  auto count = [&w](const IbPort& port) {
    if (!port.known) return;
    const uint8_t mtu = port.info.mtu_cap();
    if (mtu != 0 && (w.mtu == 0 || mtu < w.mtu)) w.mtu = mtu;
    const uint8_t rate =
        wire::ib_rate_code(port.info.link_width_active(), port.info.link_speed_active());
    if (rate != 0 &&
        (w.rate == 0 || wire::ib_rate_half_gbps(rate) < wire::ib_rate_half_gbps(w.rate)))
      w.rate = rate;
  };
  // Leaves through `out` (a port of `node`) -> the node it enters, counted at both ends.
  auto cross = [&](uint32_t node, uint8_t out) {
    const IbPort& o = net.nodes[node].ports[out];
    count(o);
    count(net.nodes[o.peer_node].ports[o.peer_port]);
    return o.peer_node;
  };
  count(net.nodes[s.node].ports[s.port]);
  if (s == d) {
    w.arrived = true;
    return w;
  }
  uint32_t at = s.node;
  if (!net.nodes[at].is_switch()) {
    if (!net.nodes[at].ports[s.port].linked()) return w;
    const uint8_t in = net.nodes[at].ports[s.port].peer_port;
    at = cross(at, s.port);
    if (!net.nodes[at].is_switch()) {
      w.arrived = at == d.node && in == d.port;
      return w;
    }
  }
  for (unsigned hop = 0; hop <= kMaxIbTraceHops; ++hop) {
    const IbNode& sw = net.nodes[at];
    if (at == d.node) {
      count(sw.ports[0]);
      w.arrived = true;
      return w;
    }
    if (at >= v.routes.lft.size() || dlid >= v.routes.lft[at].size()) return w;
    const uint8_t p = v.routes.lft[at][dlid];
    if (p == 0 || p >= sw.ports.size() || !sw.ports[p].linked()) return w;
    const uint8_t in = sw.ports[p].peer_port;
    const uint32_t next = cross(at, p);
    if (!net.nodes[next].is_switch()) {
      w.arrived = next == d.node && in == d.port;
      return w;
    }
    at = next;
  }
  return w;  // a loop
}

// `have` against a selector and value (IBA 15.2.5.16: 0 greater than, 1 less than, 2 exactly,
// 3 the largest available).
bool selected(uint8_t selector, unsigned have, unsigned want) {
  switch (selector) {
    case 0:
      return have > want;
    case 1:
      return have < want;
    case 2:
      return have == want;
    default:
      return true;
  }
}

SaStatus node_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  const uint64_t mask = q.mask;
  const size_t max = q.max;
  namespace m = wire::nr_mask;
  const wire::NodeRecord want = wire::decode_node_record(q.tmpl);
  size_t n_out = 0;
  for (uint32_t n = 0; n < v.subnet.nodes.size() && n_out < max; ++n) {
    const IbNode& node = v.subnet.nodes[n];
    if ((mask & m::kNodeType) && node.info.node_type != want.info.node_type) continue;
    if ((mask & m::kNodeGuid) && node.info.node_guid != want.info.node_guid) continue;
    // One record per LID: a switch's, or each of a CA's ports with one (its NodeInfo as read
    // through that port: its GUID and number).
    for (uint32_t p = 0; p < node.ports.size() && n_out < max; ++p) {
      const IbPort& port = node.ports[p];
      if (port.lid == 0) continue;
      wire::NodeRecord r;
      r.lid = port.lid;
      r.info = node.info;
      if (!node.is_switch()) {
        r.info.port_guid = port.guid;
        r.info.local_port_num = static_cast<uint8_t>(p);
      }
      if ((mask & m::kLid) && r.lid != want.lid) continue;
      if ((mask & m::kPortGuid) && r.info.port_guid != want.info.port_guid) continue;
      std::copy_n(node.description.begin(), std::min<size_t>(node.description.size(), 64),
                  r.description.begin());
      encode_node_record(r, append_record(out, wire::kNodeRecordBytes));
      ++n_out;
    }
  }
  return SaStatus::kOk;
}

SaStatus port_info_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  const uint64_t mask = q.mask;
  const size_t max = q.max;
  namespace m = wire::pir_mask;
  const wire::PortInfoRecord want = wire::decode_port_info_record(q.tmpl);
  size_t n_out = 0;
  for (uint32_t n = 0; n < v.subnet.nodes.size() && n_out < max; ++n) {
    const IbNode& node = v.subnet.nodes[n];
    for (uint32_t p = node.is_switch() ? 0 : 1; p < node.ports.size() && n_out < max; ++p) {
      const IbPort& port = node.ports[p];
      const uint16_t lid = port_lid(v.subnet, n, p);
      if (!port.known || lid == 0) continue;
      if ((mask & m::kLid) && lid != want.lid) continue;
      if ((mask & m::kPort) && p != want.port) continue;
      // The capability bits asked for must all be set (as saquery -s asks for IsSM).
      if ((mask & m::kCapabilityMask) &&
          (port.info.capability_mask() & want.info.capability_mask()) !=
              want.info.capability_mask())
        continue;
      wire::PortInfoRecord r;
      r.lid = lid;
      r.port = static_cast<uint8_t>(p);
      r.info = port.info;
      encode_port_info_record(r, append_record(out, wire::kPortInfoRecordBytes));
      ++n_out;
    }
  }
  return SaStatus::kOk;
}

SaStatus inform_info_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  const uint64_t mask = q.mask;
  const size_t max = q.max;
  // ComponentMask bit 0: SubscriberGID (saquery -I <gid>); bit 1: Enum.
  const wire::InformInfoRecord want = wire::decode_inform_info_record(q.tmpl);
  size_t n_out = 0;
  for (const IbSubscription& s : *v.subscriptions) {
    if (n_out >= max) break;
    if ((mask & 1) && s.subscriber != want.subscriber) continue;
    if ((mask & 2) && s.enumeration != want.enumeration) continue;
    wire::InformInfoRecord r;
    r.subscriber = s.subscriber;
    r.enumeration = s.enumeration;
    r.info = s.info;
    encode_inform_info_record(r, append_record(out, wire::kInformInfoRecordBytes));
    ++n_out;
  }
  return SaStatus::kOk;
}

SaStatus path_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  const uint64_t mask = q.mask;
  const size_t max = q.max;
  namespace m = wire::pr_mask;
  const wire::PathRecord want = wire::decode_path_record(q.tmpl);
  std::vector<IbEndpoint> srcs, dsts;
  if (SaStatus s = endpoints(v, mask, m::kSlid, want.slid, m::kSgid, want.sgid, srcs);
      s != SaStatus::kOk)
    return s;
  if (SaStatus s = endpoints(v, mask, m::kDlid, want.dlid, m::kDgid, want.dgid, dsts);
      s != SaStatus::kOk)
    return s;
  // Both ends named (a port to itself: a loopback path), or every pair of different ports.
  const bool both_named = (mask & (m::kSlid | m::kSgid)) && (mask & (m::kDlid | m::kDgid));
  if ((mask & m::kPkey) && want.pkey != kIbDefaultPkey) return SaStatus::kOk;
  if ((mask & m::kSl) && want.sl != 0) return SaStatus::kOk;
  size_t n_out = 0;
  for (IbEndpoint s : srcs) {
    for (IbEndpoint d : dsts) {
      if (n_out >= max) return SaStatus::kOk;
      if (s == d && !both_named) continue;
      const uint16_t slid = port_lid(v.subnet, s.node, s.port);
      const uint16_t dlid = port_lid(v.subnet, d.node, d.port);
      const Walk there = walk(v, s, d, dlid);
      if (!there.arrived) continue;
      if ((mask & m::kMtu) && (mask & m::kMtuSelector) &&
          !selected(want.mtu_selector, there.mtu, want.mtu))
        continue;
      if ((mask & m::kRate) && (mask & m::kRateSelector) &&
          !selected(want.rate_selector, wire::ib_rate_half_gbps(there.rate),
                    wire::ib_rate_half_gbps(want.rate)))
        continue;
      wire::PathRecord r;
      r.service_id = want.service_id;
      r.sgid = {v.gid_prefix, v.subnet.nodes[s.node].ports[s.port].guid};
      r.dgid = {v.gid_prefix, v.subnet.nodes[d.node].ports[d.port].guid};
      r.slid = slid;
      r.dlid = dlid;
      // Reversible when the tables also carry the way back.
      const uint16_t back_lid = slid;
      r.reversible = walk(v, d, s, back_lid).arrived;
      r.num_path = 0;
      r.pkey = kIbDefaultPkey;
      r.sl = 0;
      r.mtu_selector = 2;  // exactly
      r.mtu = there.mtu;
      r.rate_selector = 2;
      r.rate = there.rate;
      r.pkt_life_selector = 2;
      r.pkt_life = s == d ? 0 : kIbPathPacketLifeTime;
      encode_path_record(r, append_record(out, wire::kPathRecordBytes));
      ++n_out;
    }
  }
  return SaStatus::kOk;
}

// LinkRecord (IBA 15.2.5.13): each direction of each link, its ends named by their nodes'
// LIDs (a switch's port 0's), as OpenSM lists them.
SaStatus link_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  namespace m = wire::lr_mask;
  const wire::LinkRecord want = wire::decode_link_record(q.tmpl);
  size_t n_out = 0;
  for (uint32_t n = 0; n < v.subnet.nodes.size() && n_out < q.max; ++n) {
    const IbNode& node = v.subnet.nodes[n];
    for (uint32_t p = 1; p < node.ports.size() && n_out < q.max; ++p) {
      const IbPort& port = node.ports[p];
      if (!port.linked()) continue;
      wire::LinkRecord r;
      r.from_lid = port_lid(v.subnet, n, p);
      r.from_port = static_cast<uint8_t>(p);
      r.to_lid = port_lid(v.subnet, port.peer_node, port.peer_port);
      r.to_port = port.peer_port;
      if (r.from_lid == 0 || r.to_lid == 0) continue;
      if ((q.mask & m::kFromLid) && r.from_lid != want.from_lid) continue;
      if ((q.mask & m::kFromPort) && r.from_port != want.from_port) continue;
      if ((q.mask & m::kToLid) && r.to_lid != want.to_lid) continue;
      if ((q.mask & m::kToPort) && r.to_port != want.to_port) continue;
      encode_link_record(r, append_record(out, wire::kLinkRecordBytes));
      ++n_out;
    }
  }
  return SaStatus::kOk;
}

// ServiceRecord Get and GetTable (IBA 15.2.5.14): the registered services matching the
// template; their ServiceKeys only for a trusted request.
SaStatus service_records(const IbSaView& v, const IbSaQueryArgs& q, std::vector<uint8_t>& out) {
  if (!v.services) return SaStatus::kOk;
  const wire::ServiceRecord want = wire::decode_service_record(q.tmpl);
  size_t n_out = 0;
  for (const IbService& s : *v.services) {
    if (n_out >= q.max) break;
    if (!wire::service_record_matches(s.record, want, q.mask)) continue;
    wire::ServiceRecord r = s.record;
    if (!q.trusted) r.key = {};
    encode_service_record(r, append_record(out, wire::kServiceRecordBytes));
    ++n_out;
  }
  return SaStatus::kOk;
}

}  // namespace

std::span<const IbSaAttribute> ib_sa_attributes() {
  static constexpr IbSaAttribute kAttributes[] = {
      {wire::SaAttr::kNodeRecord, "NodeRecord", wire::kNodeRecordBytes, node_records},
      {wire::SaAttr::kPortInfoRecord, "PortInfoRecord", wire::kPortInfoRecordBytes,
       port_info_records},
      {wire::SaAttr::kPathRecord, "PathRecord", wire::kPathRecordBytes, path_records},
      {wire::SaAttr::kLinkRecord, "LinkRecord", wire::kLinkRecordBytes, link_records},
      {wire::SaAttr::kServiceRecord, "ServiceRecord", wire::kServiceRecordBytes, service_records},
      {wire::SaAttr::kInformInfoRecord, "InformInfoRecord", wire::kInformInfoRecordBytes,
       inform_info_records},
  };
  return kAttributes;
}

}  // namespace galaxy::nm
