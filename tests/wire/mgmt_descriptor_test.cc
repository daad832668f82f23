#include <gtest/gtest.h>

#include <random>

#include "base/bits.h"
#include "mgmt_test_util.h"
#include "wire/mgmt.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

MgmtDescriptor sample_write() {
  MgmtDescriptor d;
  d.dest_id = kUnconfiguredId;
  d.dest_vp = 1;
  d.src_vp = 2;
  d.dest_type = ChipType::kNrc;
  d.fen = true;
  d.type = 2;
  d.inst = 5;
  d.rint = true;
  d.transaction_id = 0x0102;
  EXPECT_TRUE(d.forward_route.push(9).ok());
  EXPECT_TRUE(d.backward_route.push(31).ok());
  d.nmp_type = NmpType::kEepromWriteRequest;
  d.m_key = 0xFEDCBA9876543210;
  d.data.count = 3;
  d.data.address = {0x0000, 0x0001, 0xFFFF, 0, 0, 0};
  d.data.bytes = {0xA0, 0xA1, 0xA2, 0, 0, 0};
  return d;
}

TEST(MgmtDescriptor, GoldenEepromWrite) {
  auto b = encode_mgmt_descriptor(sample_write());
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  // Byte 0 = head, fen, rt_type, type 2, inst bit 0 = 0xab; byte 1 = inst bits 1-2, rint,
  // dest_type, nmp_type bits 0-2 = 0x7a (docs/protocol.md). DestID all ones (unconfigured):
  // bytes 4-5 0xffff and bit 506, its bit 16 (byte 63 = 0x04).
  EXPECT_EQ(hex(*b),
            "ab7a0a04ffff02011032547698badcfe21010000000000000000000000c20700000000000000000000"
            "000c00000400fcff03000000000080868a020000000004");
}

TEST(MgmtDescriptor, FieldsSitWhereTheProtocolDocSays) {
  auto b = encode_mgmt_descriptor(sample_write());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(get_bits(*b, 0, 1), 1u);         // head
  EXPECT_EQ(get_bits(*b, 1, 1), 1u);         // fen
  EXPECT_EQ(get_bits(*b, 3, 1), 1u);         // rt_type: source routing
  EXPECT_EQ(get_bits(*b, 4, 2), 2u);         // type
  EXPECT_EQ(get_bits(*b, 7, 3), 5u);         // inst
  EXPECT_EQ(get_bits(*b, 11, 1), 1u);        // rint
  EXPECT_EQ(get_bits(*b, 13, 6), 0x13u);     // nmp_type
  EXPECT_EQ(get_bits(*b, 32, 16), 0xFFFFu);  // dest_id
  EXPECT_EQ(get_bits(*b, 64, 64), 0xFEDCBA9876543210u);
  EXPECT_EQ(get_bits(*b, 128, 10), 1u | (9u << 5));
  EXPECT_EQ(get_bits(*b, 233, 10), 1u | (31u << 5));
  EXPECT_EQ(get_bits(*b, 338, 3), 3u);                 // data.count
  EXPECT_EQ(get_bits(*b, 338 + 8 + 32, 16), 0xFFFFu);  // data.address[2]
  EXPECT_EQ(get_bits(*b, 338 + 104, 8), 0xA0u);        // data.bytes[0]
}

TEST(MgmtDescriptor, RandomRoundTrip) {
  std::mt19937_64 rng(4);
  for (int i = 0; i < 2000; ++i) {
    MgmtDescriptor d;
    d.dest_id = static_cast<uint16_t>(rng());
    d.dest_vp = static_cast<uint8_t>(rng() % 64);
    d.src_vp = static_cast<uint8_t>(rng() % 64);
    d.dest_type = static_cast<ChipType>(rng() % 2);
    d.rt_type = static_cast<uint8_t>(rng() % 2);
    d.fen = rng() % 2;
    d.err = rng() % 2;
    d.type = static_cast<uint8_t>(rng() % 4);
    d.sm = static_cast<uint8_t>(rng() % 2);
    d.inst = static_cast<uint8_t>(rng() % 8);
    d.lint = rng() % 2;
    d.rint = rng() % 2;
    d.transaction_id = static_cast<uint16_t>(rng());
    const unsigned ports = i % 2 ? kMaxSwitchPorts : 32;  // the wide variant every other time
    d.forward_route = testing::random_route(rng, ports);
    d.backward_route = testing::random_route(rng, ports);
    d.nmp_type = testing::kAllNmpTypes[rng() % kNmpTypeCount];
    d.m_key = rng();
    d.data = testing::random_nmp_data(rng, d.nmp_type);
    auto b = encode_mgmt_descriptor(d);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    EXPECT_EQ(b->size(), d.forward_route.needs_ext() || d.backward_route.needs_ext()
                             ? kMgmtWideDescriptorBytes
                             : kMgmtDescriptorBytes);
    auto back = decode_mgmt_descriptor(*b);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, d);
  }
}

TEST(MgmtDescriptor, WideVariantIs128Bytes) {
  MgmtDescriptor d = sample_write();
  d.backward_route = {};
  ASSERT_TRUE(d.backward_route.push(35).ok());
  ASSERT_TRUE(d.backward_route.push(64).ok());
  auto b = encode_mgmt_descriptor(d);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  ASSERT_EQ(b->size(), kMgmtWideDescriptorBytes);
  EXPECT_EQ(get_bits(*b, 31, 1), 1u);            // wide
  EXPECT_EQ(get_bits(*b, 233 + 5, 5), 3u);       // backward hop 0 low bits: 35 = 3 + (1 << 5)
  EXPECT_EQ(get_bits(*b, 512 + 60, 3), 1u);      // its high bits
  EXPECT_EQ(get_bits(*b, 512 + 60 + 3, 3), 2u);  // hop 1: 64 = 0 + (2 << 5)
  auto back = decode_mgmt_descriptor(*b);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, d);

  auto edited = [&](size_t bit, unsigned width, uint64_t v) {
    MgmtDescriptorBytes e = *b;
    put_bits(e, bit, width, v);
    return decode_mgmt_descriptor(e);
  };
  EXPECT_TRUE(FailsWith(edited(31, 1, 0), "wide = 0 but length = 128 bytes (expected 64)"));
  EXPECT_TRUE(FailsWith(edited(700, 1, 1), "reserved bits 696-759"));
  EXPECT_TRUE(FailsWith(edited(512 + 3 * 5, 3, 1), "forward_route: source route: unused hop5"));
  EXPECT_TRUE(FailsWith(edited(512 + 60, 6, 0), "wide = 1 but no route names a port above 31"));
  EXPECT_TRUE(FailsWith(decode_mgmt_descriptor(std::span(*b).first(96)), "length = 96 bytes"));
}

TEST(MgmtDescriptor, EncodeRejectsOutOfRangeFields) {
  MgmtDescriptor d = sample_write();
  d.inst = 8;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "inst = 8 exceeds 7"));
  d = sample_write();
  d.dest_vp = 70;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "dest_vp = 70"));
  d = sample_write();
  d.rt_type = 2;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "rt_type = 2"));
  d = sample_write();
  d.head = false;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "head = 0"));
  d = sample_write();
  d.nmp_type = static_cast<NmpType>(0x3F);
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "nmp_type = 0x3f"));
  d = sample_write();
  d.backward_route.hop_num = 32;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "backward_route: source route: hop_num = 32"));
  d = sample_write();
  d.backward_route.hop_num = 25;  // a long route: the 128-byte descriptor carries it
  auto long_route = encode_mgmt_descriptor(d);
  ASSERT_TRUE(long_route.ok()) << long_route.error().to_string();
  EXPECT_EQ(long_route->size(), kMgmtWideDescriptorBytes);
  EXPECT_EQ(decode_mgmt_descriptor(*long_route).value(), d);
  d = sample_write();
  d.data.count = 7;
  EXPECT_TRUE(FailsWith(encode_mgmt_descriptor(d), "data.count = 7 exceeds 6"));
}

TEST(MgmtDescriptor, DecodeRejectsMalformed) {
  MgmtDescriptorBytes good = *encode_mgmt_descriptor(sample_write());
  EXPECT_TRUE(FailsWith(decode_mgmt_descriptor(std::span(good).first(63)), "length = 63 bytes"));
  auto edited = [&](size_t bit, unsigned width, uint64_t v) {
    MgmtDescriptorBytes b = good;
    put_bits(b, bit, width, v);
    return decode_mgmt_descriptor(b);
  };
  EXPECT_TRUE(FailsWith(edited(0, 1, 0), "mgmt descriptor: head = 0"));
  EXPECT_TRUE(FailsWith(edited(13, 6, 0x33), "nmp_type = 0x33"));
  EXPECT_TRUE(FailsWith(edited(31, 1, 1), "wide = 1 but length = 64 bytes (expected 128)"));
  EXPECT_TRUE(FailsWith(edited(510, 1, 1), "reserved bits 507-511"));
  EXPECT_TRUE(FailsWith(edited(128, 5, 22), "a route of 22 hops without the extension"));
  EXPECT_TRUE(FailsWith(edited(233 + 5 * 4, 5, 3), "backward_route: source route: unused hop3"));
  EXPECT_TRUE(FailsWith(edited(338, 3, 7), "data.count = 7 exceeds 6"));
  EXPECT_TRUE(FailsWith(edited(338 + 152, 1, 1), "reserved bits 490-"));
  // An error response carries only error and error_address.
  EXPECT_TRUE(FailsWith(edited(13, 6, 0x15), "reserved bits"));
  MgmtDescriptor e = sample_write();
  e.nmp_type = NmpType::kRegError;
  e.data = {};
  MgmtDescriptorBytes eb = *encode_mgmt_descriptor(e);
  put_bits(eb, 338, 8, 7);
  EXPECT_TRUE(FailsWith(decode_mgmt_descriptor(eb), "data.error = 7"));
}

}  // namespace
}  // namespace galaxy::wire
