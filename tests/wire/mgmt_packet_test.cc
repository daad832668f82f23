#include <gtest/gtest.h>

#include <random>

#include "base/bits.h"
#include "mgmt_test_util.h"
#include "wire/crc16.h"
#include "wire/mgmt.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

// Packet bit of payload bit `off` of flit `flit` (docs/protocol.md).
constexpr size_t pbit(unsigned flit, size_t off) {
  return flit * 200 + 6 + off;
}

MgmtPacket sample_request() {
  MgmtPacket p;
  p.dest_id = 0x1234;
  p.dest_type = ChipType::kNrc;
  p.src_id = 0x0042;
  p.src_type = ChipType::kNic;
  p.dest_vp = 5;
  p.src_vp = 9;
  p.lint = true;
  p.transaction_id = 0xBEEF;
  EXPECT_TRUE(p.forward_route.push(3).ok());
  EXPECT_TRUE(p.forward_route.push(17).ok());
  EXPECT_TRUE(p.backward_route.push(0).ok());
  EXPECT_TRUE(p.backward_route.push(22).ok());
  p.nmp_type = NmpType::kRegReadRequest;
  p.m_key = 0x0123456789ABCDEF;
  p.data.count = 2;
  p.data.address = {0x0010, 0x7FFF, 0, 0, 0, 0};
  return p;
}

TEST(MgmtPacket, GoldenRegisterReadRequest) {
  auto b = encode_mgmt_packet(sample_request());
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  // Byte 0: kind 1, vc 3, length bits 0-1; bytes 2-3: dest_id 0x1234; byte 4: dest_type 1 and
  // src_id bits 0-6 (docs/protocol.md, worked example).
  EXPECT_EQ(hex(*b),
            "0d01341285001449c1bbaf18110000000000000000000000008c0016000000000000000000000000"
            "00c07bf36ae259d148008c0004c0ff1f000000000000000000000000000000000000000e00000000"
            "0000000000000000000000000000000000c0de01");
}

TEST(MgmtPacket, GoldenFaultReport) {
  MgmtPacket p;
  p.dest_id = 7;
  p.src_id = 0x0300;
  p.src_type = ChipType::kNrc;
  p.nmp_type = NmpType::kFaultReport;
  ASSERT_TRUE(p.backward_route.push(4).ok());
  p.hop_count = 1;
  p.data.fault_code = 0x11;
  p.data.fault_port = 23;
  p.data.fault_severity = 2;
  p.data.fault_detail = 0xCAFEF00D;
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(hex(*b),
            "0d0907000106020020000000000000000000000000000000004c200000000000000000000000000000"
            "0000000000000000004cc4854003bcbf3200000000000000000000000000000000000e000000000000"
            "00000000000000000000000000000040ed0a");
}

// SMInfo between servers (docs/protocol.md "SMInfo packets"): the fields where the table puts
// them in the NMPData block (flit 2), the SM_Key in the m_key field, out-of-range fields refused
// both ways.
TEST(MgmtPacket, SmInfoFieldsSitWhereTheProtocolDocSays) {
  MgmtPacket p;
  p.dest_id = 40;
  p.dest_type = ChipType::kNic;
  p.dest_vp = 9;
  p.src_id = 3;
  p.src_vp = 8;
  p.nmp_type = NmpType::kSmInfoSet;
  ASSERT_TRUE(p.backward_route.push(2).ok());
  ASSERT_TRUE(p.forward_route.push(5).ok());
  p.m_key = 0x1122334455667788;
  p.data.sm = {0xA1A2A3A4A5A6A7A8, 0x01020304, 14, 3, 1, 0xBEEF, 33};
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, pbit(0, 58), 6), 0x31u);
  EXPECT_EQ(get_bits(*b, pbit(1, 128), 64), 0x1122334455667788u);
  EXPECT_EQ(get_bits(*b, pbit(2, 0), 64), 0xA1A2A3A4A5A6A7A8u);
  EXPECT_EQ(get_bits(*b, pbit(2, 64), 32), 0x01020304u);
  EXPECT_EQ(get_bits(*b, pbit(2, 96), 4), 14u);
  EXPECT_EQ(get_bits(*b, pbit(2, 100), 4), 3u);
  EXPECT_EQ(get_bits(*b, pbit(2, 104), 8), 1u);
  EXPECT_EQ(get_bits(*b, pbit(2, 112), 16), 0xBEEFu);
  EXPECT_EQ(get_bits(*b, pbit(2, 128), 8), 33u);
  auto back = decode_mgmt_packet(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, p);
  // Host to host, by the backward route: the route peek_mgmt_head follows.
  auto head = peek_mgmt_head(*b);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->next_port, 2u);
  EXPECT_TRUE(host_may_send(NmpType::kSmInfoGet));
  EXPECT_FALSE(is_request(NmpType::kSmInfoGet));
  EXPECT_FALSE(host_may_send(NmpType::kRegReadResponse));

  MgmtPacket bad = p;
  bad.data.sm.control = 6;
  auto refused = encode_mgmt_packet(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 1157u);
  EXPECT_NE(refused.error().message.find("control = 6"), std::string::npos);
}

TEST(MgmtPacket, FieldsSitWhereTheProtocolDocSays) {
  auto b = encode_mgmt_packet(sample_request());
  ASSERT_TRUE(b.ok());
  for (unsigned k = 0; k < 4; ++k) EXPECT_EQ(get_bits(*b, 200 * k + 2, 3), 3u) << "flit " << k;
  EXPECT_EQ(get_bits(*b, 0, 2), 1u);    // head
  EXPECT_EQ(get_bits(*b, 600, 2), 2u);  // tail
  EXPECT_EQ(get_bits(*b, pbit(0, 0), 5), 4u);
  EXPECT_EQ(get_bits(*b, pbit(0, 10), 16), 0x1234u);
  EXPECT_EQ(get_bits(*b, pbit(0, 64), 16), 0xBEEFu);
  EXPECT_EQ(get_bits(*b, pbit(0, 80), 5), 2u);
  EXPECT_EQ(get_bits(*b, pbit(1, 0), 5), 2u);
  EXPECT_EQ(get_bits(*b, pbit(1, 128), 64), 0x0123456789ABCDEFu);
  EXPECT_EQ(get_bits(*b, pbit(2, 0), 3), 2u);
  EXPECT_EQ(get_bits(*b, pbit(2, 24), 16), 0x7FFFu);
}

TEST(MgmtPacket, RandomRoundTrip) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    MgmtPacket p;
    p.dest_id = static_cast<uint16_t>(rng());
    p.dest_type = static_cast<ChipType>(rng() % 2);
    p.src_id = static_cast<uint16_t>(rng());
    p.src_type = static_cast<ChipType>(rng() % 2);
    p.dest_vp = static_cast<uint8_t>(rng() % 64);
    p.src_vp = static_cast<uint8_t>(rng() % 64);
    p.lint = rng() % 2;
    p.rint = rng() % 2;
    p.transaction_id = static_cast<uint16_t>(rng());
    const unsigned ports = i % 2 ? kMaxSwitchPorts : 32;  // the wide variant every other time
    p.forward_route = testing::random_route(rng, ports);
    p.backward_route = testing::random_route(rng, ports);
    p.nmp_type = testing::kAllNmpTypes[rng() % kNmpTypeCount];
    p.hop_count = static_cast<uint8_t>(rng() % (p.active_route().hop_num + 1));
    p.m_key = rng();
    p.data = testing::random_nmp_data(rng, p.nmp_type);
    auto b = encode_mgmt_packet(p);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    auto d = decode_mgmt_packet(*b);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, p);
    auto h = peek_mgmt_head(*b);
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    EXPECT_EQ(h->hop_count, p.hop_count);
    EXPECT_EQ(h->nmp_type, p.nmp_type);
    EXPECT_EQ(h->route_hop_num, p.active_route().hop_num);
    uint8_t next = p.hop_count < p.active_route().hop_num ? p.active_route().hops[p.hop_count] : 0;
    EXPECT_EQ(h->next_port, next);
  }
}

TEST(MgmtPacket, EncoderDropsFieldsTheTypeDoesNotCarry) {
  MgmtPacket p = sample_request();
  p.data.error_address = 99;  // not carried by a register read request
  p.data.fault_detail = 5;
  auto d = decode_mgmt_packet(*encode_mgmt_packet(p));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->data, carried_nmp_data(p.nmp_type, p.data));
  EXPECT_EQ(d->data.error_address, 0);
}

TEST(MgmtPacket, HopCountRewriteKeepsCrcValid) {
  MgmtPacket p = sample_request();
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok());
  MgmtPacketBytes bytes = *b;
  uint16_t crc_before = static_cast<uint16_t>(get_bits(bytes, pbit(3, 176), 16));
  for (uint8_t hop = 0; hop <= 2; ++hop) {
    set_mgmt_hop_count(bytes, hop);
    auto d = decode_mgmt_packet(bytes);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(d->hop_count, hop);
    auto h = peek_mgmt_head(bytes);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->hop_count, hop);
    EXPECT_EQ(h->next_port, hop < 2 ? p.forward_route.hops[hop] : 0);
    p.hop_count = hop;
    EXPECT_EQ(*d, p);
  }
  EXPECT_EQ(get_bits(bytes, pbit(3, 176), 16), crc_before);
  set_mgmt_hop_count(std::span(bytes).first(50), 1);  // too short: left alone
  EXPECT_EQ(get_bits(bytes, pbit(0, 5), 5), 2u);
}

TEST(MgmtPacket, ResponseFollowsBackwardRoute) {
  MgmtPacket p = sample_request();
  p.nmp_type = NmpType::kRegReadResponse;
  p.data.value = {1, 2};
  p.hop_count = 1;
  auto h = peek_mgmt_head(*encode_mgmt_packet(p));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->route_hop_num, 2);
  EXPECT_EQ(h->next_port, 22);
}

TEST(MgmtPacket, EncodeRejectsOutOfRangeFields) {
  MgmtPacket p = sample_request();
  p.vc = 2;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "vc = 2"));
  p = sample_request();
  p.length_flits = 5;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "length_flits = 5"));
  p = sample_request();
  p.nmp_type = static_cast<NmpType>(0x06);
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "nmp_type = 0x6"));
  p = sample_request();
  p.hop_count = 3;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "hop_count = 3"));
  p = sample_request();
  p.src_vp = 64;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "src_vp = 64"));
  p = sample_request();
  p.forward_route.hops[7] = 1;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "forward_route: source route: unused hop7"));
  p = sample_request();
  p.data.count = 3;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "data.count = 3"));
  p = sample_request();
  p.data.address[1] = 0x8000;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "data.address[1] = 0x8000"));
  p = sample_request();
  p.nmp_type = NmpType::kEepromError;
  p.data.error = static_cast<NmpError>(9);
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "data.error = 9"));
}

// Corrupts `packet` (sample_request by default) with `edit` and, unless `fix_crc` is false,
// recomputes the tail CRC so that the check under test is reached.
template <class Edit>
Result<MgmtPacket> decode_edited(Edit edit, bool fix_crc = true,
                                 const MgmtPacket& packet = sample_request()) {
  MgmtPacketBytes b = *encode_mgmt_packet(packet);
  edit(b);
  if (fix_crc) {
    uint16_t crc = crc16_bits(b, pbit(0, 10), 182);
    crc = crc16_bits(b, pbit(1, 0), 192, crc);
    crc = crc16_bits(b, pbit(2, 0), 192, crc);
    crc = crc16_bits(b, pbit(3, 0), 176, crc);
    put_bits(b, pbit(3, 176), 16, crc);
  }
  return decode_mgmt_packet(b);
}

TEST(MgmtPacket, DecodeRejectsMalformed) {
  MgmtPacketBytes good = *encode_mgmt_packet(sample_request());
  EXPECT_TRUE(FailsWith(decode_mgmt_packet(std::span(good).first(99)), "length = 99 bytes"));
  auto r = decode_edited([](auto& b) { put_bits(b, 400, 2, 1); });
  EXPECT_TRUE(FailsWith(r, "mgmt packet: flit 2 kind = head, expected body"));
  r = decode_edited([](auto& b) { put_bits(b, 602, 3, 0); });
  EXPECT_TRUE(FailsWith(r, "flit 3 vc = 0, expected 3"));
  r = decode_edited([](auto& b) { put_bits(b, 205, 1, 1); });
  EXPECT_TRUE(FailsWith(r, "flit 1 reserved bits"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 0), 5, 3); });
  EXPECT_TRUE(FailsWith(r, "length_flits = 3"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 10), 1, 1); }, false);
  EXPECT_TRUE(FailsWith(r, "crc = "));
  EXPECT_EQ(r.error().code, Code::kCrcMismatch);
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 58), 6, 0x21); });
  EXPECT_TRUE(FailsWith(r, "nmp_type = 0x21"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 80), 5, 21); });
  EXPECT_TRUE(FailsWith(r, "forward route hop_num = 21"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 5), 5, 3); });
  EXPECT_TRUE(FailsWith(r, "hop_count = 3 exceeds"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(0, 188), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(3, 100), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(1, 5 + 5 * 9), 5, 4); });
  EXPECT_TRUE(FailsWith(r, "backward_route: source route: unused hop9 = 4"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(2, 0), 3, 5); });
  EXPECT_TRUE(FailsWith(r, "data.count = 5 exceeds 2"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(2, 8), 16, 0x9000); });
  EXPECT_TRUE(FailsWith(r, "data.address[0] = 0x9000"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(2, 4), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
  r = decode_edited([](auto& b) { put_bits(b, pbit(2, 170), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
}

// Switches wider than 32 ports: the same four flits, the wide flag in the head and each hop's
// high 3 bits in the tail (docs/protocol.md, "Wide variant").
MgmtPacket wide_request() {
  MgmtPacket p = sample_request();
  p.forward_route = {};
  p.backward_route = {};
  for (uint8_t port : {3, 40, 127}) EXPECT_TRUE(p.forward_route.push(port).ok());
  for (uint8_t port : {100, 0, 31}) EXPECT_TRUE(p.backward_route.push(port).ok());
  p.hop_count = 1;
  return p;
}

TEST(MgmtPacket, WideVariantNamesPortsAbove31) {
  MgmtPacket p = wide_request();
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->size(), kMgmtPacketBytes);
  EXPECT_EQ(get_bits(*b, pbit(0, 185), 1), 1u);  // wide
  // Low 5 bits in the TH-2 field, high 3 bits in the tail: 40 = 8 + (1 << 5), 127 = 31 + (3 << 5).
  EXPECT_EQ(get_bits(*b, pbit(0, 80 + 5 * 2), 5), 8u);
  EXPECT_EQ(get_bits(*b, pbit(3, 3 * 1), 3), 1u);
  EXPECT_EQ(get_bits(*b, pbit(0, 80 + 5 * 3), 5), 31u);
  EXPECT_EQ(get_bits(*b, pbit(3, 3 * 2), 3), 3u);
  EXPECT_EQ(get_bits(*b, pbit(1, 5), 5), 4u);  // backward hop 0: 100 = 4 + (3 << 5)
  EXPECT_EQ(get_bits(*b, pbit(3, 60), 3), 3u);
  auto d = decode_mgmt_packet(*b);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_EQ(*d, p);
  // A switch reads the whole port of the next hop.
  auto h = peek_mgmt_head(*b);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->next_port, 40);
  set_mgmt_hop_count(*b, 2);
  EXPECT_EQ(peek_mgmt_head(*b)->next_port, 127);
  EXPECT_TRUE(decode_mgmt_packet(*b).ok());  // the hop count is outside the CRC
  // The response takes the backward route: hop 0 is port 100.
  p.nmp_type = NmpType::kRegReadResponse;
  p.hop_count = 0;
  EXPECT_EQ(peek_mgmt_head(*encode_mgmt_packet(p))->next_port, 100);
  // A packet whose ports all fit 5 bits stays the TH-2 packet.
  EXPECT_EQ(get_bits(*encode_mgmt_packet(sample_request()), pbit(0, 185), 1), 0u);
}

TEST(MgmtPacket, DecodeRejectsMalformedWideVariant) {
  // The wide flag on a packet that names no port above 31: one encoding per packet.
  auto r = decode_edited([](auto& b) { put_bits(b, pbit(0, 185), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "ext = 1 but no route names a port above 31 or has more than 20 hops"));
  auto edited = [](auto edit) { return decode_edited(edit, true, wide_request()); };
  // High bits on a hop the route does not use.
  r = edited([](auto& b) { put_bits(b, pbit(3, 3 * 7), 3, 2); });
  EXPECT_TRUE(FailsWith(r, "forward_route: source route: unused hop7 has high bits 2"));
  r = edited([](auto& b) { put_bits(b, pbit(3, 60 + 3 * 3), 3, 1); });
  EXPECT_TRUE(FailsWith(r, "backward_route: source route: unused hop3 has high bits 1"));
  // A port beyond the widest switch.
  r = edited([](auto& b) { put_bits(b, pbit(3, 0), 3, 4); });
  EXPECT_TRUE(FailsWith(r, "forward_route: source route: hop0 = 131 exceeds 127"));
  // The tail's bits after the extensions are reserved.
  r = edited([](auto& b) { put_bits(b, pbit(3, 150), 1, 1); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
  // Without the flag the tail is all reserved.
  r = edited([](auto& b) { put_bits(b, pbit(0, 185), 1, 0); });
  EXPECT_TRUE(FailsWith(r, "reserved bits"));
}

// Routes of more than 20 NRCs (a large torus): the long variant, the same four flits, hops
// 20-30 in the tail where the wide variant keeps its high bits (docs/protocol.md).
TEST(MgmtPacket, LongVariantCarriesRoutesOfUpTo31Hops) {
  MgmtPacket p = sample_request();
  p.forward_route = {};
  p.backward_route = {};
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(p.forward_route.push(static_cast<uint8_t>(i)).ok());
  for (int i = 0; i < 31; ++i)
    ASSERT_TRUE(p.backward_route.push(static_cast<uint8_t>(31 - i)).ok());
  p.hop_count = 21;
  auto b = encode_mgmt_packet(p);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(get_bits(*b, pbit(0, 185), 1), 1u);  // ext
  EXPECT_EQ(get_bits(*b, pbit(0, 80), 5), 25u);
  EXPECT_EQ(get_bits(*b, pbit(3, 0), 5), 20u);           // forward hop 20
  EXPECT_EQ(get_bits(*b, pbit(3, 5 * 4), 5), 24u);       // forward hop 24
  EXPECT_EQ(get_bits(*b, pbit(3, 5 * 5), 5), 0u);        // unused
  EXPECT_EQ(get_bits(*b, pbit(3, 60 + 5 * 10), 5), 1u);  // backward hop 30 = 31 - 30
  auto d = decode_mgmt_packet(*b);
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  EXPECT_EQ(*d, p);
  auto h = peek_mgmt_head(*b);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->route_hop_num, 25);
  EXPECT_EQ(h->next_port, 21);
  set_mgmt_hop_count(*b, 19);
  EXPECT_EQ(peek_mgmt_head(*b)->next_port, 19) << "a hop of the field, not a high-bits read";
  set_mgmt_hop_count(*b, 24);
  EXPECT_EQ(peek_mgmt_head(*b)->next_port, 24);
  // A long route through a port above 31 is carried by neither variant.
  p.forward_route.hops[2] = 40;
  EXPECT_TRUE(FailsWith(encode_mgmt_packet(p), "ports up to 31 only"));
  // Without the flag a route of more than 20 hops is malformed; so is a hop beyond hop_num.
  auto edited = [](auto edit) {
    MgmtPacket q = sample_request();
    q.forward_route = {};
    for (int i = 0; i < 22; ++i) EXPECT_TRUE(q.forward_route.push(3).ok());
    return decode_edited(edit, true, q);
  };
  auto r = edited([](auto& b) { put_bits(b, pbit(0, 185), 1, 0); });
  EXPECT_TRUE(FailsWith(r, "hop_num = 22 exceeds 20 without the extension"));
  r = edited([](auto& b) { put_bits(b, pbit(3, 5 * 2), 5, 7); });
  EXPECT_TRUE(FailsWith(r, "forward_route: source route: unused hop22 = 7"));
}

TEST(MgmtPacket, PeekRejectsWhatItReads) {
  MgmtPacketBytes b = *encode_mgmt_packet(sample_request());
  EXPECT_TRUE(FailsWith(peek_mgmt_head(std::span(b).first(10)), "length = 10 bytes"));
  MgmtPacketBytes bad = b;
  put_bits(bad, 200, 2, 2);
  EXPECT_TRUE(FailsWith(peek_mgmt_head(bad), "flit 1 kind = tail, expected body"));
  bad = b;
  put_bits(bad, pbit(0, 58), 6, 0);
  EXPECT_TRUE(FailsWith(peek_mgmt_head(bad), "nmp_type = 0x0"));
  bad = b;
  put_bits(bad, pbit(0, 80), 5, 30);
  EXPECT_TRUE(FailsWith(peek_mgmt_head(bad), "hop_num = 30"));
  bad = b;
  put_bits(bad, pbit(0, 5), 5, 4);
  EXPECT_TRUE(FailsWith(peek_mgmt_head(bad), "hop_count = 4"));
}

TEST(MgmtPacket, EnumNames) {
  EXPECT_EQ(nmp_type_name(NmpType::kEepromWriteResponse), "eeprom write response");
  EXPECT_EQ(nmp_error_name(NmpError::kWrongKey), "wrong key");
  EXPECT_EQ(chip_type_name(ChipType::kNrc), "nrc");
  int valid = 0;
  for (int raw = 0; raw < 256; ++raw) valid += is_valid_nmp_type(static_cast<uint8_t>(raw));
  EXPECT_EQ(valid, static_cast<int>(kNmpTypeCount));
  EXPECT_TRUE(is_request(NmpType::kEepromWriteRequest));
  EXPECT_FALSE(is_request(NmpType::kFaultReport));
  EXPECT_TRUE(is_eeprom(NmpType::kEepromError));
  EXPECT_FALSE(is_eeprom(NmpType::kFaultReport));
}

// An SMInfo packet from the network whose state or control is beyond IBA's: malformed, never
// trusted (the CRC recomputed, so the field check is what refuses it).
TEST(MgmtPacket, DecodeRejectsSmInfoBeyondItsRanges) {
  MgmtPacket p;
  p.nmp_type = NmpType::kSmInfoGet;
  p.dest_type = ChipType::kNic;
  ASSERT_TRUE(p.backward_route.push(1).ok());
  EXPECT_TRUE(decode_edited([](auto&) {}, true, p).ok());
  EXPECT_TRUE(FailsWith(decode_edited([](auto& b) { put_bits(b, pbit(2, 100), 4, 9); }, true, p),
                        "SMInfo state = 9"));
  EXPECT_TRUE(FailsWith(decode_edited([](auto& b) { put_bits(b, pbit(2, 104), 8, 7); }, true, p),
                        "control = 7"));
  EXPECT_TRUE(FailsWith(decode_edited([](auto& b) { put_bits(b, pbit(2, 140), 4, 1); }, true, p),
                        "reserved bits"));
}

}  // namespace
}  // namespace galaxy::wire
