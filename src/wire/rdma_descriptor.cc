#include "wire/rdma_descriptor.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/bits.h"

namespace galaxy::wire {
namespace {

constexpr size_t kOpBit = 0;               // 2 bits
constexpr size_t kFenBit = 2;              // 1 bit
constexpr size_t kCompletionBit = 3;       // 3 bits
constexpr size_t kLocalCqBit = 6;          // 1 bit
constexpr size_t kReserved0Bit = 7;        // 1 bit
constexpr size_t kRemoteVpBit = 8;         // 6 bits
constexpr size_t kRemoteNodeHighBit = 14;  // bit 16 of remote_node
constexpr size_t kReserved1Bit = 15;       // 1 bit
constexpr size_t kRemoteNodeBit = 16;      // 16 bits
constexpr size_t kLengthBit = 32;          // 32 bits
constexpr size_t kLocalAddressBit = 64;    // 64 bits
constexpr size_t kRemoteAddressBit = 128;
constexpr size_t kRemoteKeyBit = 192;  // 32 bits
constexpr size_t kCpCountBit = 224;    // 16 bits
constexpr size_t kReserved2Bit = 240;  // 16 bits
constexpr size_t kNotifyAddressBit = 256;
constexpr size_t kNotifyDataByte = 40;  // 16 bytes
constexpr size_t kLocalKeyBit = 448;    // 32 bits
constexpr size_t kNotifyKeyBit = 480;   // 32 bits
constexpr uint8_t kMaxVp = 63;

bool carries_notify_address(Completion c) {
  return c == Completion::kEvent || c == Completion::kTrailingImmediate;
}
bool carries_notify_data(Completion c) {
  return carries_notify_address(c) || c == Completion::kTrailingMp;
}
size_t inline_bytes(uint32_t immediate_length) {
  return (immediate_length + kRdmaDescriptorBytes - 1) / kRdmaDescriptorBytes *
         kRdmaDescriptorBytes;
}

}  // namespace

size_t rdma_descriptor_size(const RdmaDescriptor& d) {
  if (d.op != RdmaOp::kImmediate) return kRdmaDescriptorBytes;
  return kRdmaDescriptorBytes + inline_bytes(std::min<uint32_t>(d.length, kMaxImmediateBytes));
}

Result<size_t> peek_rdma_descriptor_size(std::span<const uint8_t> b) {
  if (b.size() < kRdmaDescriptorBytes) {
    return make_error(Code::kMalformed, 1400,
                      fmt::format("rdma descriptor: length = {} bytes, expected at least {}",
                                  b.size(), kRdmaDescriptorBytes));
  }
  auto op = static_cast<uint8_t>(get_bits(b, kOpBit, 2));
  if (op > kMaxRdmaOp) {
    return make_error(Code::kMalformed, 1401,
                      fmt::format("rdma descriptor: op = {} exceeds {}", op, kMaxRdmaOp));
  }
  if (static_cast<RdmaOp>(op) != RdmaOp::kImmediate) return size_t{kRdmaDescriptorBytes};
  auto length = static_cast<uint32_t>(get_bits(b, kLengthBit, 32));
  if (length < 1 || length > kMaxImmediateBytes) {
    return make_error(Code::kMalformed, 1402,
                      fmt::format("rdma descriptor: length = {}, expected 1-{} for immediate",
                                  length, kMaxImmediateBytes));
  }
  return kRdmaDescriptorBytes + inline_bytes(length);
}

Result<std::vector<uint8_t>> encode_rdma_descriptor(const RdmaDescriptor& d) {
  if (static_cast<uint8_t>(d.op) > kMaxRdmaOp) {
    return make_error(Code::kInvalidArgument, 1410,
                      fmt::format("rdma descriptor: op = {} exceeds {}",
                                  static_cast<unsigned>(d.op), kMaxRdmaOp));
  }
  if (static_cast<uint8_t>(d.completion) > kMaxCompletion) {
    return make_error(Code::kInvalidArgument, 1411,
                      fmt::format("rdma descriptor: completion = {} exceeds {}",
                                  static_cast<unsigned>(d.completion), kMaxCompletion));
  }
  if (d.remote_vp > kMaxVp) {
    return make_error(
        Code::kOutOfRange, 1412,
        fmt::format("rdma descriptor: remote_vp = {} exceeds {}", d.remote_vp, kMaxVp));
  }
  if (auto why = chip_id_refusal("rdma descriptor", {{"remote_node", d.remote_node}}))
    return make_error(Code::kOutOfRange, 1414, *why);
  bool immediate = d.op == RdmaOp::kImmediate;
  if (immediate && (d.length < 1 || d.length > kMaxImmediateBytes)) {
    return make_error(Code::kOutOfRange, 1413,
                      fmt::format("rdma descriptor: length = {}, expected 1-{} for immediate",
                                  d.length, kMaxImmediateBytes));
  }
  std::vector<uint8_t> b(rdma_descriptor_size(d), 0);
  std::span<uint8_t> s(b);
  put_bits(s, kOpBit, 2, static_cast<uint8_t>(d.op));
  put_bits(s, kFenBit, 1, d.fen);
  put_bits(s, kCompletionBit, 3, static_cast<uint8_t>(d.completion));
  put_bits(s, kLocalCqBit, 1, d.local_cq);
  put_bits(s, kRemoteVpBit, 6, d.remote_vp);
  put_bits(s, kRemoteNodeBit, 16, chip_id_low(d.remote_node));
  put_bits(s, kRemoteNodeHighBit, 1, chip_id_high(d.remote_node));
  put_bits(s, kLengthBit, 32, d.length);
  if (!immediate) put_bits(s, kLocalAddressBit, 64, d.local_address);
  put_bits(s, kRemoteAddressBit, 64, d.remote_address);
  put_bits(s, kRemoteKeyBit, 32, d.remote_key);
  if (!immediate) put_bits(s, kLocalKeyBit, 32, d.local_key);
  put_bits(s, kCpCountBit, 16, d.cp_count);
  if (carries_notify_address(d.completion)) {
    put_bits(s, kNotifyAddressBit, 64, d.notify_address);
    put_bits(s, kNotifyKeyBit, 32, d.notify_key);
  }
  if (carries_notify_data(d.completion)) {
    std::copy(d.notify_data.begin(), d.notify_data.end(), b.begin() + kNotifyDataByte);
  }
  if (immediate) {
    std::copy_n(d.immediate_data.begin(), d.length, b.begin() + kRdmaDescriptorBytes);
  }
  return b;
}

uint16_t peek_rdma_cp_count(std::span<const uint8_t> bytes) {
  if (bytes.size() < kRdmaDescriptorBytes) return 0;
  return static_cast<uint16_t>(get_bits(bytes, kCpCountBit, 16));
}

void clear_rdma_cp_count(std::span<uint8_t> bytes) {
  if (bytes.size() >= kRdmaDescriptorBytes) put_bits(bytes, kCpCountBit, 16, 0);
}

Result<RdmaDescriptor> decode_rdma_descriptor(std::span<const uint8_t> b) {
  auto size = peek_rdma_descriptor_size(b);
  if (!size.ok()) return size.error();
  if (b.size() != *size) {
    return make_error(
        Code::kMalformed, 1420,
        fmt::format("rdma descriptor: length = {} bytes, expected {}", b.size(), *size));
  }
  RdmaDescriptor d;
  d.op = static_cast<RdmaOp>(get_bits(b, kOpBit, 2));
  auto completion = static_cast<uint8_t>(get_bits(b, kCompletionBit, 3));
  if (completion > kMaxCompletion) {
    return make_error(
        Code::kMalformed, 1421,
        fmt::format("rdma descriptor: completion = {} exceeds {}", completion, kMaxCompletion));
  }
  d.completion = static_cast<Completion>(completion);
  uint64_t reserved = get_bits(b, kReserved0Bit, 1) | get_bits(b, kReserved1Bit, 1) |
                      get_bits(b, kReserved2Bit, 16);
  if (reserved != 0) {
    return make_error(Code::kMalformed, 1422,
                      "rdma descriptor: reserved bits 7/15/240-255 set, expected 0");
  }
  d.local_cq = get_bits(b, kLocalCqBit, 1) != 0;
  d.local_key = static_cast<uint32_t>(get_bits(b, kLocalKeyBit, 32));
  d.notify_key = static_cast<uint32_t>(get_bits(b, kNotifyKeyBit, 32));
  d.fen = get_bits(b, kFenBit, 1) != 0;
  d.remote_vp = static_cast<uint8_t>(get_bits(b, kRemoteVpBit, 6));
  d.remote_node = chip_id_of(get_bits(b, kRemoteNodeBit, 16), get_bits(b, kRemoteNodeHighBit, 1));
  d.length = static_cast<uint32_t>(get_bits(b, kLengthBit, 32));
  d.local_address = get_bits(b, kLocalAddressBit, 64);
  d.remote_address = get_bits(b, kRemoteAddressBit, 64);
  d.remote_key = static_cast<uint32_t>(get_bits(b, kRemoteKeyBit, 32));
  d.cp_count = static_cast<uint16_t>(get_bits(b, kCpCountBit, 16));
  d.notify_address = get_bits(b, kNotifyAddressBit, 64);
  std::copy_n(b.begin() + kNotifyDataByte, kNotifyDataBytes, d.notify_data.begin());
  bool immediate = d.op == RdmaOp::kImmediate;
  if (immediate && (d.local_address != 0 || d.local_key != 0)) {
    return make_error(Code::kMalformed, 1423,
                      fmt::format("rdma descriptor: local_address = {:#x}, local_key = {:#x}, "
                                  "expected 0 for immediate",
                                  d.local_address, d.local_key));
  }
  if (!carries_notify_address(d.completion) && (d.notify_address != 0 || d.notify_key != 0)) {
    return make_error(Code::kMalformed, 1424,
                      fmt::format("rdma descriptor: notify_address = {:#x}, notify_key = {:#x}, "
                                  "expected 0 for completion {}",
                                  d.notify_address, d.notify_key, completion));
  }
  if (!carries_notify_data(d.completion) &&
      std::any_of(d.notify_data.begin(), d.notify_data.end(), [](uint8_t x) { return x != 0; })) {
    return make_error(
        Code::kMalformed, 1425,
        fmt::format("rdma descriptor: notify_data not zero for completion {}", completion));
  }
  if (immediate) {
    std::copy_n(b.begin() + kRdmaDescriptorBytes, d.length, d.immediate_data.begin());
    for (size_t i = kRdmaDescriptorBytes + d.length; i < b.size(); ++i) {
      if (b[i] != 0) {
        return make_error(Code::kMalformed, 1426,
                          fmt::format("rdma descriptor: immediate padding byte {} = {:#x}, "
                                      "expected 0",
                                      i, b[i]));
      }
    }
  }
  return d;
}

}  // namespace galaxy::wire
