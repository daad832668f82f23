#include "wire/ib_sa.h"

#include <arpa/inet.h>

#include <algorithm>

#include "wire/big_endian.h"

namespace galaxy::wire {
namespace {

// Offsets within Mad::data (the MAD's byte 24 on).
constexpr size_t kRmppAt = 0;
constexpr size_t kSmKeyAt = kSaHeaderOffset - kMadHeaderBytes;  // 12
constexpr size_t kAttrOffsetAt = kSmKeyAt + 8;
constexpr size_t kCompMaskAt = kAttrOffsetAt + 4;
constexpr size_t kRecordsAt = kSaDataOffset - kMadHeaderBytes;  // 32

void put_gid(std::span<uint8_t> b, size_t at, const Gid& g) {
  put_be(b, at, 8, g.prefix);
  put_be(b, at + 8, 8, g.guid);
}
Gid get_gid(std::span<const uint8_t> b, size_t at) {
  return {get_be(b, at, 8), get_be(b, at + 8, 8)};
}

}  // namespace

SaHeader decode_sa_header(const Mad& m) {
  std::span<const uint8_t> d(m.data);
  SaHeader h;
  h.rmpp.version = d[kRmppAt];
  h.rmpp.type = d[kRmppAt + 1];
  h.rmpp.resp_time = get_bits_be(d, kRmppAt + 2, 3, 5);
  h.rmpp.flags = get_bits_be(d, kRmppAt + 2, 0, 3);
  h.rmpp.status = d[kRmppAt + 3];
  h.rmpp.segment = static_cast<uint32_t>(get_be(d, kRmppAt + 4, 4));
  h.rmpp.payload_length = static_cast<uint32_t>(get_be(d, kRmppAt + 8, 4));
  h.sm_key = get_be(d, kSmKeyAt, 8);
  h.attribute_offset = static_cast<uint16_t>(get_be(d, kAttrOffsetAt, 2));
  h.component_mask = get_be(d, kCompMaskAt, 8);
  return h;
}

void encode_sa_header(Mad& m, const SaHeader& h) {
  std::span<uint8_t> d(m.data);
  d[kRmppAt] = h.rmpp.version;
  d[kRmppAt + 1] = h.rmpp.type;
  d[kRmppAt + 2] = 0;
  put_bits_be(d, kRmppAt + 2, 3, 5, h.rmpp.resp_time);
  put_bits_be(d, kRmppAt + 2, 0, 3, h.rmpp.flags);
  d[kRmppAt + 3] = h.rmpp.status;
  put_be(d, kRmppAt + 4, 4, h.rmpp.segment);
  put_be(d, kRmppAt + 8, 4, h.rmpp.payload_length);
  put_be(d, kSmKeyAt, 8, h.sm_key);
  put_be(d, kAttrOffsetAt, 2, h.attribute_offset);
  put_be(d, kAttrOffsetAt + 2, 2, 0);
  put_be(d, kCompMaskAt, 8, h.component_mask);
}

std::span<uint8_t, kSaDataBytes> sa_data(Mad& m) {
  return std::span<uint8_t, kSaDataBytes>(m.data.data() + kRecordsAt, kSaDataBytes);
}
std::span<const uint8_t, kSaDataBytes> sa_data(const Mad& m) {
  return std::span<const uint8_t, kSaDataBytes>(m.data.data() + kRecordsAt, kSaDataBytes);
}

std::string gid_text(const Gid& g) {
  std::array<uint8_t, 16> raw{};
  put_gid(raw, 0, g);
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, raw.data(), text, sizeof text);
  return text;
}

void encode_path_record(const PathRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kPathRecordBytes, uint8_t{0});
  put_be(b, 0, 8, r.service_id);
  put_gid(b, 8, r.dgid);
  put_gid(b, 24, r.sgid);
  put_be(b, 40, 2, r.dlid);
  put_be(b, 42, 2, r.slid);
  put_be(b, 44, 4,
         (uint32_t{r.raw_traffic} << 31) | ((r.flow_label & 0xFFFFFu) << 8) | r.hop_limit);
  b[48] = r.tclass;
  b[49] = static_cast<uint8_t>((r.reversible ? 0x80 : 0) | (r.num_path & 0x7F));
  put_be(b, 50, 2, r.pkey);
  put_be(b, 52, 2, ((r.qos_class & 0xFFFu) << 4) | (r.sl & 0xFu));
  b[54] = static_cast<uint8_t>((r.mtu_selector & 3) << 6 | (r.mtu & 0x3F));
  b[55] = static_cast<uint8_t>((r.rate_selector & 3) << 6 | (r.rate & 0x3F));
  b[56] = static_cast<uint8_t>((r.pkt_life_selector & 3) << 6 | (r.pkt_life & 0x3F));
  b[57] = r.preference;
}

PathRecord decode_path_record(std::span<const uint8_t> b) {
  PathRecord r;
  r.service_id = get_be(b, 0, 8);
  r.dgid = get_gid(b, 8);
  r.sgid = get_gid(b, 24);
  r.dlid = static_cast<uint16_t>(get_be(b, 40, 2));
  r.slid = static_cast<uint16_t>(get_be(b, 42, 2));
  const auto flow = static_cast<uint32_t>(get_be(b, 44, 4));
  r.raw_traffic = flow >> 31;
  r.flow_label = (flow >> 8) & 0xFFFFF;
  r.hop_limit = static_cast<uint8_t>(flow);
  r.tclass = b[48];
  r.reversible = b[49] >> 7;
  r.num_path = b[49] & 0x7F;
  r.pkey = static_cast<uint16_t>(get_be(b, 50, 2));
  const auto qos = static_cast<uint16_t>(get_be(b, 52, 2));
  r.qos_class = qos >> 4;
  r.sl = qos & 0xF;
  r.mtu_selector = b[54] >> 6;
  r.mtu = b[54] & 0x3F;
  r.rate_selector = b[55] >> 6;
  r.rate = b[55] & 0x3F;
  r.pkt_life_selector = b[56] >> 6;
  r.pkt_life = b[56] & 0x3F;
  r.preference = b[57];
  return r;
}

void encode_node_record(const NodeRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kNodeRecordBytes, uint8_t{0});
  put_be(b, 0, 2, r.lid);
  const SmpData info = encode_node_info(r.info);
  std::copy_n(info.begin(), 40, b.begin() + 4);
  std::copy(r.description.begin(), r.description.end(), b.begin() + 44);
}

NodeRecord decode_node_record(std::span<const uint8_t> b) {
  NodeRecord r;
  r.lid = static_cast<uint16_t>(get_be(b, 0, 2));
  SmpData info{};
  std::copy_n(b.begin() + 4, 40, info.begin());
  // Any node type: a record is what the SA says, kept as it is.
  const uint8_t type = info[2];
  info[2] = 1;
  if (auto n = decode_node_info(info)) r.info = *n;
  r.info.node_type = type;
  std::copy_n(b.begin() + 44, 64, r.description.begin());
  return r;
}

void encode_port_info_record(const PortInfoRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kPortInfoRecordBytes, uint8_t{0});
  put_be(b, 0, 2, r.lid);
  b[2] = r.port;
  b[3] = r.options;
  std::copy(r.info.raw.begin(), r.info.raw.end(), b.begin() + 4);
}

PortInfoRecord decode_port_info_record(std::span<const uint8_t> b) {
  PortInfoRecord r;
  r.lid = static_cast<uint16_t>(get_be(b, 0, 2));
  r.port = b[2];
  r.options = b[3];
  std::copy_n(b.begin() + 4, kSmpDataBytes, r.info.raw.begin());
  return r;
}

void encode_class_port_info(const ClassPortInfo& c, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kClassPortInfoBytes, uint8_t{0});
  b[0] = c.base_version;
  b[1] = c.class_version;
  put_be(b, 2, 2, c.capability_mask);
  put_be(b, 4, 4, (c.capability_mask2 & 0x7FFFFFFu) << 5 | (c.resp_time_value & 0x1Fu));
  put_be(b, 60, 2, c.trap_lid);
  put_be(b, 62, 2, c.trap_pkey);
  put_be(b, 64, 4, uint32_t{c.trap_hop_limit} << 24 | (c.trap_qp & 0xFFFFFFu));
  put_be(b, 68, 4, c.trap_qkey);
}

ClassPortInfo decode_class_port_info(std::span<const uint8_t> b) {
  ClassPortInfo c;
  c.base_version = b[0];
  c.class_version = b[1];
  c.capability_mask = static_cast<uint16_t>(get_be(b, 2, 2));
  const auto w = static_cast<uint32_t>(get_be(b, 4, 4));
  c.capability_mask2 = w >> 5;
  c.resp_time_value = w & 0x1F;
  c.trap_lid = static_cast<uint16_t>(get_be(b, 60, 2));
  c.trap_pkey = static_cast<uint16_t>(get_be(b, 62, 2));
  const auto hq = static_cast<uint32_t>(get_be(b, 64, 4));
  c.trap_hop_limit = static_cast<uint8_t>(hq >> 24);
  c.trap_qp = hq & 0xFFFFFF;
  c.trap_qkey = static_cast<uint32_t>(get_be(b, 68, 4));
  return c;
}

void encode_notice(const Notice& n, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kNoticeBytes, uint8_t{0});
  b[0] = static_cast<uint8_t>((n.is_generic ? 0x80 : 0) | (n.type & 0x7F));
  put_be(b, 1, 3, n.producer & 0xFFFFFF);
  put_be(b, 4, 2, n.trap_number);
  put_be(b, 6, 2, n.issuer_lid);
  put_be(b, 8, 2, (n.toggle ? 0x8000u : 0u) | (n.count & 0x7FFFu));
  std::copy(n.details.begin(), n.details.end(), b.begin() + 10);
  put_gid(b, 64, n.issuer_gid);
}

Notice decode_notice(std::span<const uint8_t> b) {
  Notice n;
  n.is_generic = b[0] >> 7;
  n.type = b[0] & 0x7F;
  n.producer = static_cast<uint32_t>(get_be(b, 1, 3));
  n.trap_number = static_cast<uint16_t>(get_be(b, 4, 2));
  n.issuer_lid = static_cast<uint16_t>(get_be(b, 6, 2));
  const auto tc = static_cast<uint16_t>(get_be(b, 8, 2));
  n.toggle = tc >> 15;
  n.count = tc & 0x7FFF;
  std::copy_n(b.begin() + 10, n.details.size(), n.details.begin());
  if (b.size() >= kNoticeBytes) n.issuer_gid = get_gid(b, 64);
  return n;
}

void encode_inform_info(const InformInfo& i, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kInformInfoBytes, uint8_t{0});
  put_gid(b, 0, i.gid);
  put_be(b, 16, 2, i.lid_begin);
  put_be(b, 18, 2, i.lid_end);
  b[22] = i.is_generic;
  b[23] = i.subscribe;
  put_be(b, 24, 2, i.type);
  put_be(b, 26, 2, i.trap_number);
  put_be(b, 28, 4, (i.qpn & 0xFFFFFFu) << 8 | (i.resp_time_value & 0x1Fu));
  put_be(b, 33, 3, i.producer & 0xFFFFFF);
}

InformInfo decode_inform_info(std::span<const uint8_t> b) {
  InformInfo i;
  i.gid = get_gid(b, 0);
  i.lid_begin = static_cast<uint16_t>(get_be(b, 16, 2));
  i.lid_end = static_cast<uint16_t>(get_be(b, 18, 2));
  i.is_generic = b[22] != 0;
  i.subscribe = b[23] != 0;
  i.type = static_cast<uint16_t>(get_be(b, 24, 2));
  i.trap_number = static_cast<uint16_t>(get_be(b, 26, 2));
  const auto w = static_cast<uint32_t>(get_be(b, 28, 4));
  i.qpn = w >> 8;
  i.resp_time_value = w & 0x1F;
  i.producer = static_cast<uint32_t>(get_be(b, 33, 3));
  return i;
}

void encode_inform_info_record(const InformInfoRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kInformInfoRecordBytes, uint8_t{0});
  put_gid(b, 0, r.subscriber);
  put_be(b, 16, 2, r.enumeration);
  encode_inform_info(r.info, b.subspan(24));
}

InformInfoRecord decode_inform_info_record(std::span<const uint8_t> b) {
  InformInfoRecord r;
  r.subscriber = get_gid(b, 0);
  r.enumeration = static_cast<uint16_t>(get_be(b, 16, 2));
  r.info = decode_inform_info(b.subspan(24));
  return r;
}

void encode_link_record(const LinkRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kLinkRecordBytes, uint8_t{0});
  put_be(b, 0, 2, r.from_lid);
  b[2] = r.from_port;
  b[3] = r.to_port;
  put_be(b, 4, 2, r.to_lid);
}

LinkRecord decode_link_record(std::span<const uint8_t> b) {
  LinkRecord r;
  r.from_lid = static_cast<uint16_t>(get_be(b, 0, 2));
  r.from_port = b[2];
  r.to_port = b[3];
  r.to_lid = static_cast<uint16_t>(get_be(b, 4, 2));
  return r;
}

void encode_service_record(const ServiceRecord& r, std::span<uint8_t> b) {
  std::fill_n(b.begin(), kServiceRecordBytes, uint8_t{0});
  put_be(b, 0, 8, r.id);
  put_gid(b, 8, r.gid);
  put_be(b, 24, 2, r.pkey);
  put_be(b, 28, 4, r.lease);
  std::copy(r.key.begin(), r.key.end(), b.begin() + 32);
  std::copy(r.name.begin(), r.name.end(), b.begin() + 48);
  std::copy(r.data8.begin(), r.data8.end(), b.begin() + 112);
  for (unsigned i = 0; i < r.data16.size(); ++i) put_be(b, 128 + 2 * i, 2, r.data16[i]);
  for (unsigned i = 0; i < r.data32.size(); ++i) put_be(b, 144 + 4 * i, 4, r.data32[i]);
  for (unsigned i = 0; i < r.data64.size(); ++i) put_be(b, 160 + 8 * i, 8, r.data64[i]);
}

ServiceRecord decode_service_record(std::span<const uint8_t> b) {
  ServiceRecord r;
  r.id = get_be(b, 0, 8);
  r.gid = get_gid(b, 8);
  r.pkey = static_cast<uint16_t>(get_be(b, 24, 2));
  r.lease = static_cast<uint32_t>(get_be(b, 28, 4));
  std::copy_n(b.begin() + 32, r.key.size(), r.key.begin());
  std::copy_n(b.begin() + 48, r.name.size(), r.name.begin());
  std::copy_n(b.begin() + 112, r.data8.size(), r.data8.begin());
  for (unsigned i = 0; i < r.data16.size(); ++i)
    r.data16[i] = static_cast<uint16_t>(get_be(b, 128 + 2 * i, 2));
  for (unsigned i = 0; i < r.data32.size(); ++i)
    r.data32[i] = static_cast<uint32_t>(get_be(b, 144 + 4 * i, 4));
  for (unsigned i = 0; i < r.data64.size(); ++i) r.data64[i] = get_be(b, 160 + 8 * i, 8);
  return r;
}

bool service_record_matches(const ServiceRecord& have, const ServiceRecord& want, uint64_t mask) {
  namespace m = sr_mask;
  auto named = [mask](unsigned bit) { return (mask >> bit) & 1; };
  if ((mask & m::kId) && have.id != want.id) return false;
  if ((mask & m::kGid) && have.gid != want.gid) return false;
  if ((mask & m::kPkey) && have.pkey != want.pkey) return false;
  if ((mask & m::kLease) && have.lease != want.lease) return false;
  if ((mask & m::kKey) && have.key != want.key) return false;
  if ((mask & m::kName) && have.name != want.name) return false;
  for (unsigned i = 0; i < have.data8.size(); ++i)
    if (named(m::kData8Bit + i) && have.data8[i] != want.data8[i]) return false;
  for (unsigned i = 0; i < have.data16.size(); ++i)
    if (named(m::kData16Bit + i) && have.data16[i] != want.data16[i]) return false;
  for (unsigned i = 0; i < have.data32.size(); ++i)
    if (named(m::kData32Bit + i) && have.data32[i] != want.data32[i]) return false;
  for (unsigned i = 0; i < have.data64.size(); ++i)
    if (named(m::kData64Bit + i) && have.data64[i] != want.data64[i]) return false;
  return true;
}

uint8_t ib_rate_code(uint8_t width, uint8_t speed) {
  const unsigned half_gbps = ib_link_lanes(width) * ib_lane_half_gbaud(speed);
  if (half_gbps == 0) return 0;
  for (uint8_t code = 1; code < 64; ++code)
    if (ib_rate_half_gbps(code) == half_gbps) return code;
  return 0;
}

unsigned ib_rate_half_gbps(uint8_t code) {
  // IBA Table 211 (rates in Gb/s: 2.5, 10, 30, 5, 20, 40, 60, 80, 120, then FDR's and on).
  static constexpr unsigned kHalfGbps[] = {0,   0,   5,   20, 60,  10,  40,  80, 120, 160, 240, 28,
                                           112, 224, 336, 50, 200, 400, 600, 56, 100, 800, 1200};
  return code < std::size(kHalfGbps) ? kHalfGbps[code] : 0;
}

}  // namespace galaxy::wire
