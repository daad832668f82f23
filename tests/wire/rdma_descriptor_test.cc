#include "wire/rdma_descriptor.h"

#include <gtest/gtest.h>

#include <random>

#include "base/bits.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

RdmaDescriptor sample_write() {
  RdmaDescriptor d;
  d.op = RdmaOp::kWrite;
  d.fen = true;
  d.completion = Completion::kEvent;
  d.remote_vp = 33;
  d.remote_node = 0x1F00;
  d.length = 0xFFFFFFFF;
  d.local_address = 0x00007F0000001000;
  d.remote_address = 0x0000000012345678;
  d.remote_key = 0xA5A5A5A5;
  d.local_key = 0x01020304;
  d.notify_key = 0x0A0B0C0D;
  d.cp_count = 4;
  d.notify_address = 0x1000;
  for (unsigned i = 0; i < kNotifyDataBytes; ++i) d.notify_data[i] = static_cast<uint8_t>(i);
  return d;
}

TEST(RdmaDescriptor, GoldenWriteWithEvent) {
  auto b = encode_rdma_descriptor(sample_write());
  ASSERT_TRUE(b.ok());
  // op 0 | fen 1 << 2 | completion 1 << 3 = 0x0C; remote_vp 33; remote_node 0x1F00 LE;
  // length, addresses, key, cp_count little-endian at bytes 4, 8, 16, 24, 28; notify address
  // at byte 32, notify data at byte 40, local key at 56, notify key at 60.
  EXPECT_EQ(hex(*b),
            "0c21001fffffffff"
            "00100000007f0000"
            "7856341200000000"
            "a5a5a5a504000000"
            "0010000000000000"
            "0001020304050607"
            "08090a0b0c0d0e0f"
            "040302010d0c0b0a");
}

TEST(RdmaDescriptor, GoldenImmediate) {
  RdmaDescriptor d;
  d.op = RdmaOp::kImmediate;
  d.local_cq = true;
  d.remote_node = 2;
  d.length = 65;
  d.remote_address = 0x40;
  for (unsigned i = 0; i < 65; ++i) d.immediate_data[i] = static_cast<uint8_t>(0x80 + i);
  auto b = encode_rdma_descriptor(d);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 64u + 128u);
  EXPECT_EQ(rdma_descriptor_size(d), 192u);
  // op 2 | local_cq 1 << 6 = 0x42; length 65 = 0x41.
  EXPECT_EQ(hex(std::span(*b).first(24)),
            "42000200"
            "41000000"
            "0000000000000000"
            "4000000000000000");
  EXPECT_EQ((*b)[64], 0x80);
  EXPECT_EQ((*b)[128], 0xC0);
  EXPECT_EQ((*b)[129], 0x00);  // padding
}

TEST(RdmaDescriptor, ImmediateSizes) {
  RdmaDescriptor d;
  d.op = RdmaOp::kImmediate;
  for (uint32_t n : {1u, 64u, 65u, 128u}) {
    d.length = n;
    auto b = encode_rdma_descriptor(d);
    ASSERT_TRUE(b.ok());
    size_t expected = 64 + (n + 63) / 64 * 64;
    EXPECT_EQ(b->size(), expected);
    auto peek = peek_rdma_descriptor_size(std::span(*b).first(64));
    ASSERT_TRUE(peek.ok());
    EXPECT_EQ(*peek, expected);
  }
}

RdmaDescriptor random_descriptor(std::mt19937_64& rng) {
  RdmaDescriptor d;
  d.op = static_cast<RdmaOp>(rng() % (kMaxRdmaOp + 1));
  d.fen = rng() % 2;
  d.completion = static_cast<Completion>(rng() % (kMaxCompletion + 1));
  d.local_cq = rng() % 2;
  d.remote_vp = static_cast<uint8_t>(rng() % 64);
  d.remote_node = static_cast<uint16_t>(rng());
  d.length = static_cast<uint32_t>(rng());
  d.remote_address = rng();
  d.remote_key = static_cast<uint32_t>(rng());
  d.cp_count = static_cast<uint16_t>(rng());
  if (d.op == RdmaOp::kImmediate) {
    d.length = static_cast<uint32_t>(1 + rng() % kMaxImmediateBytes);
    for (unsigned i = 0; i < d.length; ++i) d.immediate_data[i] = static_cast<uint8_t>(rng());
  } else {
    d.local_address = rng();
    d.local_key = static_cast<uint32_t>(rng());
  }
  if (d.completion == Completion::kEvent || d.completion == Completion::kTrailingImmediate) {
    d.notify_address = rng();
    d.notify_key = static_cast<uint32_t>(rng());
  }
  if (d.completion != Completion::kNone) {
    for (auto& x : d.notify_data) x = static_cast<uint8_t>(rng());
  }
  return d;
}

TEST(RdmaDescriptor, RandomRoundTrip) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 2000; ++i) {
    RdmaDescriptor d = random_descriptor(rng);
    auto b = encode_rdma_descriptor(d);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    EXPECT_EQ(b->size(), rdma_descriptor_size(d));
    auto back = decode_rdma_descriptor(*b);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, d);
  }
}

TEST(RdmaDescriptor, EncoderDropsFieldsNotCarried) {
  RdmaDescriptor d = sample_write();
  d.completion = Completion::kNone;
  auto back = decode_rdma_descriptor(*encode_rdma_descriptor(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->notify_address, 0u);
  EXPECT_EQ(back->notify_data, (std::array<uint8_t, kNotifyDataBytes>{}));
}

TEST(RdmaDescriptor, EncodeRejectsOutOfRangeFields) {
  RdmaDescriptor d = sample_write();
  d.remote_vp = 64;
  EXPECT_TRUE(FailsWith(encode_rdma_descriptor(d), "remote_vp = 64"));
  d = sample_write();
  d.op = RdmaOp::kImmediate;
  d.length = 129;
  EXPECT_TRUE(FailsWith(encode_rdma_descriptor(d), "length = 129"));
  d.length = 0;
  EXPECT_TRUE(FailsWith(encode_rdma_descriptor(d), "length = 0"));
  d = sample_write();
  d.op = static_cast<RdmaOp>(3);
  EXPECT_TRUE(FailsWith(encode_rdma_descriptor(d), "op = 3"));
  d = sample_write();
  d.completion = static_cast<Completion>(4);
  EXPECT_TRUE(FailsWith(encode_rdma_descriptor(d), "completion = 4"));
}

TEST(RdmaDescriptor, DecodeRejectsMalformed) {
  std::vector<uint8_t> good = *encode_rdma_descriptor(sample_write());
  auto edited = [&](size_t bit, unsigned width, uint64_t v) {
    std::vector<uint8_t> b = good;
    put_bits(b, bit, width, v);
    return decode_rdma_descriptor(b);
  };
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(std::span(good).first(10)), "length = 10 bytes"));
  good.push_back(0);
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(good), "length = 65 bytes, expected 64"));
  good.pop_back();
  EXPECT_TRUE(FailsWith(edited(0, 2, 3), "op = 3"));
  EXPECT_TRUE(FailsWith(edited(3, 3, 4), "completion = 4"));
  EXPECT_TRUE(FailsWith(edited(7, 1, 1), "reserved bits"));
  EXPECT_TRUE(FailsWith(edited(245, 1, 1), "reserved bits"));
  EXPECT_TRUE(
      FailsWith(edited(3, 3, 2), "notify_address = 0x1000, notify_key = 0xa0b0c0d, expected 0"));
  EXPECT_TRUE(FailsWith(edited(3, 3, 0), "notify_address"));
  std::vector<uint8_t> b = good;
  put_bits(b, 3, 3, 2);  // trailing MP: notify data but no address or key
  put_bits(b, 256, 64, 0);
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(b), "notify_key = 0xa0b0c0d"));
  put_bits(b, 480, 32, 0);
  EXPECT_TRUE(decode_rdma_descriptor(b).ok());
  put_bits(b, 3, 3, 0);  // none: neither
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(b), "notify_data not zero"));

  RdmaDescriptor imm;
  imm.op = RdmaOp::kImmediate;
  imm.length = 3;
  std::vector<uint8_t> ib = *encode_rdma_descriptor(imm);
  std::vector<uint8_t> x = ib;
  x[64 + 3] = 9;
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(x), "immediate padding byte 67"));
  x = ib;
  put_bits(x, 64, 64, 1);
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(x), "local_address = 0x1"));
  x = ib;
  put_bits(x, 448, 32, 7);
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(x), "local_key = 0x7"));
  x = ib;
  put_bits(x, 32, 32, 200);
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(x), "length = 200, expected 1-128"));
  EXPECT_TRUE(FailsWith(decode_rdma_descriptor(std::span(ib).first(64)),
                        "length = 64 bytes, expected 128"));
}

}  // namespace
}  // namespace galaxy::wire
