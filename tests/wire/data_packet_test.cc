#include "wire/data_packet.h"

#include <gtest/gtest.h>

#include <random>

#include "base/bits.h"
#include "wire/crc16.h"
#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

DataPacket sample() {
  DataPacket p;
  p.head.kind = PacketKind::kRdmaWrite;
  p.head.vc = 1;
  p.head.dest_node = 0x4321;
  p.head.src_node = 0x0007;
  p.head.dest_vp = 8;
  p.head.src_vp = 63;
  p.head.tag = 0xBEEF;
  p.head.bytes = 30;
  p.head.flags = kDataFlagInTransfer;
  p.ext = {0x1122334455667788, 0xCAFE0001, 0x80, 0x1000};
  for (int i = 0; i < 30; ++i) p.payload[i] = static_cast<uint8_t>(i + 1);
  return p;
}

TEST(DataPacket, Golden) {
  auto flits = encode_data_packet(sample());
  ASSERT_TRUE(flits.ok()) << flits.error().to_string();
  ASSERT_EQ(flits->size(), 4u);  // head, extension, 24 + 6 payload bytes
  const Flit& h = (*flits)[0];
  EXPECT_EQ(h.kind, FlitKind::kHead);
  EXPECT_EQ(h.vc, 1);
  // kind 1 | dest_vp 8 << 4 | src_vp 63 << 10 = 0xFC81; dest_node 0x4321; src_node 7; length 4
  // at bits 48-54; tag 0xBEEF at 55-70; bytes 30 at 71-78; flags 4 at 79-82; CRC at 83-98.
  std::string head = hex(h.payload);
  EXPECT_EQ(head.substr(0, 12), "81fc21430700");
  EXPECT_EQ(get_bits(h.payload, 48, 7), 4u);
  EXPECT_EQ(get_bits(h.payload, 55, 16), 0xBEEFu);
  EXPECT_EQ(get_bits(h.payload, 71, 8), 30u);
  EXPECT_EQ(get_bits(h.payload, 79, 4), 4u);
  EXPECT_EQ(hex((*flits)[1].payload),
            "8877665544332211"
            "0100feca"
            "80000000"
            "00100000"
            "00000000");
  EXPECT_EQ((*flits)[1].kind, FlitKind::kBody);
  EXPECT_EQ((*flits)[3].kind, FlitKind::kTail);
  EXPECT_EQ(hex((*flits)[3].payload), std::string("191a1b1c1d1e").append(2 * 18, '0'));
  // The CRC: CRC-16/CCITT-FALSE of the head payload (CRC field zero), the extension and data.
  std::array<uint8_t, kFlitPayloadBytes> zeroed = h.payload;
  put_bits(zeroed, 83, 16, 0);
  uint16_t crc = crc16(zeroed);
  crc = crc16((*flits)[1].payload, crc);
  crc = crc16(sample().data(), crc);
  EXPECT_EQ(get_bits(h.payload, 83, 16), crc);
}

DataPacket random_packet(std::mt19937_64& rng) {
  const uint8_t vcs[] = {0, 1, 2, 4, 5};
  DataPacket p;
  p.head.kind = static_cast<PacketKind>(rng() % (kMaxPacketKind + 1));
  p.head.vc = vcs[rng() % 5];
  p.head.dest_node = static_cast<uint16_t>(rng());
  p.head.src_node = static_cast<uint16_t>(rng());
  p.head.dest_vp = static_cast<uint8_t>(rng() % 64);
  p.head.src_vp = static_cast<uint8_t>(rng() % 64);
  p.head.tag = static_cast<uint16_t>(rng());
  p.head.bytes = static_cast<uint8_t>(rng() % (kDataPacketBytes + 1));
  p.head.flags = static_cast<uint8_t>(rng() & kDataFlagsMask);
  p.head.hops = static_cast<uint8_t>(rng());
  p.ext = {rng(), static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()),
           static_cast<uint32_t>(rng())};
  // Bytes past head.bytes too: no encoder may carry them.
  for (uint8_t& b : p.payload) b = static_cast<uint8_t>(rng());
  return p;
}

TEST(DataPacket, RandomRoundTrip) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 2000; ++i) {
    DataPacket p = random_packet(rng);
    auto flits = encode_data_packet(p);
    ASSERT_TRUE(flits.ok()) << flits.error().to_string();
    EXPECT_EQ(flits->size(), data_packet_flits(p.head.bytes));
    // Through the link layer's byte form and back.
    std::vector<Flit> back;
    for (const Flit& f : *flits) back.push_back(*decode_flit(encode_flit(f)));
    auto d = decode_data_packet(back);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    p.head.length_flits = d->head.length_flits;
    p.head.crc = d->head.crc;
    EXPECT_EQ(d->head, p.head);
    EXPECT_EQ(d->ext, p.ext);
    EXPECT_TRUE(std::equal(p.data().begin(), p.data().end(), d->data().begin()));
  }
}

// What the flit-by-flit decoders make of link bytes (the reference the one-pass decoder must
// equal).
Result<DataPacket> decode_by_flits(std::span<const uint8_t> bytes) {
  if (bytes.size() % kFlitBytes != 0) return make_error(Code::kMalformed, 1, "not whole flits");
  std::vector<Flit> flits;
  for (size_t i = 0; i < bytes.size(); i += kFlitBytes) {
    auto f = decode_flit(bytes.subspan(i, kFlitBytes));
    if (!f.ok()) return f.error();
    flits.push_back(*f);
  }
  return decode_data_packet(flits);
}

void expect_same(const DataPacket& a, const DataPacket& b) {
  EXPECT_EQ(a.head, b.head);
  EXPECT_EQ(a.ext, b.ext);
  EXPECT_EQ(a.payload, b.payload);  // zero after the data in both
}

// The link-byte encoder writes exactly the bytes of the flit encoder; the one-pass decoder gives
// exactly what the flit decoders give.
TEST(DataPacket, LinkBytesEqualTheFlitsEncodedOneByOne) {
  std::mt19937_64 rng(16);
  for (int i = 0; i < 3000; ++i) {
    const DataPacket p = random_packet(rng);
    auto flits = encode_data_packet(p);
    ASSERT_TRUE(flits.ok()) << flits.error().to_string();
    std::vector<uint8_t> want(flits->size() * kFlitBytes);
    encode_flits(*flits, want.data());
    std::array<uint8_t, kMaxDataPacketLinkBytes> out;
    out.fill(0xA5);
    auto n = encode_data_packet_bytes(p, out);
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    ASSERT_EQ(*n, want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << "packet " << i;
    EXPECT_TRUE(std::all_of(out.begin() + *n, out.end(), [](uint8_t b) { return b == 0xA5; }));
    DataPacket fast;
    ASSERT_TRUE(decode_clean_data_packet(std::span(out).first(*n), &fast)) << "packet " << i;
    auto slow = decode_by_flits(want);
    ASSERT_TRUE(slow.ok());
    expect_same(fast, *slow);
  }
}

// Whatever a link does to the bytes, the one-pass decoder accepts exactly what the flit decoders
// accept, with the same result: flipped bits anywhere (covered by the CRC or not: the hop count,
// a flit's VC, its kind), a flit too many or too few, a length that is not whole flits.
TEST(DataPacket, OnePassDecoderAcceptsExactlyWhatTheFlitDecodersAccept) {
  std::mt19937_64 rng(17);
  int accepted = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    const DataPacket p = random_packet(rng);
    std::vector<uint8_t> bytes(kMaxDataPacketLinkBytes + 2 * kFlitBytes);
    bytes.resize(*encode_data_packet_bytes(p, bytes));
    switch (rng() % 4) {
      case 0:  // one bit (one in four outside the CRC: hops, VC, kind bits)
        bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // hop count, outside the CRC
        set_data_hops(bytes, static_cast<uint8_t>(rng()));
        break;
      case 2:  // length
        if (rng() % 2)
          bytes.resize(bytes.size() - 1 - rng() % std::min<size_t>(bytes.size(), kFlitBytes));
        else
          bytes.insert(bytes.end(), kFlitBytes, static_cast<uint8_t>(rng() % 2 ? 0 : rng()));
        break;
      default:  // several bytes
        for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
        break;
    }
    // The head alone, as an NRC reads it.
    std::optional<DataHead> head_fast = decode_data_head_bytes(bytes);
    auto head_flit = decode_flit(std::span<const uint8_t>(bytes).first(kFlitBytes));
    auto head_slow =
        head_flit.ok() ? decode_data_head(*head_flit) : Result<DataHead>(head_flit.error());
    ASSERT_EQ(head_fast.has_value(), head_slow.ok()) << "case " << i;
    if (head_fast) {
      EXPECT_EQ(*head_fast, *head_slow);
    }
    DataPacket fast;
    const bool clean = decode_clean_data_packet(bytes, &fast);
    auto slow = decode_by_flits(bytes);
    ASSERT_EQ(clean, slow.ok()) << "case " << i << ": " << (slow.ok() ? "" : slow.error().message);
    if (clean) {
      expect_same(fast, *slow);
      ++accepted;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(accepted, 2000);  // both outcomes well exercised
  EXPECT_GT(refused, 2000);
}

TEST(DataPacket, LinkByteEncoderRefusesWhatTheFlitEncoderRefusesAndShortBuffers) {
  std::array<uint8_t, kMaxDataPacketLinkBytes> out;
  DataPacket p = sample();
  p.head.vc = 3;
  EXPECT_TRUE(FailsWith(encode_data_packet_bytes(p, out), "vc = 3"));
  p = sample();
  p.head.bytes = 129;
  EXPECT_TRUE(FailsWith(encode_data_packet_bytes(p, out), "bytes = 129"));
  p = sample();
  p.head.flags = 0x10;
  EXPECT_TRUE(FailsWith(encode_data_packet_bytes(p, out), "flags = 0x10"));
  EXPECT_FALSE(check_data_packet(p).ok());
  EXPECT_TRUE(check_data_packet(sample()).ok());
  // 30 bytes: 4 flits, 100 link bytes.
  auto n = encode_data_packet_bytes(sample(), std::span(out).first(99));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().id, 1706);
  EXPECT_NE(n.error().message.find("99 bytes of room for 100"), std::string::npos)
      << n.error().message;
  EXPECT_EQ(*encode_data_packet_bytes(sample(), std::span(out).first(100)), 100u);
}

TEST(DataPacket, EncodeRejectsOutOfRangeFields) {
  DataPacket p = sample();
  p.head.vc = 3;
  EXPECT_TRUE(FailsWith(encode_data_packet(p), "vc = 3"));
  p = sample();
  p.head.bytes = 129;
  EXPECT_TRUE(FailsWith(encode_data_packet(p), "bytes = 129"));
  p = sample();
  p.head.kind = static_cast<PacketKind>(8);
  EXPECT_TRUE(FailsWith(encode_data_packet(p), "kind = 8"));
  p = sample();
  p.head.dest_vp = 64;
  EXPECT_TRUE(FailsWith(encode_data_packet(p), "dest_vp = 64"));
  p = sample();
  p.head.flags = 0x10;
  EXPECT_TRUE(FailsWith(encode_data_packet(p), "flags = 0x10"));
}

// Each dirty-packet kind of docs/system.md 1.1 the decoder can see is named by its error.
TEST(DataPacket, DecodeClassifiesDirtyPackets) {
  const std::vector<Flit> good = *encode_data_packet(sample());
  ASSERT_TRUE(decode_data_packet(good).ok());
  auto defect = [](const Result<DataPacket>& r) {
    return r.ok() ? DataDefect::kNone : data_defect_of(r.error());
  };
  // Missing head: the head flit lost, or no flits.
  std::vector<Flit> f(good.begin() + 1, good.end());
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kMissingHead);
  EXPECT_EQ(defect(decode_data_packet({})), DataDefect::kMissingHead);
  // Missing tail: the tail lost, or the next packet's head where a body flit should be.
  f.assign(good.begin(), good.end() - 1);
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kMissingTail);
  f = good;
  f[2] = good[0];
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kMissingTail);
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "flit 2 is a head before the tail"));
  // Too long: more flits than the head announces, flits after the tail, a length that the
  // payload bytes do not match.
  f = good;
  f.insert(f.end() - 1, good[2]);
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kTooLong);
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "5 flits, the head says length_flits = 4"));
  f = good;
  f.push_back(good[3]);
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kTooLong);
  f = good;
  put_bits(f[0].payload, 71, 8, 200);
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kTooLong);
  // Data error: one payload bit flipped, or one extension bit.
  f = good;
  f[2].payload[5] ^= 0x10;
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kDataError);
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "(data error)"));
  f = good;
  f[1].payload[0] ^= 1;
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kDataError);
  // Malformed in other ways.
  f = good;
  f[2].vc = 2;
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "flit 2 on vc 2, the head on vc 1"));
  f = good;
  put_bits(f[0].payload, 150, 1, 1);
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "reserved payload bits 109-191"));
  f = good;
  f[3].payload[20] = 1;
  EXPECT_TRUE(FailsWith(decode_data_packet(f), "tail padding"));
  EXPECT_EQ(defect(decode_data_packet(f)), DataDefect::kMalformed);
}

TEST(DataPacket, TransfersAreCutAtDestinationBoundaries) {
  EXPECT_EQ(packets_for(0, 128), 1u);
  EXPECT_EQ(packets_for(1, 128), 2u);
  EXPECT_EQ(packets_for(127, 2), 2u);
  EXPECT_EQ(packets_for(128, 1), 1u);
  EXPECT_EQ(packets_for(0, 0), 1u);
  EXPECT_EQ(packets_for(64, 1 << 20), (1u << 13) + 1);
  EXPECT_EQ(packet_bytes_at(125, 136, 0), 3u);
  EXPECT_EQ(packet_bytes_at(125, 136, 3), 128u);
  EXPECT_EQ(packet_bytes_at(125, 136, 131), 5u);
  // Flits: head, extension, then the data in 24-byte (192-bit) flit payloads.
  EXPECT_EQ(data_packet_flits(0), 2u);
  EXPECT_EQ(data_packet_flits(24), 3u);
  EXPECT_EQ(data_packet_flits(25), 4u);
  EXPECT_EQ(data_packet_flits(120), 7u);
  EXPECT_EQ(data_packet_flits(128), 8u);
  // 3 bytes before a boundary, one whole block, 5 after: 3 packets of 3, 128 and 5 bytes.
  EXPECT_EQ(transfer_traffic(125, 136), (Traffic{3, 136, 3 + 8 + 3}));
  EXPECT_EQ(transfer_traffic(0, 0), (Traffic{1, 0, 2}));
  // Every packet and byte of a transfer is counted once, whatever the alignment.
  for (uint64_t addr : {0u, 1u, 64u, 127u, 128u, 1000u})
    for (uint64_t len : {1u, 127u, 128u, 129u, 4096u, 100000u}) {
      Traffic t = transfer_traffic(addr, len);
      EXPECT_EQ(t.packets, packets_for(addr, len)) << addr << "+" << len;
      EXPECT_EQ(t.bytes, len);
      uint64_t sum = 0;
      for (uint64_t off = 0; off < len; off += packet_bytes_at(addr, len, off)) ++sum;
      EXPECT_EQ(sum, t.packets);
      EXPECT_LE(t.flits, t.packets * data_packet_flits(kDataPacketBytes));
    }
}

// The hop count (docs/protocol.md) round-trips, is rewritten in place by each NRC, and is
// outside the CRC: a packet whose count changed on the way still decodes, its data intact.
TEST(DataPacket, HopCountIsRewrittenInPlaceOutsideTheCrc) {
  DataPacket p = sample();
  p.head.hops = 7;
  auto flits = encode_data_packet(p);
  ASSERT_TRUE(flits.ok());
  auto back = decode_data_packet(*flits);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->head.hops, 7);
  set_data_hops((*flits)[0], 254);
  back = decode_data_packet(*flits);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->head.hops, 254);
  EXPECT_EQ(back->payload, p.payload);
  EXPECT_EQ(decode_data_head((*flits)[0])->hops, 254);
  // The same rewrite on the flit-encoded bytes that cross a live link.
  std::vector<uint8_t> bytes;
  for (const Flit& f : *flits) {
    auto b = encode_flit(f);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  set_data_hops(bytes, 3);
  auto head = decode_flit(std::span<const uint8_t>(bytes).first(kFlitBytes));
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(decode_data_head(*head)->hops, 3);
  // Any other bit of the head is still covered: the CRC catches it.
  put_bits((*flits)[0].payload, 40, 1, 1);  // src_node 0x0007 becomes 0x0107
  back = decode_data_packet(*flits);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(data_defect_of(back.error()), DataDefect::kDataError);
}

}  // namespace
}  // namespace galaxy::wire
