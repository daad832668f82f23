#include "chip/rdma_transfer.h"

#include "chip/data_vc.h"

namespace galaxy::chip {

using wire::Completion;
using wire::DataPacket;
using wire::PacketKind;
using wire::RdmaOp;

namespace {
// Read request payload layout, bit offsets (wire/data_packet.h kReadRequestBytes).
constexpr size_t kRqLocalAddress = 0;
constexpr size_t kRqLocalKey = 64;
constexpr size_t kRqNotifyKey = 96;
constexpr size_t kRqNotifyAddress = 128;
constexpr size_t kRqNotifyData = 24;  // bytes

void transfer_head(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag, DataPacket& p) {
  p.head = {};
  p.ext = {};
  p.head.dest_node = d.remote_node;
  p.head.dest_vp = d.remote_vp;
  p.head.src_vp = src_vp;
  p.head.tag = tag;
  p.head.flags = wire::kDataFlagInTransfer;
}
}  // namespace

uint64_t rdma_data_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                          uint64_t sent, DataPacket& p) {
  transfer_head(d, src_vp, tag, p);
  if (d.completion != Completion::kNone) p.head.flags |= wire::kDataFlagNotified;
  const uint64_t n = wire::packet_bytes_at(d.remote_address, d.length, sent);
  p.head.kind = d.op == RdmaOp::kImmediate ? PacketKind::kImmediate : PacketKind::kRdmaWrite;
  p.head.bytes = static_cast<uint8_t>(n);
  p.ext = {d.remote_address, d.remote_key, static_cast<uint32_t>(sent), d.length};
  return n;
}

void rdma_notice_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                        DataPacket& p) {
  transfer_head(d, src_vp, tag, p);
  p.head.flags |= wire::kDataFlagNotified;
  p.head.bytes = static_cast<uint8_t>(wire::kNotifyDataBytes);
  std::copy(d.notify_data.begin(), d.notify_data.end(), p.payload.begin());
  switch (d.completion) {
    case Completion::kEvent:
      p.head.kind = PacketKind::kEvent;
      p.ext = {d.notify_address, d.notify_key, 0, kEventBytes};
      break;
    case Completion::kTrailingImmediate:
      p.head.kind = PacketKind::kImmediate;
      p.head.flags |= wire::kDataFlagTrailing;
      p.ext = {d.notify_address, d.notify_key, 0, wire::kNotifyDataBytes};
      break;
    case Completion::kTrailingMp:
    case Completion::kNone:
      p.head.kind = PacketKind::kMp;
      p.head.flags |= wire::kDataFlagTrailing;
      break;
  }
}

void rdma_read_request_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                              DataPacket& p) {
  transfer_head(d, src_vp, tag, p);
  p.head.kind = PacketKind::kRdmaReadRequest;
  if (d.completion == Completion::kEvent) p.head.flags |= wire::kDataFlagNotified;
  p.ext = {d.remote_address, d.remote_key, 0, d.length};
  p.head.bytes = static_cast<uint8_t>(wire::kReadRequestBytes);
  put_bits(p.payload, kRqLocalAddress, 64, d.local_address);
  put_bits(p.payload, kRqLocalKey, 32, d.local_key);
  put_bits(p.payload, kRqNotifyKey, 32, d.notify_key);
  put_bits(p.payload, kRqNotifyAddress, 64, d.notify_address);
  std::copy(d.notify_data.begin(), d.notify_data.end(), &p.payload[kRqNotifyData]);
}

void rdma_ack_packet(wire::ChipId dest, uint8_t dest_vp, uint16_t tag, uint16_t error_id,
                     uint64_t bytes, DataPacket& p) {
  p = {};
  p.head.kind = PacketKind::kAck;
  p.head.dest_node = dest;
  p.head.dest_vp = dest_vp;
  p.head.tag = tag;
  p.ext.offset = error_id;
  p.ext.length = static_cast<uint32_t>(bytes);
}

Status seal_data_packet(DataPacket& p, wire::ChipId src) {
  p.head.vc = data_vc(p.head.kind);
  p.head.src_node = src;
  if (Status s = wire::check_data_packet(p); !s.ok()) return s;
  p.head.length_flits = static_cast<uint16_t>(wire::data_packet_flits(p.head.bytes));
  return {};
}

uint64_t rdma_response_packet(const RdmaReadJob& j, DataPacket& p) {
  const uint64_t n = wire::packet_bytes_at(j.dest, j.length, j.sent);
  p.head = {};
  p.head.kind = PacketKind::kRdmaReadResponse;
  p.head.dest_node = j.requester;
  p.head.dest_vp = j.requester_vp;
  p.head.tag = j.tag;
  p.head.bytes = static_cast<uint8_t>(n);
  p.ext = {j.dest, j.dest_key, static_cast<uint32_t>(j.sent), j.length};
  return n;
}

bool rdma_response_answers(const wire::RdmaDescriptor& d, const DataPacket& p, uint64_t more) {
  return d.op == RdmaOp::kRead && p.head.src_node == d.remote_node &&
         p.ext.address == d.local_address && p.ext.length == d.length &&
         rdma_placed(p.ext, p.head.bytes) && rdma_run_placed(p.ext, p.head.bytes, more);
}

Status check_read_request(const DataPacket& p) {
  if (p.head.bytes == wire::kReadRequestBytes) return {};
  return make_error(
      Code::kMalformed, 2075,
      fmt::format("read request of {} bytes, expected {}", p.head.bytes, wire::kReadRequestBytes));
}

RdmaReadJob read_job_of(const DataPacket& p) {
  const wire::DataHead& h = p.head;
  RdmaReadJob j;
  j.requester = h.src_node;
  j.requester_vp = h.src_vp;
  j.tag = h.tag;
  j.source = p.ext.address;
  j.source_key = p.ext.key;
  j.length = p.ext.length;
  j.dest = get_bits(p.payload, kRqLocalAddress, 64);
  j.dest_key = static_cast<uint32_t>(get_bits(p.payload, kRqLocalKey, 32));
  j.event = (h.flags & wire::kDataFlagNotified) != 0;
  j.notify_key = static_cast<uint32_t>(get_bits(p.payload, kRqNotifyKey, 32));
  j.notify_address = get_bits(p.payload, kRqNotifyAddress, 64);
  std::copy_n(&p.payload[kRqNotifyData], wire::kNotifyDataBytes, j.notify_data.begin());
  return j;
}

}  // namespace galaxy::chip
